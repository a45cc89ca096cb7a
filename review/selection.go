package review

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/airlock/airlock/names"
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
	// IncludeIgnored lets a selection of everything (or of a directory)
	// take the changes ignore rules cover: the review that feeds the
	// selection lists them (Options.Ignored IgnoredAll). Without it only
	// an ignored path named itself, or under a named ignored directory,
	// is listed and so taken.
	IncludeIgnored bool `json:"include_ignored,omitempty"`
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
	return fmt.Sprintf("%s changed since you reviewed %s — review again; nothing was accepted", strings.Join(names.Quotes(e.Paths), ", "), it)
}

// plan turns a selection into per-file items. forAccept: conflicts need a
// Take; for discard, hunks are removed from the session instead of added
// to the project.
func plan(l Layers, diffs []FileDiff, sel Selection, forAccept bool) ([]item, error) {
	s, err := newSelector(l, sel, forAccept)
	if err != nil {
		return nil, err
	}
	var items []item
	for i := range diffs {
		if it, ok := s.pick(&diffs[i]); ok {
			items = append(items, it)
		}
	}
	if err := s.finish(); err != nil {
		return nil, err
	}
	return items, nil
}

// selector picks a selection's items from a review's files one file at a
// time, in path order, so that an accept never needs the whole review at
// once. What spans files — paths and ids that select nothing, pins that
// match nothing, pinned changes that are no longer the ones reviewed — is
// gathered as the files go by; finish reports it.
type selector struct {
	l         Layers
	sel       Selection
	forAccept bool
	// all: the selection names nothing, so it takes every change;
	// pinnedAll: all, pinned (the pins are the selection, and what they
	// do not pin is left as unreviewed).
	all, pinnedAll bool
	// given are the selection's paths as given (RawPaths too), clean
	// their cleaned forms; paths holds the cleaned paths that select
	// files at or under them (also directories selected by file id), and
	// matched those that selected something.
	given, clean []string
	paths        map[string]bool
	matched      map[string]bool
	// named: the files the selection names itself (by path or id, or one
	// of their hunks); only those are taken when flagged.
	named map[string]bool
	// ids are sel.Hunks and the hunks sel.Lines picks lines of; fileIDs
	// and found are those that selected a whole file, and a hunk or a
	// conflict.
	ids, fileIDs, found map[string]bool
	// pinned are the keys of sel.Digests that name a change.
	pinned map[string]bool
	// changed names the pinned changes that are no longer the ones
	// reviewed (see settle).
	changed []string
}

func newSelector(l Layers, sel Selection, forAccept bool) (*selector, error) {
	if sel.Take != "" && sel.Take != TakeAgent && sel.Take != TakeHost && sel.Take != TakeMarkers {
		return nil, &PathError{Path: string(sel.Take), Reason: "--take must be agent, host or markers"}
	}
	if sel.Patch != "" && !forAccept {
		return nil, &PathError{Path: "--patch", Reason: "an edited patch can only be accepted"}
	}
	s := &selector{l: l, sel: sel, forAccept: forAccept, paths: map[string]bool{}, matched: map[string]bool{},
		named: map[string]bool{}, ids: map[string]bool{}, fileIDs: map[string]bool{}, found: map[string]bool{}}
	s.given = slices.Clone(sel.Paths)
	for _, r := range sel.RawPaths {
		s.given = append(s.given, string(r))
	}
	for _, p := range s.given {
		c, err := CleanPath(p)
		if err != nil {
			return nil, err
		}
		s.clean = append(s.clean, c)
		s.paths[c], s.named[c] = true, true
	}
	for _, id := range sel.Hunks {
		s.ids[id] = true
	}
	if len(sel.Hunks) > 0 {
		for id := range sel.Lines {
			s.ids[id] = true
		}
	}
	s.all = len(s.given) == 0 && len(sel.Hunks) == 0
	if forAccept && len(sel.Digests) > 0 {
		s.pinned = map[string]bool{}
		s.pinnedAll = s.all && len(sel.Lines) == 0 && !sel.Auto
	}
	return s, nil
}

// filePin is what a selection's digests say of one file.
type filePin struct {
	digest string
	ok     bool // the file is pinned whole
}

// pick returns the item the selection makes of d, if any; for an accept,
// settled (see settle).
func (s *selector) pick(d *FileDiff) (item, bool) {
	pin := s.pinOf(d)
	it, ok := s.choose(d, pin)
	if ok && s.forAccept {
		s.settle(&it, pin)
	}
	return it, ok
}

// pinOf looks d and its hunks up in the selection's digests, noting which
// keys name a change.
func (s *selector) pinOf(d *FileDiff) filePin {
	if s.pinned == nil {
		return filePin{}
	}
	var pin filePin
	for _, key := range []string{d.Path, d.ID} {
		if digest, ok := s.sel.Digests[key]; ok {
			pin = filePin{digest: digest, ok: true}
			s.pinned[key] = true
		}
	}
	for k := range d.Hunks {
		if _, ok := s.sel.Digests[d.Hunks[k].ID]; ok {
			s.pinned[d.Hunks[k].ID] = true
		}
	}
	return pin
}

func (s *selector) choose(d *FileDiff, pin filePin) (item, bool) {
	if s.pinnedAll {
		// Everything, pinned: files pinned whole, hunks pinned one by
		// one, and every other change left as unreviewed.
		if pin.ok {
			return wholeItem(d, s.sel.Take, true), true
		}
		var hunks []*Hunk
		for k := range d.Hunks {
			if _, ok := s.sel.Digests[d.Hunks[k].ID]; ok {
				hunks = append(hunks, &d.Hunks[k])
			}
		}
		if len(hunks) > 0 {
			return hunkItem(s.l, d, hunks, nil, s.sel, true), true
		}
		if s.includesIgnored(d) {
			return wholeItem(d, s.sel.Take, true), true
		}
		return item{d: d, whole: true, left: "unreviewed", reason: unreviewed}, true
	}
	if s.sel.Auto {
		if d.AutoAccept && d.Held == "" && len(d.Findings) == 0 && !d.Conflict {
			return wholeItem(d, "", s.forAccept), true
		}
		return item{}, false
	}
	// A file id selects the whole file, like its path, and what is under
	// it: a directory comes before its files.
	byID := s.ids[d.ID]
	if byID {
		s.fileIDs[d.ID], s.named[d.Path] = true, true
		s.paths[d.Path] = true
	}
	whole := s.all || s.selects(d.Path)
	var hunks []*Hunk
	var conflicts []*Conflict
	if len(s.ids) > 0 {
		for k := range d.Hunks {
			if s.ids[d.Hunks[k].ID] {
				hunks = append(hunks, &d.Hunks[k])
				s.found[d.Hunks[k].ID] = true
			}
		}
		for k := range d.Conflicts {
			if s.ids[d.Conflicts[k].ID] {
				conflicts = append(conflicts, &d.Conflicts[k])
				s.found[d.Conflicts[k].ID] = true
			}
		}
	}
	switch {
	case whole:
		return wholeItem(d, s.sel.Take, s.forAccept), true
	case len(hunks) > 0 || len(conflicts) > 0:
		s.named[d.Path] = true // by a hunk or conflict id
		return hunkItem(s.l, d, hunks, conflicts, s.sel, s.forAccept), true
	}
	return item{}, false
}

// selects reports whether p is at or under one of the selection's paths,
// and notes the paths that select it.
func (s *selector) selects(p string) bool {
	if len(s.paths) == 0 {
		return false
	}
	hit := false
	for q := p; ; {
		if s.paths[q] {
			s.matched[q], hit = true, true
		}
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			break
		}
		q = q[:i]
	}
	if s.paths["."] {
		s.matched["."], hit = true, true
	}
	return hit
}

// finish reports what only the whole review tells: pins that match no
// change, paths and ids that select nothing, pinned changes that are no
// longer the ones reviewed.
func (s *selector) finish() error {
	var gone []string
	for key := range s.sel.Digests {
		if s.pinned != nil && !s.pinned[key] {
			gone = append(gone, key)
		}
	}
	sort.Strings(gone)
	if s.pinnedAll && len(gone) > 0 {
		// A pinned change that is gone is a change since the review.
		return &ChangedError{Paths: gone}
	}
	var named []string
	for _, key := range gone {
		if slices.Contains(s.sel.Hunks, key) || slices.Contains(s.given, key) {
			named = append(named, key) // named and pinned, and no longer there
		}
	}
	if len(named) > 0 {
		return &ChangedError{Paths: named}
	}
	if !s.pinnedAll && !s.sel.Auto {
		var unmatched []string
		for i, c := range s.clean {
			if !s.matched[c] {
				unmatched = append(unmatched, s.given[i])
			}
		}
		if len(unmatched) > 0 {
			return &NoMatchError{Paths: unmatched}
		}
		var missing []string
		for id := range s.ids {
			if !s.found[id] && !s.fileIDs[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 && len(s.fileIDs) < len(s.sel.Hunks) {
			sort.Strings(missing)
			return &NotFoundError{What: fmt.Sprintf("no hunk or conflict %s in the session's diff (ids change when the file's content does): `airlock diff ID --json` lists them", strings.Join(missing, ", "))}
		}
	}
	if len(s.changed) > 0 {
		return &ChangedError{Paths: s.changed}
	}
	return nil
}

// failing reports whether the accept is known to fail already (a pinned
// change is no longer the one reviewed): nothing more need be written.
func (s *selector) failing() bool { return len(s.changed) > 0 }

// settle decides, for an accept's item, what it must be when staged (its
// digest), whether it is left in the session on purpose (not pinned by a
// pinned selection, or flagged and not named), and notes a pinned change
// that is no longer the one reviewed: finish refuses the accept then.
func (s *selector) settle(it *item, pin filePin) {
	d := it.d
	if it.whole {
		it.want = d.Digest
	}
	if s.pinned != nil && it.left == "" && !s.includesIgnored(d) {
		switch what, ok := s.checkPin(it, pin); {
		case what != "":
			s.changed = append(s.changed, what)
		case !ok && s.named[d.Path]:
			s.changed = append(s.changed, d.Path)
		case !ok:
			it.left, it.reason = "unreviewed", unreviewed
		}
	}
	if it.left == "" && !s.sel.IncludeFlagged && !s.named[d.Path] && !(d.From != "" && s.named[d.From]) {
		it.left, it.reason = flagged(d)
	}
	if it.left == "" && it.whole && it.content == nil && !it.skip && it.err == nil && d.Digest == "" &&
		(d.Type == File || d.Type == Symlink) {
		s.changed = append(s.changed, d.Path) // it changed while this accept's review read it
	}
}

// includesIgnored reports whether the selection takes d, an ignored
// change, though nothing pins it: a diff summarises ignored changes, never
// shows them, so an accept pinned to what was shown takes them only as
// they are, when it includes ignored changes.
func (s *selector) includesIgnored(d *FileDiff) bool {
	return d.Ignored != "" && s.sel.IncludeIgnored && s.pinnedAll
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

// checkPin compares an item with the pins: what names a pinned change that
// is no longer the one reviewed; ok is false when nothing pins the item.
func (s *selector) checkPin(it *item, pin filePin) (what string, ok bool) {
	d := it.d
	if it.whole {
		if !pin.ok {
			return "", false
		}
		if pin.digest != d.Digest || d.Digest == "" {
			return d.Path, true
		}
		return "", true
	}
	// A hunk is pinned by its own digest or by its file's, a conflict by
	// its file's.
	fileOK := pin.ok && pin.digest == d.Digest && d.Digest != ""
	for _, h := range it.hunks {
		hd, ok := s.sel.Digests[h.ID]
		switch {
		case ok && hd != h.Digest:
			return fmt.Sprintf("hunk %s of %s", h.ID, names.Quote(d.Path)), true
		case !ok && pin.ok && !fileOK:
			return d.Path, true
		case !ok && !pin.ok:
			return "", false
		}
	}
	if len(it.conflicts) > 0 && !fileOK {
		if pin.ok {
			return d.Path, true
		}
		return "", false
	}
	return "", true
}

func findDiff(diffs []FileDiff, p string) *FileDiff {
	for i := range diffs {
		if diffs[i].Path == p {
			return &diffs[i]
		}
	}
	return nil
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
				it.err = fmt.Errorf("%s cannot take conflict markers (binary, symlink or deletion): choose --take agent or --take host", names.Quote(d.Path))
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
		it.err = fmt.Errorf("%s has no hunks to pick (binary, directory or special file): select the whole path", names.Quote(d.Path))
		return it
	}
	if !forAccept && d.Conflict {
		it.err = fmt.Errorf("%s is in conflict: discard the whole file, or settle the conflict with accept --take first", names.Quote(d.Path))
		return it
	}
	if len(conflicts) > 0 && sel.Take == "" {
		it.err = fmt.Errorf("conflict %s in %s needs a side: add --take agent or --take host", conflicts[0].ID, names.Quote(d.Path))
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
			it.err = fmt.Errorf("cannot read the project's %s", names.Quote(d.Path))
			return it
		}
	}
	hostLines := splitLines(host)
	if forAccept && !fits(hostLines, hunks, conflicts) {
		it.err = fmt.Errorf("the project's %s changed since the diff was made: look at the diff again", names.Quote(d.Path))
		return it
	}
	s, err := applyEdits(hostLines, es)
	if err != nil {
		it.err = fmt.Errorf("%s changed while picking hunks (%v): look at the diff again", names.Quote(d.Path), err)
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
