package review

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/airlock/airlock/names"
)

// lookalike is another name in the same directory, the project's or one the
// session wrote, that a name the session added looks like: the file's own
// name, or the name of a folder the session made for it (name is then
// that folder's path).
type lookalike struct {
	name      string
	other     string
	how       names.How
	inProject bool
}

// lookalikes finds, for each path the session added or renamed to, a name
// in its directory that looks like it (names.Index): a name the project has
// there (less those the session deleted), or another the session added.
// The folders the session made (a folder with files is not a change of
// its own) are looked at too (Src/ beside the project's src/). Keyed by
// path; nil when none. It reads the project's directories (the trusted
// side) only where the session added a name.
func lookalikes(ctx context.Context, r *roots, items []listed) (map[string]lookalike, error) {
	added := map[string][]string{} // directory -> base names the session added there
	deleted := map[string]bool{}
	folders := map[string]bool{} // the folders above added paths, looked at once each
	for i := range items {
		it := &items[i]
		switch it.kind() {
		case Added, Renamed:
			if it.full != nil && it.full.From != "" {
				deleted[it.full.From] = true // a rename's old name is gone: Readme.md -> README.md is no look-alike
			}
			dir, base := path.Split(it.path)
			added[dir] = append(added[dir], base)
			for d := strings.TrimSuffix(dir, "/"); d != "" && !folders[d]; d = path.Dir(d) {
				folders[d] = true
				if r.project != nil {
					if _, err := r.project.Lstat(d); err == nil {
						break // the project's: its name is not the session's
					}
				}
				if parent, base := path.Split(d); !slices.Contains(added[parent], base) {
					added[parent] = append(added[parent], base)
				}
				if !strings.Contains(d, "/") {
					break
				}
			}
		case Deleted:
			deleted[it.path] = true
		}
	}
	var out map[string]lookalike
	found := func(p string, l lookalike) {
		if out == nil {
			out = map[string]lookalike{}
		}
		if old, ok := out[p]; !ok || l.inProject && !old.inProject || l.inProject == old.inProject && l.other < old.other {
			out[p] = l
		}
	}
	for dir, bases := range added {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		x := names.NewIndex(len(bases))
		for _, b := range bases {
			x.Add(b)
		}
		for _, b := range bases {
			if o, h, ok := x.Like(b); ok {
				found(dir+b, lookalike{name: dir + b, other: dir + o, how: h})
			}
		}
		if r.project == nil {
			continue
		}
		rel := strings.TrimSuffix(dir, "/")
		if rel == "" {
			rel = "."
		}
		theirs, err := r.project.ReadDirNames(rel, 0)
		if err != nil {
			continue // not a directory of the project: the session made it
		}
		for _, p := range theirs {
			if deleted[dir+p] {
				continue
			}
			for _, b := range x.All(p) {
				found(dir+b, lookalike{name: dir + b, other: dir + p, how: names.Explain(b, p), inProject: true})
			}
		}
	}
	return out, nil
}

// nameFindings flags a name the session gave a file (d is added or renamed
// to its path): characters that make it display as something else, and a
// look-alike of another name in its directory. Each finding says what the
// name is (quoted) and what it looks like.
func nameFindings(d *FileDiff) []Finding {
	if d.Kind != Added && d.Kind != Renamed {
		return nil
	}
	var out []Finding
	q := names.Quote(d.Path)
	byKind := map[names.Kind][]string{}
	var kinds []names.Kind
	for _, p := range names.Check(d.Path) {
		if byKind[p.Kind] == nil {
			kinds = append(kinds, p.Kind)
		}
		byKind[p.Kind] = append(byKind[p.Kind], p.Char)
	}
	display := names.Quote(names.Display(d.Path))
	for _, k := range kinds {
		chars := strings.Join(uniq(byKind[k]), ", ")
		var m string
		switch k {
		case names.Control:
			m = fmt.Sprintf("the name %s holds control characters (%s): shown as it is, it breaks the line it is on and can forge others", q, chars)
		case names.Escape:
			m = fmt.Sprintf("the name %s holds a terminal escape (%s): shown as it is, it drives the terminal that shows it", q, chars)
		case names.Bidi:
			m = fmt.Sprintf("the name %s holds bidirectional controls (%s): it displays as %s", q, chars, display)
		case names.Invisible:
			m = fmt.Sprintf("the name %s holds invisible characters (%s): it displays as %s", q, chars, display)
		case names.InvalidUTF8:
			m = fmt.Sprintf("the name %s is not valid UTF-8 (%s): each program shows it its own way", q, chars)
		}
		out = append(out, Finding{Scanner: "names", Rule: string(k), Message: m})
	}
	if l := d.lookalike; l != nil {
		whose := "another name this session wrote"
		if l.inProject {
			whose = "a name the project has"
		}
		what := "the name " + q
		if l.name != d.Path {
			what = "the folder " + names.Quote(l.name) + " of " + q
		}
		out = append(out, Finding{Scanner: "names", Rule: "lookalike",
			Message: fmt.Sprintf("%s looks like %s, %s in the same folder (%s)", what, names.Quote(l.other), whose, howSaid[l.how])})
	}
	return out
}

var howSaid = map[names.How]string{
	names.Normalisation: "the same letters composed differently",
	names.Hidden:        "the same but for invisible characters",
	names.Case:          "the same but for case",
	names.Confusable:    "look-alike letters",
}

func uniq(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// lookalikeOf is the look-alike of path, or of the nearest folder above
// it the session made, in looks (nil: none).
func lookalikeOf(looks map[string]lookalike, p string) *lookalike {
	if len(looks) == 0 {
		return nil
	}
	for ; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if l, ok := looks[p]; ok {
			return &l
		}
	}
	return nil
}
