package review

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Selection says which changes an accept or discard takes: whole files at
// or under Paths, and/or single hunks and conflicts by id, optionally only
// some lines of a hunk. Take settles the conflicts in what is selected.
// An empty selection takes everything.
type Selection struct {
	Paths []string `json:"paths,omitempty"`
	// RawPaths are paths given as bytes (for names that are not UTF-8).
	RawPaths [][]byte         `json:"raw_paths,omitempty"`
	Hunks    []string         `json:"hunks,omitempty"`
	Lines    map[string][]int `json:"lines,omitempty"` // hunk id -> 1-based indexes into its lines
	Take     Resolution       `json:"take,omitempty"`
	// Auto takes only the changes the policy auto-accepts: matched by
	// auto_accept, not held, no scanner finding, no conflict.
	Auto bool `json:"auto,omitempty"`
	// Commits (accept only) imports the session's git commits into the
	// project's repository as Branch (default airlock/<session>), leaving
	// the working tree alone. With no paths or hunks, only that happens.
	Commits bool   `json:"commits,omitempty"`
	Branch  string `json:"branch,omitempty"`
	// Patch (accept only) is an edited version of the session's diff, as
	// `airlock diff --patch` prints it: its hunks are applied to the
	// project's files instead of the session's changes. Each file in it
	// must be one the session changed.
	Patch string `json:"patch,omitempty"`
}

// item is what an accept or discard does to one file.
type item struct {
	d *FileDiff
	// whole: the file's full change (content from target, or the session's
	// file); otherwise content is given.
	whole    bool
	content  *string
	keepMode bool // partial change: the project's mode stays
	skip     bool // nothing to write (e.g. "take host" of a whole conflict)
	err      error
}

// NotFoundError names hunk ids or paths that select nothing.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What }

// plan turns a selection into per-file items. forAccept: conflicts need a
// Take; for discard, hunks are removed from the session instead of added
// to the project.
func plan(l Layers, diffs []FileDiff, sel Selection, forAccept bool) ([]item, error) {
	if sel.Take != "" && sel.Take != TakeAgent && sel.Take != TakeHost && sel.Take != TakeMarkers {
		return nil, &PathError{Path: string(sel.Take), Reason: "--take must be agent, host or markers"}
	}
	for _, r := range sel.RawPaths {
		sel.Paths = append(sel.Paths, string(r))
	}
	// File ids select whole files, like paths.
	var hunkIDs []string
	for _, id := range sel.Hunks {
		if d := diffByID(diffs, id); d != nil {
			sel.Paths = append(sel.Paths, d.Path)
		} else {
			hunkIDs = append(hunkIDs, id)
		}
	}
	sel.Hunks = hunkIDs
	if sel.Patch != "" {
		if !forAccept {
			return nil, &PathError{Path: "--patch", Reason: "an edited patch can only be accepted"}
		}
		return planPatch(l, diffs, sel.Patch)
	}
	var items []item
	if sel.Auto {
		for i := range diffs {
			d := &diffs[i]
			if d.AutoAccept && d.Held == "" && len(d.Findings) == 0 && !d.Conflict {
				items = append(items, wholeItem(d, "", forAccept))
			}
		}
		return items, nil
	}
	if len(sel.Paths) > 0 || len(sel.Hunks) == 0 {
		files, err := SelectFiles(diffs, sel.Paths)
		if err != nil {
			return nil, err
		}
		byPath := make(map[string]*FileDiff, len(diffs))
		for i := range diffs {
			byPath[diffs[i].Path] = &diffs[i]
		}
		for i := range files {
			items = append(items, wholeItem(byPath[files[i].Path], sel.Take, forAccept))
		}
	}
	if len(sel.Hunks) == 0 {
		return items, nil
	}
	// Hunk ids, grouped by file.
	want := map[string]bool{}
	for _, id := range sel.Hunks {
		want[id] = true
	}
	for id := range sel.Lines {
		want[id] = true
	}
	found := map[string]bool{}
	for i := range diffs {
		d := &diffs[i]
		var hunks []*Hunk
		var conflicts []*Conflict
		for k := range d.Hunks {
			if want[d.Hunks[k].ID] {
				hunks = append(hunks, &d.Hunks[k])
				found[d.Hunks[k].ID] = true
			}
		}
		for k := range d.Conflicts {
			if want[d.Conflicts[k].ID] {
				conflicts = append(conflicts, &d.Conflicts[k])
				found[d.Conflicts[k].ID] = true
			}
		}
		if len(hunks) == 0 && len(conflicts) == 0 {
			continue
		}
		if already(items, d.Path) {
			continue // the whole file is selected by path
		}
		items = append(items, hunkItem(l, d, hunks, conflicts, sel, forAccept))
	}
	var missing []string
	for id := range want {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, &NotFoundError{What: fmt.Sprintf("no hunk or conflict %s in the session's diff (ids change when the file's content does): `airlock diff ID --json` lists them", strings.Join(missing, ", "))}
	}
	return items, nil
}

func diffByID(diffs []FileDiff, id string) *FileDiff {
	for i := range diffs {
		if diffs[i].ID == id {
			return &diffs[i]
		}
	}
	return nil
}

func findDiff(diffs []FileDiff, p string) *FileDiff {
	for i := range diffs {
		if diffs[i].Path == p {
			return &diffs[i]
		}
	}
	return nil
}

func already(items []item, p string) bool {
	for _, it := range items {
		if it.d.Path == p {
			return true
		}
	}
	return false
}

func wholeItem(d *FileDiff, take Resolution, forAccept bool) item {
	it := item{d: d, whole: true}
	if !forAccept {
		return it
	}
	if !d.Conflict {
		it.content = d.target // a clean merge with the host's changes, if any
		return it
	}
	switch take {
	case "":
		it.err = fmt.Errorf("conflict: %s; choose with --take agent or --take host (all its conflicts), per conflict with --hunk ID --take ..., or --take markers to write conflict markers", d.ConflictReason)
	case TakeHost:
		if d.whole {
			it.skip = true
			return it
		}
		s := render(d.chunks, func(*Conflict) Resolution { return TakeHost })
		it.content = &s
	case TakeAgent, TakeMarkers:
		if d.whole && (take == TakeAgent || d.Conflicts[0].Host == nil && d.Conflicts[0].Agent == nil) {
			if take == TakeMarkers {
				it.err = fmt.Errorf("%s cannot take conflict markers (binary, symlink or deletion): choose --take agent or --take host", d.Path)
			}
			return it // the session's version as it is (or its deletion)
		}
		s := render(d.chunks, func(*Conflict) Resolution { return take })
		it.content = &s
	}
	return it
}

func hunkItem(l Layers, d *FileDiff, hunks []*Hunk, conflicts []*Conflict, sel Selection, forAccept bool) item {
	it := item{d: d, keepMode: true}
	if !textual(d.Change) && !d.Conflict {
		it.err = fmt.Errorf("%s has no hunks to pick (binary, directory or special file): select the whole path", d.Path)
		return it
	}
	if !forAccept && d.Conflict {
		it.err = fmt.Errorf("%s is in conflict: discard the whole file, or settle the conflict with accept --take first", d.Path)
		return it
	}
	if len(conflicts) > 0 && sel.Take == "" {
		it.err = fmt.Errorf("conflict %s in %s needs a side: add --take agent or --take host", conflicts[0].ID, d.Path)
		return it
	}
	picked := map[*Hunk]bool{}
	for _, h := range hunks {
		picked[h] = true
	}
	lineSel := func(h *Hunk, li int) bool {
		lines, ok := sel.Lines[h.ID]
		if !ok || len(lines) == 0 {
			return true
		}
		for _, n := range lines {
			if n == li+1 {
				return true
			}
		}
		return false
	}
	var pick func(h *Hunk, li int) bool
	if forAccept {
		pick = func(h *Hunk, li int) bool { return picked[h] && lineSel(h, li) }
	} else {
		// Discard keeps every change but the selected ones in the session.
		pick = func(h *Hunk, li int) bool { return !(picked[h] && lineSel(h, li)) }
	}
	var es []edit
	for k := range d.Hunks {
		h := &d.Hunks[k]
		if forAccept && !picked[h] {
			continue
		}
		es = append(es, hunkEdits(h, pick)...)
	}
	for _, c := range conflicts {
		var lines []string
		switch sel.Take {
		case TakeAgent:
			lines = c.Agent
		case TakeMarkers:
			s := render([]chunk{{conflict: c}}, func(*Conflict) Resolution { return TakeMarkers })
			lines = splitLines(s)
		default:
			lines = c.Host
		}
		es = append(es, edit{Start: c.HostStart - 1, End: c.HostStart - 1 + c.HostLines, New: lines})
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].Start < es[j].Start })
	host := ""
	if d.OldType == File || d.OldType == Symlink {
		var ok bool
		if host, ok = readSide(filepath.Join(l.Project, filepath.FromSlash(d.Path)), d.OldType); !ok {
			it.err = fmt.Errorf("cannot read the project's %s", d.Path)
			return it
		}
	}
	s, err := applyEdits(splitLines(host), es)
	if err != nil {
		it.err = fmt.Errorf("%s changed while picking hunks (%v): look at the diff again", d.Path, err)
		return it
	}
	it.content = &s
	return it
}

// planPatch turns an edited patch into items: each file's hunks applied to
// the project's current text.
func planPatch(l Layers, diffs []FileDiff, patch string) ([]item, error) {
	files, err := ParsePatch(strings.NewReader(patch))
	if err != nil {
		return nil, &PathError{Path: "--patch", Reason: err.Error()}
	}
	if len(files) == 0 {
		return nil, &PathError{Path: "--patch", Reason: "the patch has no file with hunks"}
	}
	var items []item
	for _, f := range files {
		p := f.NewPath
		if p == "" {
			p = f.OldPath
		}
		d := findDiff(diffs, p)
		if d == nil {
			return nil, &NotFoundError{What: fmt.Sprintf("the patch changes %s, which the session did not change: an edited patch may only narrow or edit the session's changes", p)}
		}
		if f.NewPath == "" {
			items = append(items, item{d: d, whole: true})
			continue
		}
		it := item{d: d, keepMode: true}
		host := ""
		if d.OldType == File {
			var ok bool
			if host, ok = readSide(filepath.Join(l.Project, filepath.FromSlash(d.Path)), File); !ok {
				it.err = fmt.Errorf("cannot read the project's %s", d.Path)
				items = append(items, it)
				continue
			}
		}
		s, err := applyHunks(host, f.Hunks, func(*Hunk, int) bool { return true })
		if err != nil {
			it.err = fmt.Errorf("the edited patch does not apply to the project's %s: %v", d.Path, err)
		} else {
			it.content = &s
		}
		items = append(items, it)
	}
	return items, nil
}
