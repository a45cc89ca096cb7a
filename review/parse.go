package review

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/names"
	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"golang.org/x/sys/unix"
)

// An edited patch (`accept --patch`) is read by go-gitdiff, the parser of
// git's patch format, and applied here to the project's current files the
// way `git apply` would: text hunks, binary patches (literal and delta),
// renames, copies, mode changes, new and deleted files. The patch is
// hostile input: its size, what it may write and every name in it are
// bounded or checked before anything reaches Accept.
const (
	// maxEditedPatch bounds what parsePatch reads (the engine's request
	// limit is far lower).
	maxEditedPatch = 256 << 20
	// maxPatchedBytes bounds what applying one edited patch produces, all
	// files together: a few kilobytes of deflated binary data can inflate
	// to gigabytes.
	maxPatchedBytes = 64 << 20
)

// parsePatch reads a patch as git writes it (`airlock diff --patch`, `git
// diff --binary`) or a plain unified diff with ---/+++ headers. Every name
// in what it returns is a clean path relative to the project: an absolute
// name, a ".." or a name inside .git refuses the whole patch.
func parsePatch(r io.Reader) ([]*gitdiff.File, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxEditedPatch+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxEditedPatch {
		return nil, fmt.Errorf("the patch is larger than %s: accept large files by path and the rest with --patch", sizeStr(maxEditedPatch))
	}
	files, _, err := gitdiff.Parse(bytes.NewReader(data))
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "gitdiff: ")
		if strings.Contains(msg, "miscounts lines") {
			msg += ": an edited hunk's @@ line must count its lines (old: ' ' and '-' lines, new: ' ' and '+' lines)"
		}
		return nil, errors.New("patch " + msg)
	}
	// Without git's headers, names keep their a/ and b/ prefixes.
	plain := !bytes.Contains(data, []byte("diff --git "))
	for _, f := range files {
		for _, name := range []*string{&f.OldName, &f.NewName} {
			if *name == "" {
				continue
			}
			if plain {
				*name = strings.TrimPrefix(strings.TrimPrefix(*name, "a/"), "b/")
			}
			c, err := CleanPath(*name)
			var pe *PathError
			if errors.As(err, &pe) {
				return nil, &PathError{Path: pe.Path, Reason: "in the patch: " + pe.Reason + "; nothing was accepted"}
			}
			if c == "." || slices.Contains(strings.Split(c, "/"), ".git") {
				return nil, &PathError{Path: *name, Reason: "not a file of the project's working tree (.git is never part of a session's changes)"}
			}
			*name = c
		}
	}
	return files, nil
}

// version is one path's file or symlink as an edited patch sees it: its
// data is nil (and big set) when the project's file is larger than what
// an edited patch may write, so that only its mode can change.
type version struct {
	t    Type
	mode fs.FileMode
	data []byte
	big  bool
}

// patched is what an edited patch makes of one path of the project.
type patched struct {
	path string
	// from is a rename's source: it leaves the project.
	from string
	// orig is the project's version before the patch (nil: none); now is
	// the patch's (nil: deleted).
	orig, now *version
}

// applyPatch applies files, in order, to the project's versions that read
// gives (nil: nothing there), and returns what each touched path becomes,
// in the order the patch first touched them. Nothing is written: a hunk
// that does not match is a conflict (errdefs.Conflict) naming the file and
// the hunk.
func applyPatch(files []*gitdiff.File, read func(rel string) (*version, error)) ([]patched, error) {
	state := map[string]*version{} // path -> its version so far (nil: gone)
	origs := map[string]*version{}
	var order []string
	from := map[string]string{}
	get := func(p string) (*version, error) {
		if s, ok := state[p]; ok {
			return s, nil
		}
		s, err := read(p)
		if err != nil {
			return nil, err
		}
		state[p], origs[p] = s, s
		order = append(order, p)
		return s, nil
	}
	budget := int64(maxPatchedBytes)
	for _, f := range files {
		name := f.NewName
		if f.IsDelete {
			name = f.OldName
		}
		var src *version
		if !f.IsNew {
			var err error
			if src, err = get(f.OldName); err != nil {
				return nil, err
			}
			switch {
			case src == nil:
				return nil, notApplied(f.OldName, "the project has no %s (anymore)", f.OldName)
			case src.t != File && src.t != Symlink:
				return nil, notApplied(f.OldName, "the project has a %s there", src.t)
			case f.OldMode != 0 && gitType(f.OldMode) != src.t:
				return nil, notApplied(f.OldName, "the patch expects a %s and the project has a %s", gitType(f.OldMode), src.t)
			}
		}
		if f.IsNew || (f.IsRename || f.IsCopy) && f.NewName != f.OldName {
			dst, err := get(f.NewName)
			if err != nil {
				return nil, err
			}
			if dst != nil {
				return nil, notApplied(f.NewName, "the patch creates %s, which the project already has", f.NewName)
			}
		}
		now, err := applyFile(f, src, name, &budget)
		if err != nil {
			return nil, err
		}
		if f.IsDelete {
			state[f.OldName] = nil
			continue
		}
		if f.IsRename && f.NewName != f.OldName {
			state[f.OldName] = nil
			from[f.NewName] = f.OldName
			if s, ok := from[f.OldName]; ok { // renamed twice
				from[f.NewName] = s
				delete(from, f.OldName)
			}
		}
		state[f.NewName] = now
	}
	moved := map[string]bool{}
	for _, s := range from {
		moved[s] = true
	}
	var out []patched
	for _, p := range order {
		now, orig := state[p], origs[p]
		if from[p] != "" {
			orig = origs[from[p]]
		} else if moved[p] && now == nil || sameVersion(orig, now) {
			continue // a rename's source, or unchanged
		}
		out = append(out, patched{path: p, from: from[p], orig: orig, now: now})
	}
	return out, nil
}

// applyFile is one file's section applied to src (nil for a new file).
func applyFile(f *gitdiff.File, src *version, name string, budget *int64) (*version, error) {
	now := &version{t: File, mode: 0o644}
	if src != nil {
		now.t, now.mode = src.t, src.mode
	}
	if !f.IsDelete && f.NewMode != 0 {
		t := gitType(f.NewMode)
		if t != File && t != Symlink {
			return nil, invalidPatch(name, "mode %o is neither a file nor a symlink: accept that change by path", uint32(f.NewMode))
		}
		// A mode git sees as the project's keeps the project's exact bits.
		if src == nil || src.t != t || gitMode(src.t, src.mode) != fmt.Sprintf("%o", uint32(f.NewMode)) {
			now.t, now.mode = t, gitPerm(f.NewMode)
		}
	}
	if len(f.TextFragments) == 0 && f.BinaryFragment == nil {
		if src != nil {
			now.data, now.big = src.data, src.big
		}
		return now, nil
	}
	if src != nil && src.big {
		return nil, invalidPatch(name, "the project's file is larger than %s, the most an edited patch writes: accept it by path", sizeStr(maxPatchedBytes))
	}
	var old []byte
	if src != nil {
		old = src.data
	}
	if f.IsBinary {
		// Binary data says nothing about the file it replaces: like git,
		// apply it only to the very file the patch names by its full id.
		if !f.IsNew && (len(f.OldOIDPrefix) != len(zeroID) || f.OldOIDPrefix != blobID(old)) {
			if len(f.OldOIDPrefix) != len(zeroID) {
				return nil, invalidPatch(name, "a binary patch needs its full index line (as `git diff --binary` and `airlock diff --patch` write it)")
			}
			return nil, notApplied(name, "the patch's binary data was made against another version of %s", name)
		}
		if f.BinaryFragment == nil {
			return nil, invalidPatch(name, "the patch says binary files differ but carries no binary data: make it with `git diff --binary` or `airlock diff ID --patch`")
		}
	}
	var out bytes.Buffer
	w := &cappedWriter{w: &out, left: *budget}
	if f.IsBinary {
		a := gitdiff.NewBinaryApplier(w, bytes.NewReader(old), gitdiff.WithMaxBinaryFragmentBytes(*budget))
		if err := a.ApplyFragment(f.BinaryFragment); err != nil {
			return nil, applyErr(name, err, "the binary data")
		}
		if len(f.NewOIDPrefix) == len(zeroID) && blobID(out.Bytes()) != f.NewOIDPrefix {
			return nil, invalidPatch(name, "its binary data does not make the file its index line names (the data was damaged)")
		}
	} else {
		frags := slices.Clone(f.TextFragments)
		slices.SortStableFunc(frags, func(a, b *gitdiff.TextFragment) int { return int(a.OldPosition - b.OldPosition) })
		a := gitdiff.NewTextApplier(w, bytes.NewReader(old))
		for _, frag := range frags {
			k := slices.Index(f.TextFragments, frag)
			what := fmt.Sprintf("hunk %d of %d (%s)", k+1, len(f.TextFragments), strings.TrimSpace(clipLine(frag.Header())))
			if err := a.ApplyFragment(frag); err != nil {
				return nil, applyErr(name, err, what)
			}
		}
		if err := a.Close(); err != nil {
			return nil, applyErr(name, err, "the rest of the file")
		}
	}
	*budget -= int64(out.Len())
	now.data = out.Bytes()
	if f.IsDelete && len(now.data) > 0 {
		return nil, notApplied(name, "the patch deletes %s, but the project's file has more than the patch removes", name)
	}
	return now, nil
}

// applyErr turns go-gitdiff's apply error into one that names the file and
// the hunk and says what to do.
func applyErr(name string, err error, what string) error {
	var cw *capError
	if errors.As(err, &cw) || strings.Contains(err.Error(), "byte limit") {
		return invalidPatch(name, "it writes more than %s, the most an edited patch writes: accept large files by path", sizeStr(maxPatchedBytes))
	}
	var ae *gitdiff.ApplyError
	at := ""
	if errors.As(err, &ae) && ae.Line > 0 {
		at = fmt.Sprintf(" at line %d", ae.Line)
	}
	if errors.Is(err, &gitdiff.Conflict{}) {
		return notApplied(name, "%s does not match the project's file%s", what, at)
	}
	return invalidPatch(name, "%s cannot be applied%s: %v", what, at, err)
}

// notApplied is a patch that does not fit the project as it is now: the
// project changed since the patch was made, or its edits changed what a
// hunk expects to find. Nothing was accepted.
func notApplied(name, format string, args ...any) error {
	return errdefs.Conflictf("the patch does not apply to the project's %s: %s; nothing was accepted: the project changed since the patch was made, or an edit changed a context or '-' line: make it again with `airlock diff ID --patch` and redo your edits", name, fmt.Sprintf(format, args...))
}

// invalidPatch is a patch that is wrong in itself.
func invalidPatch(name, format string, args ...any) error {
	return &PathError{Path: name, Reason: "in the patch: " + fmt.Sprintf(format, args...) + "; nothing was accepted: fix the patch, or make it again with `airlock diff ID --patch`"}
}

// gitType is the type of a git mode.
func gitType(m fs.FileMode) Type {
	switch m & 0o170000 {
	case 0o100000:
		return File
	case 0o120000:
		return Symlink
	case 0o040000:
		return Dir
	}
	return Special
}

// gitPerm is the permissions a git mode gives a file.
func gitPerm(m fs.FileMode) fs.FileMode {
	switch {
	case gitType(m) == Symlink:
		return fs.ModeSymlink | 0o777
	case m&0o111 != 0:
		return 0o755
	}
	return 0o644
}

func sameVersion(a, b *version) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.t == b.t && a.mode == b.mode && a.big == b.big && bytes.Equal(a.data, b.data)
}

func clipLine(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// cappedWriter refuses to write past left bytes.
type cappedWriter struct {
	w    io.Writer
	left int64
}

type capError struct{}

func (capError) Error() string { return "over the limit" }

func (c *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, &capError{}
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

// parseEdited parses an edited patch (see parsePatch) for planPatch.
func parseEdited(patch string) ([]*gitdiff.File, error) {
	files, err := parsePatch(strings.NewReader(patch))
	if err != nil {
		var pe *PathError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, &PathError{Path: "--patch", Reason: err.Error()}
	}
	if len(files) == 0 {
		return nil, &PathError{Path: "--patch", Reason: "the patch has no file in it: give an edited `airlock diff ID --patch`"}
	}
	return files, nil
}

// patchPaths are the paths an edited patch names.
func patchPaths(files []*gitdiff.File) map[string]bool {
	paths := map[string]bool{}
	for _, f := range files {
		for _, p := range []string{f.OldName, f.NewName} {
			if p != "" {
				paths[p] = true
			}
		}
	}
	return paths
}

// patchConcerns reports whether planPatch may look at d for a patch naming
// paths: d is at one of them, or is a directory added, deleted or replaced
// above one (see sessionChanged).
func patchConcerns(paths map[string]bool, d *FileDiff) bool {
	if paths[d.Path] || d.From != "" && paths[d.From] {
		return true
	}
	if (d.OldType == Dir) != (d.Type == Dir) {
		for p := range paths {
			if strings.HasPrefix(p, d.Path+"/") {
				return true
			}
		}
	}
	return false
}

// planPatch turns an edited patch into items: the project's files as the
// patch makes them, each one a file the session changed. A patch that does
// not apply, or applies only in part, is refused whole before anything is
// written.
func planPatch(l Layers, diffs []FileDiff, files []*gitdiff.File) ([]item, error) {
	project, err := confined.OpenRoot(l.Project)
	if err != nil {
		return nil, err
	}
	defer project.Close()
	results, err := applyPatch(files, func(rel string) (*version, error) { return readVersion(project, rel) })
	if err != nil {
		return nil, err
	}
	if len(results) == 0 {
		return nil, &PathError{Path: "--patch", Reason: "the patch changes nothing in the project"}
	}
	items := make([]item, 0, len(results))
	for _, r := range results {
		for _, p := range []string{r.path, r.from} {
			if p != "" && !sessionChanged(diffs, p) {
				return nil, &NotFoundError{What: fmt.Sprintf("the patch changes %s, which the session did not change: an edited patch may only narrow or edit the session's changes", names.Quote(p))}
			}
		}
		d := findDiff(diffs, r.path)
		if r.now != nil && r.now.t == Symlink && (d == nil || d.Type != Symlink) {
			return nil, &PathError{Path: r.path, Reason: "the patch makes it a symlink and the session did not: accept the session's change by path"}
		}
		items = append(items, patchItem(r, d))
	}
	return items, nil
}

// patchItem is the accept of one path as a patch made it: its content is
// written whole (renamed first, when it moved).
func patchItem(r patched, d *FileDiff) item {
	c := Change{Path: r.path, From: r.from}
	if r.orig != nil {
		c.OldType, c.OldMode = r.orig.t, r.orig.mode
	}
	if r.now == nil {
		c.Kind = Deleted
		return item{d: &FileDiff{Change: c}, whole: true}
	}
	c.Type, c.Mode = r.now.t, r.now.mode
	if d != nil && d.Type == c.Type && c.Type == File && c.Mode != c.OldMode && gitMode(File, d.Mode) == gitMode(File, c.Mode) {
		c.Mode = d.Mode // the session's own bits, as git would write them
	}
	switch {
	case r.from != "":
		c.Kind = Renamed
	case r.orig == nil:
		c.Kind = Added
	case c.OldType != c.Type:
		c.Kind = Replaced
	case c.Type == File && r.orig.big == r.now.big && bytes.Equal(r.orig.data, r.now.data):
		c.Kind = Mode
		return item{d: &FileDiff{Change: c}, whole: true}
	default:
		c.Kind = Modified
	}
	content := string(r.now.data)
	return item{d: &FileDiff{Change: c}, whole: true, content: &content}
}

// sessionChanged reports whether the session changed p: a change's path,
// a rename's source, or a path under a directory the session added,
// deleted or replaced.
func sessionChanged(diffs []FileDiff, p string) bool {
	for i := range diffs {
		d := &diffs[i]
		if d.Path == p || d.From == p {
			return true
		}
		if (d.OldType == Dir) != (d.Type == Dir) && strings.HasPrefix(p, d.Path+"/") {
			return true
		}
	}
	return false
}

// readVersion reads the project's rel for an edited patch, beneath the
// project root and never through a symlink: nil when nothing is there.
func readVersion(project *confined.Root, rel string) (*version, error) {
	fi, err := project.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR):
		return nil, nil
	case errors.Is(err, confined.ErrSymlink) || errors.Is(err, confined.ErrEscape):
		return nil, &PathError{Path: rel, Reason: "the project reaches it through a symlink: an edited patch never writes through one; accept the session's change by path, or move the symlink"}
	case err != nil:
		return nil, err
	}
	v := &version{t: typeOf(fi.Mode()), mode: fi.Mode()}
	switch v.t {
	case Symlink:
		target, err := project.Readlink(rel)
		v.data = []byte(target)
		return v, err
	case File:
		if fi.Size() > maxPatchedBytes {
			v.big = true
			return v, nil
		}
		v.data, err = project.ReadFile(rel, maxPatchedBytes)
		if errors.Is(err, confined.ErrTooLarge) {
			v.data, v.big, err = nil, true, nil
		}
		return v, err
	}
	return v, nil
}
