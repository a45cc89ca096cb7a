package review

import (
	"fmt"
	"path/filepath"
	"slices"
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
	// Digests pins an accept to what the user reviewed: keys are file ids
	// or paths (the file's Digest) and hunk ids (the hunk's Digest); a
	// conflict is pinned by its file. A pinned change that is no longer
	// what its digest names refuses the whole accept (ChangedError). With
	// no paths and no hunks, the pins are the selection: files added since
	// the review are not taken. Everything else the selection takes must
	// be pinned too.
	Digests map[string]string `json:"digests,omitempty"`
	// IncludeFlagged lets an accept of everything (or of a directory)
	// take changes the policy holds or a scanner flagged; without it they
	// are left in the session with their reason unless named (by path,
	// file id or hunk id).
	IncludeFlagged bool `json:"include_flagged,omitempty"`
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
	// want is the digest the session's file must have when it is staged
	// from the upper layer: what this accept's review read (and, when the
	// selection is pinned, what the user reviewed).
	want string
	// hunks and conflicts are what a partial item takes.
	hunks     []*Hunk
	conflicts []*Conflict
	// left, with its reason, is set for a change the accept leaves in the
	// session on purpose (see Outcome.Left).
	left, reason string
}

// NotFoundError names hunk ids or paths that select nothing.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What }

// ChangedError refuses an accept pinned to digests (or to what its own
// review read) because the session's version of these paths (or hunks) is
// no longer the one reviewed. Nothing was written.
type ChangedError struct{ Paths []string }

func (e *ChangedError) Error() string {
	it := "it"
	if len(e.Paths) > 1 {
		it = "them"
	}
	return fmt.Sprintf("%s changed since you reviewed %s — review again; nothing was accepted", strings.Join(e.Paths, ", "), it)
}

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
	// named: the files the selection names itself (by path or id, or one
	// of their hunks); only those are taken when flagged.
	named := map[string]bool{}
	for _, p := range sel.Paths {
		if c, err := CleanPath(p); err == nil {
			named[c] = true
		}
	}
	// File ids select whole files, like paths.
	var hunkIDs []string
	for _, id := range sel.Hunks {
		if d := diffByID(diffs, id); d != nil {
			sel.Paths = append(sel.Paths, d.Path)
			named[d.Path] = true
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
	if !forAccept {
		return selectItems(l, diffs, sel, false)
	}
	var pins *pinSet
	if len(sel.Digests) > 0 {
		pins = resolvePins(diffs, sel.Digests)
	}
	var items []item
	var err error
	if pins != nil && len(sel.Paths) == 0 && len(sel.Hunks) == 0 && len(sel.Lines) == 0 && !sel.Auto {
		// Everything, pinned: the pins are the selection, and a pinned
		// change that is gone is a change since the review.
		if len(pins.gone) > 0 {
			return nil, &ChangedError{Paths: pins.gone}
		}
		items = pinnedItems(l, diffs, pins, sel)
	} else {
		var gone []string
		for _, key := range pins.goneKeys() {
			if slices.Contains(sel.Hunks, key) || slices.Contains(sel.Paths, key) {
				gone = append(gone, key) // named and pinned, and no longer there
			}
		}
		if len(gone) > 0 {
			return nil, &ChangedError{Paths: gone}
		}
		if items, err = selectItems(l, diffs, sel, true); err != nil {
			return nil, err
		}
		for _, it := range items {
			if !it.whole {
				named[it.d.Path] = true // by a hunk or conflict id
			}
		}
	}
	if err := settle(items, pins, named, sel.IncludeFlagged); err != nil {
		return nil, err
	}
	return items, nil
}

// settle decides, for an accept's items, what each must be when staged
// (its digest), which are left in the session on purpose (not pinned by
// a pinned selection, or flagged and not named), and refuses the accept
// when a pinned change is no longer the one reviewed.
func settle(items []item, pins *pinSet, named map[string]bool, includeFlagged bool) error {
	var changed []string
	for i := range items {
		it := &items[i]
		d := it.d
		if it.whole {
			it.want = d.Digest
		}
		if pins != nil && it.left == "" {
			switch what, ok := pins.check(it); {
			case what != "":
				changed = append(changed, what)
			case !ok && named[d.Path]:
				changed = append(changed, d.Path)
			case !ok:
				it.left, it.reason = "unreviewed", unreviewed
			}
		}
		if it.left == "" && !includeFlagged && !named[d.Path] && !(d.From != "" && named[d.From]) {
			it.left, it.reason = flagged(d)
		}
		if it.left == "" && it.whole && it.content == nil && !it.skip && it.err == nil && d.Digest == "" &&
			(d.Type == File || d.Type == Symlink) {
			changed = append(changed, d.Path) // it changed while this accept's review read it
		}
	}
	if len(changed) > 0 {
		return &ChangedError{Paths: changed}
	}
	return nil
}

const unreviewed = "not in the diff you reviewed (added or changed since): review it, then accept it"

// flagged says why an accept of everything leaves d, if it does: the policy
// holds it or a scanner flagged it.
func flagged(d *FileDiff) (left, reason string) {
	const how = ": accept it by naming it (its path or id), or accept everything with --include-flagged"
	if d.Held != "" {
		return "held", d.Held + how
	}
	if len(d.Findings) == 0 {
		return "", ""
	}
	var scanners []string
	for _, f := range d.Findings {
		if !slices.Contains(scanners, f.Scanner) {
			scanners = append(scanners, f.Scanner)
		}
	}
	return "flagged", fmt.Sprintf("flagged by %s (%s)%s", strings.Join(scanners, ", "), d.Findings[0].Message, how)
}

// pinSet is a selection's digests resolved against the diffs: whole files
// by path, hunks by id; gone names the pins that match nothing now.
type pinSet struct {
	files map[string]string
	hunks map[string]string
	gone  []string
}

func resolvePins(diffs []FileDiff, digests map[string]string) *pinSet {
	ps := &pinSet{files: map[string]string{}, hunks: map[string]string{}}
	hunkFile := map[string]string{}
	for i := range diffs {
		for _, h := range diffs[i].Hunks {
			hunkFile[h.ID] = diffs[i].Path
		}
	}
	for key, digest := range digests {
		if d := diffByID(diffs, key); d != nil {
			ps.files[d.Path] = digest
		} else if d := findDiff(diffs, key); d != nil {
			ps.files[d.Path] = digest
		} else if _, ok := hunkFile[key]; ok {
			ps.hunks[key] = digest
		} else {
			ps.gone = append(ps.gone, key)
		}
	}
	sort.Strings(ps.gone)
	return ps
}

func (ps *pinSet) goneKeys() []string {
	if ps == nil {
		return nil
	}
	return ps.gone
}

// check compares an item with the pins: what names a pinned change that is
// no longer the one reviewed; ok is false when nothing pins the item.
func (ps *pinSet) check(it *item) (what string, ok bool) {
	d := it.d
	fileDigest, filePinned := ps.files[d.Path]
	if it.whole {
		if !filePinned {
			return "", false
		}
		if fileDigest != d.Digest || d.Digest == "" {
			return d.Path, true
		}
		return "", true
	}
	// A hunk is pinned by its own digest or by its file's, a conflict by
	// its file's.
	fileOK := filePinned && fileDigest == d.Digest && d.Digest != ""
	for _, h := range it.hunks {
		hd, ok := ps.hunks[h.ID]
		switch {
		case ok && hd != h.Digest:
			return fmt.Sprintf("hunk %s of %s", h.ID, d.Path), true
		case !ok && filePinned && !fileOK:
			return d.Path, true
		case !ok && !filePinned:
			return "", false
		}
	}
	if len(it.conflicts) > 0 && !fileOK {
		if filePinned {
			return d.Path, true
		}
		return "", false
	}
	return "", true
}

// pinnedItems is an accept of everything a client pinned: files pinned
// whole, hunks pinned one by one, and every other change left as
// unreviewed.
func pinnedItems(l Layers, diffs []FileDiff, ps *pinSet, sel Selection) []item {
	var items []item
	for i := range diffs {
		d := &diffs[i]
		if _, ok := ps.files[d.Path]; ok {
			items = append(items, wholeItem(d, sel.Take, true))
			continue
		}
		var hunks []*Hunk
		for k := range d.Hunks {
			if _, ok := ps.hunks[d.Hunks[k].ID]; ok {
				hunks = append(hunks, &d.Hunks[k])
			}
		}
		if len(hunks) > 0 {
			items = append(items, hunkItem(l, d, hunks, nil, sel, true))
			continue
		}
		items = append(items, item{d: d, whole: true, left: "unreviewed", reason: unreviewed})
	}
	return items
}

// selectItems turns paths, ids and lines into items.
func selectItems(l Layers, diffs []FileDiff, sel Selection, forAccept bool) ([]item, error) {
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
	it := item{d: d, keepMode: true, hunks: hunks, conflicts: conflicts}
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
	hostLines := splitLines(host)
	if forAccept && !fits(hostLines, hunks, conflicts) {
		it.err = fmt.Errorf("the project's %s changed since the diff was made: look at the diff again", d.Path)
		return it
	}
	s, err := applyEdits(hostLines, es)
	if err != nil {
		it.err = fmt.Errorf("%s changed while picking hunks (%v): look at the diff again", d.Path, err)
		return it
	}
	it.content = &s
	return it
}

// fits reports whether the project's lines are still those the hunks and
// conflicts were made against (context and removed lines, conflict host
// lines), so that taking them writes what the diff showed.
func fits(lines []string, hunks []*Hunk, conflicts []*Conflict) bool {
	for _, h := range hunks {
		i := h.OldStart - 1
		if h.OldLines == 0 {
			i = h.OldStart
		}
		for _, l := range h.Lines {
			if l == "" || l[0] == '+' {
				continue
			}
			if i < 0 || i >= len(lines) || lines[i] != l[1:] {
				return false
			}
			i++
		}
	}
	for _, c := range conflicts {
		if c.Host == nil {
			continue // a whole-file conflict over a binary or special file
		}
		start := c.HostStart - 1
		if start < 0 || start+c.HostLines > len(lines) || !slices.Equal(lines[start:start+c.HostLines], c.Host) {
			return false
		}
	}
	return true
}
