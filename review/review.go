package review

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/airlock/airlock/secretscan"
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
	// Paths, when set, narrows the review to the changes at or under
	// these paths (a NoMatchError names any that match nothing); renames
	// are still paired across the whole session.
	Paths []string
	// Limits bound what is read and diffed (zero: the defaults).
	Limits Limits
	// Workers, when set, is shared with other reviews: this one only adds
	// goroutines while it has room. The caller's goroutine always works.
	Workers *Workers
	// Sized, when set, is told before the first batch how many files the
	// review hands on at most, so that a caller keeping them all sizes its
	// slice once (growing it by appends would hold two copies at a time).
	Sized func(n int)
	// NoDigests leaves FileDiff.Digest and ContentSum empty (a summary
	// has no use for them, and an accept cannot be pinned to them).
	NoDigests bool
	// Ignored says what becomes of the changes Layers.Ignoring's rules
	// cover: summarised (the default: only those Paths names are
	// listed), listed alone, or listed with the rest.
	Ignored IgnoredMode
	// Named are paths whose ignored changes are listed (as Paths' are)
	// without narrowing the review to them: an accept's selection.
	Named []string
	// OnIgnored, when set, is told what the rules covered, once the walk
	// is done and before the first batch.
	OnIgnored func(IgnoredSummary)
	// ScanIgnored, when set, reads the ignored files (within a budget)
	// for secrets before OnIgnored is told: an ignored file is not
	// reviewed, but a key in it is still worth knowing of. Unset, they
	// are counted unscanned.
	ScanIgnored secretscan.Finder
}

// ReviewWith is Review with options.
func ReviewWith(l Layers, opts Options) ([]FileDiff, error) {
	return ReviewContext(context.Background(), l, opts)
}

// ReviewContext is ReviewWith, abandoned with ctx's error when ctx ends. A
// panic while reviewing a file fails the review with a *PanicError rather
// than the process.
func ReviewContext(ctx context.Context, l Layers, opts Options) ([]FileDiff, error) {
	var all []FileDiff
	opts.Sized = func(n int) { all = make([]FileDiff, 0, n) }
	err := ReviewEach(ctx, l, opts, func(batch []FileDiff) error {
		all = append(all, batch...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// reviewBatch is how many files a review reviews before it hands them on.
const reviewBatch = 256

// ReviewEach is ReviewContext handing the files to each in path order, a
// batch at a time, keeping none: its memory is the walk's list of changes
// (a few dozen bytes for a plain added file) and one batch, however many
// files the session changed. each must not keep the batch's slice; an
// error from each ends the review with that error.
func ReviewEach(ctx context.Context, l Layers, opts Options, each func([]FileDiff) error) error {
	opts.Limits = opts.Limits.withDefaults()
	r, err := openRoots(l)
	if err != nil {
		return err
	}
	defer r.close()
	items, ignored, err := changes(ctx, l, r, opts)
	if err != nil {
		return err
	}
	if opts.OnIgnored != nil {
		opts.OnIgnored(ignored)
	}
	if items, err = detectRenames(ctx, l, r, items); err != nil {
		return err
	}
	looks, err := lookalikes(ctx, r, items)
	if err != nil {
		return err
	}
	if len(opts.Paths) > 0 {
		if items, err = selectListed(items, opts.Paths); err != nil {
			return err
		}
	}
	over := overBudget(items, opts)
	if opts.Sized != nil {
		opts.Sized(len(items))
	}
	results := make([]FileDiff, min(reviewBatch, len(items)))
	keepers := make([]bool, len(results))
	for start := 0; start < len(items); start += reviewBatch {
		batch := items[start:min(start+reviewBatch, len(items))]
		if err := reviewBatchOf(ctx, l, r, opts, batch, over[start:], results, keepers); err != nil {
			return err
		}
		clear(batch) // reviewed: the list need not keep it
		out := results[:0]
		for i := range batch {
			if keepers[i] {
				results[i].lookalike = lookalikeOf(looks, results[i].Path)
				out = append(out, results[i])
			}
		}
		flagHidingRules(out, ignored.Session)
		err := each(out)
		clear(results)
		if err != nil {
			return err
		}
	}
	return nil
}

// reviewBatchOf reviews batch into results (keepers[i]: results[i] is a
// change), on the caller's goroutine and as many more as the shared limit
// has room for. Each file's review is independent.
func reviewBatchOf(ctx context.Context, l Layers, r *roots, opts Options, batch []listed, over []bool, results []FileDiff, keepers []bool) error {
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(batch) {
				return
			}
			if err := ctx.Err(); err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			var err error
			results[i], keepers[i], err = reviewSafely(ctx, l, r, batch[i].change(), opts, over[i])
			if keepers[i] && results[i].Type == File {
				results[i].Generated = l.Ignoring.generated(results[i].Path)
			}
			if err == nil && keepers[i] && !opts.NoDigests {
				// What accept pins: the session's side as reviewed.
				err = results[i].digest(r.upper)
			}
			if err != nil {
				errOnce.Do(func() { firstErr = err })
				next.Store(int64(len(batch)))
				return
			}
		}
	}
	var wg sync.WaitGroup
	extra := opts.Workers.tryAcquire(min(runtime.NumCPU(), len(batch)/64) - 1)
	for range extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer opts.Workers.release(1)
			work()
		}()
	}
	work()
	wg.Wait()
	return firstErr
}

// overBudget marks, in path order, the text files past the review's text
// budget (both sides' sizes counted), so which ones is the same on every
// run. Only a review that computes every file's hunks has one.
func overBudget(changes []listed, opts Options) []bool {
	over := make([]bool, len(changes))
	if !opts.Hunks {
		return over
	}
	var used int64
	for i := range changes {
		it := &changes[i]
		t, ot := it.newType(), it.oldType()
		if it.isBinary() || !(t == File || ot == File || t == Symlink || ot == Symlink) {
			continue // not textual
		}
		link, oldLink := it.link()
		cost := int64(len(link) + len(oldLink))
		if t == File {
			cost += it.newSize()
		}
		if ot == File {
			cost += it.oldSize()
		}
		if used+cost > opts.Limits.MaxTotalText {
			over[i] = true
			continue
		}
		used += cost
	}
	return over
}

// reviewSafely is reviewOne turning a panic into an error.
func reviewSafely(ctx context.Context, l Layers, r *roots, c Change, opts Options, over bool) (fd FileDiff, keep bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicked(c.Path, v)
		}
	}()
	return reviewOne(ctx, l, r, c, opts.Hunks, !opts.NoDigests, opts.Limits, over)
}

func textual(c Change) bool {
	return !c.Binary && (c.Type == File || c.OldType == File || c.Type == Symlink || c.OldType == Symlink)
}

// maxTextDiff is the largest project file readSide reads.
const maxTextDiff = DefaultMaxText

// sums: digest binaries' content (ContentSum); a summary has no use for it.
func reviewOne(ctx context.Context, l Layers, r *roots, c Change, hunks, sums bool, lim Limits, over bool) (FileDiff, bool, error) {
	fd := FileDiff{Change: c}
	if textual(c) {
		switch {
		case c.Type == File && c.Size > lim.MaxText:
			fd.Binary, fd.TooLarge = true, tooLarge(c.Size, lim)
		case c.OldType == File && c.OldSize > lim.MaxText:
			fd.Binary, fd.TooLarge = true, "the project's version is "+tooLarge(c.OldSize, lim)
		case over:
			fd.Binary, fd.TooLarge = true, fmt.Sprintf("the review's text limit (%s) was spent on the files before it: diff this path alone", sizeStr(lim.MaxTotalText))
		}
	}
	hfi := c.hostInfo
	var err error
	if c.Kind == Deleted || c.Kind == Renamed || hfi == nil && c.Kind != Added {
		if hfi, err = statAt(r.hostFd(), c.Path); err != nil {
			hfi = nil
		}
	}
	if l.Base != nil && c.Type != Dir && c.Kind != Mode && c.Type != Special && c.Kind != Renamed {
		if fd.HostChanged, err = l.Base.HostChanged(c.Path, hfi); err != nil {
			return fd, false, err
		}
	}
	if !fd.HostChanged {
		if c.cached != nil && (hunks || c.cached.Hunks == nil) && !over {
			cached := *c.cached
			cached.Change.hostInfo, cached.Change.data = c.hostInfo, c.data
			cached.Change.Ignored, cached.Change.IgnoredBy = c.Ignored, c.IgnoredBy // this review's rules
			return cached, true, nil
		}
		if hunks && textual(fd.Change) {
			a, b, why, err := sides(r, fd.Change, lim)
			switch {
			case err != nil:
				return unreadable(ctx, fd, err)
			case why != "":
				fd.Binary, fd.TooLarge = true, why
			default:
				fd.digestText(b)
				fd.Hunks = Hunks(a, b)
				hunkIDs(c.Path, fd.Hunks)
			}
		}
		if !sums {
			return fd, true, nil // and not cached: it lacks its sum
		}
		if err := sum(ctx, r, &fd); err != nil {
			return unreadable(ctx, fd, err)
		}
		// Cached when it saves reading or diffing: small text files cost
		// less to review again than to keep.
		worth := fd.Binary || c.Size+c.OldSize >= 4<<10
		if worth && l.Cache != nil && c.upperKey.present && c.Type == File && (c.OldType == File || c.OldType == None) && c.Kind != Renamed && !over && (hunks || fd.Binary) {
			keep := fd
			keep.Change.data, keep.Change.hostInfo, keep.Change.cached = nil, nil, nil
			l.Cache.store(c.Path, cacheEntry{upper: c.upperKey, host: keyOf(hfi), diff: &keep})
		}
		return fd, true, nil
	}

	// The host changed this path since the session started.
	var agent, host, why string
	agentOK, hostOK := !fd.Binary, !fd.Binary
	if !fd.Binary {
		if d := c.data; d != nil && d.hasNew {
			agent = string(d.new)
		} else if agent, why, err = readTextAt(r.upper, c.Path, c.Type, lim); err != nil || why != "" {
			agentOK = false
		}
		if d := c.data; d != nil && d.hasOld && hfi != nil && hfi.Mode().IsRegular() {
			host = string(d.old)
		} else if host, why, err = readTextAt(r.project, c.Path, typeOfInfo(hfi), lim); err != nil || why != "" {
			hostOK = false
		}
	}
	if agentOK {
		fd.digestText(agent)
	}
	if sums {
		if err := sum(ctx, r, &fd); err != nil && ctx.Err() != nil {
			return fd, false, ctx.Err()
		}
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
		fd.conflict("changed on the host since the session started; it cannot be merged line by line (binary, symlink, type change or too large)")
		fd.wholeConflict(c.Path, "", host, agent, true)
		return fd, true, nil
	}
	base, known, err := l.Base.Content(c.Path, r.upper, lim.MaxText)
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

// sum digests the session's file when it gets no text diff.
func sum(ctx context.Context, r *roots, fd *FileDiff) error {
	if !fd.Binary || fd.Type != File || fd.ContentSum != "" {
		return nil
	}
	s, err := Sum(ctx, r.upper, fd.Path)
	fd.ContentSum = s
	return err
}

// unreadable turns a failed read of one file (it changed type or went away
// while the review read it) into a note on that file; the review goes on.
func unreadable(ctx context.Context, fd FileDiff, err error) (FileDiff, bool, error) {
	if ctx.Err() != nil {
		return fd, false, ctx.Err()
	}
	fd.Hunks, fd.Binary = nil, true
	fd.Note = fmt.Sprintf("cannot be reviewed (%v): never accepted as it is; look at the diff again", err)
	return fd, true, nil
}

// PanicError is a review that panicked: a bug, reported as the failure of
// the one request rather than of the engine.
type PanicError struct {
	What  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("reviewing %s failed unexpectedly (%v): a bug in Airlock, whose log has the details", e.What, e.Value)
}

func panicked(what string, v any) error {
	return &PanicError{What: what, Value: v, Stack: debug.Stack()}
}

// Workers bounds the goroutines reviews run beside their callers', across
// reviews: an engine shares one between its sessions so that their reviews
// together take a few cores, never all. A nil *Workers gives each review
// its own.
type Workers struct{ slots chan struct{} }

// NewWorkers allows n goroutines at once (at least 1).
func NewWorkers(n int) *Workers { return &Workers{slots: make(chan struct{}, max(1, n))} }

// Acquire waits for a slot for the caller's own goroutine, or for ctx's
// end. A nil *Workers has room for everyone.
func (w *Workers) Acquire(ctx context.Context) error {
	if w == nil {
		return nil
	}
	select {
	case w.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives back a slot taken by Acquire.
func (w *Workers) Release() { w.release(1) }

// tryAcquire takes up to n slots without waiting and says how many.
func (w *Workers) tryAcquire(n int) int {
	if n <= 0 {
		return 0
	}
	if w == nil {
		return n
	}
	for k := 0; k < n; k++ {
		select {
		case w.slots <- struct{}{}:
		default:
			return k
		}
	}
	return n
}

func (w *Workers) release(n int) {
	if w == nil {
		return
	}
	for range n {
		<-w.slots
	}
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

// selectListed keeps the review's list at or under any of paths, and
// fails naming those of paths that match nothing.
func selectListed(all []listed, paths []string) ([]listed, error) {
	keep, err := selected(len(all), func(i int) string { return all[i].path }, paths)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for i := range all {
		if keep[i] {
			out = append(out, all[i])
		}
	}
	clear(all[len(out):])
	return out, nil
}
