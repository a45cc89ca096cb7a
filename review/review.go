package review

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/airlock/airlock/confined"
)

// Review is the full picture of a session's changes: every change with its
// hunks against the current project. Where the host changed a path since
// the session started, the session's change is merged with the host's
// (three-way, against the session's base) when they do not overlap, and
// marked as a conflict when they do; nothing is ever decided silently.
func Review(l Layers) ([]FileDiff, error) {
	return ReviewWith(l, Options{Hunks: true})
}

// Options tune a review.
type Options struct {
	// Hunks computes text hunks for every file. Without it only files that
	// need a merge get them: enough to accept or discard whole files.
	Hunks bool
}

// ReviewWith is Review with options.
func ReviewWith(l Layers, opts Options) ([]FileDiff, error) {
	changes, err := Changes(l)
	if err != nil {
		return nil, err
	}
	changes, err = detectRenames(l, changes)
	if err != nil {
		return nil, err
	}
	// The session's files not read for hunks are read for their digests
	// through this root.
	root, err := confined.OpenRoot(l.Upper)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Each file's review is independent: hunks and merges on all cores.
	results := make([]FileDiff, len(changes))
	keepers := make([]bool, len(changes))
	errs := make([]error, len(changes))
	var wg sync.WaitGroup
	workers := min(runtime.NumCPU(), max(1, len(changes)/64))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(changes); i += workers {
				results[i], keepers[i], errs[i] = reviewOne(l, changes[i], opts.Hunks)
				if keepers[i] && errs[i] == nil {
					errs[i] = results[i].digest(root)
				}
			}
		}(w)
	}
	wg.Wait()
	out := make([]FileDiff, 0, len(changes))
	for i := range changes {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if keepers[i] {
			out = append(out, results[i])
		}
	}
	return out, nil
}

func textual(c Change) bool {
	return !c.Binary && (c.Type == File || c.OldType == File || c.Type == Symlink || c.OldType == Symlink)
}

// maxTextDiff is the largest file given a text diff; larger files are
// shown like binaries (size only) so a review never stalls on them.
const maxTextDiff = 16 << 20

func reviewOne(l Layers, c Change, hunks bool) (FileDiff, bool, error) {
	fd := FileDiff{Change: c}
	if c.Size > maxTextDiff || c.OldSize > maxTextDiff {
		fd.Binary = true
	}
	hp := filepath.Join(l.Project, filepath.FromSlash(c.Path))
	hfi := c.hostInfo
	var err error
	if c.Kind == Deleted || c.Kind == Renamed || hfi == nil && c.Kind != Added {
		if hfi, err = os.Lstat(hp); err != nil {
			hfi = nil
		}
	}
	if l.Base != nil && c.Type != Dir && c.Kind != Mode && c.Type != Special && c.Kind != Renamed {
		if fd.HostChanged, err = l.Base.HostChanged(c.Path, hfi); err != nil {
			return fd, false, err
		}
	}
	if !fd.HostChanged {
		if c.cached != nil && (hunks || c.cached.Hunks == nil) {
			cached := *c.cached
			cached.Change.hostInfo, cached.Change.data = c.hostInfo, c.data
			return cached, true, nil
		}
		if hunks && textual(fd.Change) {
			a, b, err := sides(l, fd.Change)
			if err != nil {
				return fd, false, err
			}
			fd.digestText(b)
			fd.Hunks = Hunks(a, b)
			hunkIDs(c.Path, fd.Hunks)
			if c.Type == File && (c.OldType == File || c.OldType == None) && c.Kind != Renamed {
				keep := fd
				keep.Change.data, keep.Change.hostInfo, keep.Change.cached = nil, nil, nil
				l.Cache.store(c.Path, cacheEntry{upper: c.upperKey, host: keyOf(hfi), diff: &keep})
			}
		}
		return fd, true, nil
	}

	// The host changed this path since the session started.
	var agent, host string
	var agentOK, hostOK bool
	if d := c.data; d != nil && d.hasNew {
		agent, agentOK = string(d.new), true
	} else {
		agent, agentOK = readSide(filepath.Join(l.Upper, filepath.FromSlash(c.Path)), c.Type)
	}
	if agentOK {
		fd.digestText(agent)
	}
	if d := c.data; d != nil && d.hasOld && hfi != nil && hfi.Mode().IsRegular() {
		host, hostOK = string(d.old), true
	} else {
		host, hostOK = readSide(hp, typeOfInfo(hfi))
	}
	switch {
	case c.Kind == Deleted:
		fd.conflict("deleted in the session; changed on the host since the session started")
		if hostOK && textual(fd.Change) {
			fd.Hunks = Hunks(host, "")
			hunkIDs(c.Path, fd.Hunks)
		}
		fd.wholeConflict(c.Path, "", host, "", false)
		return fd, true, nil
	case hfi == nil:
		fd.conflict("changed in the session; deleted on the host since the session started")
		if agentOK && textual(fd.Change) {
			fd.Hunks = Hunks("", agent)
			hunkIDs(c.Path, fd.Hunks)
		}
		fd.wholeConflict(c.Path, "", "", agent, false)
		return fd, true, nil
	case fd.Binary || !agentOK || !hostOK || c.Type != typeOfInfo(hfi) || c.Type != File:
		fd.conflict("changed on the host since the session started; it cannot be merged line by line (binary, symlink or type change)")
		fd.wholeConflict(c.Path, "", host, agent, true)
		return fd, true, nil
	}
	base, known, err := l.Base.Content(c.Path, l.Upper)
	if err != nil {
		return fd, false, err
	}
	if !known {
		fd.conflict("changed on the host since the session started, and its version at the start was not captured: choose a side")
		fd.wholeConflict(c.Path, "", host, agent, false)
		fd.Hunks = Hunks(host, agent)
		hunkIDs(c.Path, fd.Hunks)
		return fd, true, nil
	}
	chunks := merge3(c.Path, string(base), host, agent)
	merged := render(chunks, nil)
	fd.Conflicts = conflictsOf(chunks)
	fd.chunks = chunks
	if len(fd.Conflicts) == 0 {
		if merged == host {
			return fd, false, nil // the session's change is already in the project
		}
		fd.Merged = true
		fd.Kind = Modified
		fd.target = &merged
	} else {
		fd.conflict("the host and the session changed overlapping lines since the session started")
	}
	fd.Hunks = Hunks(host, merged)
	hunkIDs(c.Path, fd.Hunks)
	return fd, true, nil
}

func (fd *FileDiff) conflict(reason string) {
	fd.Conflict = true
	fd.ConflictReason = reason
}

// wholeConflict records a conflict over the whole file (no line merge).
func (fd *FileDiff) wholeConflict(p, base, host, agent string, opaque bool) {
	c := &Conflict{Base: splitLines(base), Host: splitLines(host), Agent: splitLines(agent), HostLines: len(splitLines(host)), HostStart: 1}
	if opaque {
		c.Base, c.Host, c.Agent = nil, nil, nil
	}
	chunks := []chunk{{conflict: c}}
	merge3IDs(p, chunks)
	fd.Conflicts = []Conflict{*c}
	fd.chunks = chunks
	fd.whole = true
}

// readSide reads a file or symlink's text for a merge; false for other
// types and for files too large to diff.
func readSide(p string, t Type) (string, bool) {
	if t != File && t != Symlink {
		return "", false
	}
	if fi, err := os.Stat(p); t == File && (err != nil || fi.Size() > maxTextDiff) {
		return "", false
	}
	s, err := readText(p, t)
	return s, err == nil
}

// readText is a file's content or a symlink's target; "" for other types.
func readText(p string, t Type) (string, error) {
	switch t {
	case File:
		b, err := os.ReadFile(p)
		return string(b), err
	case Symlink:
		return os.Readlink(p)
	}
	return "", nil
}

func typeOfInfo(fi fs.FileInfo) Type {
	if fi == nil {
		return None
	}
	return typeOf(fi.Mode())
}

// SelectFiles returns the diffs at or under any of paths (all when paths is
// empty), or an error naming a path that matches nothing.
func SelectFiles(all []FileDiff, paths []string) ([]FileDiff, error) {
	changes := make([]Change, len(all))
	for i, d := range all {
		changes[i] = d.Change
	}
	sel, err := Select(changes, paths)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, c := range sel {
		keep[c.Path] = true
	}
	var out []FileDiff
	for _, d := range all {
		if keep[d.Path] {
			out = append(out, d)
		}
	}
	return out, nil
}
