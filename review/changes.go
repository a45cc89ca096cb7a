// Package review turns a session's overlay upper layer into the list of
// changes it makes to the project, renders them as text diffs and
// git-apply-compatible patches, and applies accepted changes to the project
// (or drops discarded ones from the session's view) safely.
//
// The change list is built from the upper layer alone: its cost grows with
// the number of changed files, never with the size of the project.
package review

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/gitrules"
	"github.com/airlock/airlock/names"
	"golang.org/x/sys/unix"
)

// Kind is what happened to a path.
type Kind string

// The kinds of change.
const (
	Added    Kind = "added"
	Modified Kind = "modified" // content changed (the mode may have too)
	Mode     Kind = "mode"     // only the permission bits changed
	Deleted  Kind = "deleted"
	Replaced Kind = "replaced" // the type changed (file <-> dir <-> symlink)
	Renamed  Kind = "renamed"  // moved from From, with at most small edits
)

// Type is what kind of filesystem object a path is.
type Type string

// The object types. Special covers devices, FIFOs and sockets: they are
// listed so the user sees them but never accepted into the project.
const (
	File    Type = "file"
	Dir     Type = "dir"
	Symlink Type = "symlink"
	Special Type = "special"
	None    Type = ""
)

// Change is one path the session changed relative to the current project.
type Change struct {
	// ID names the file for selection; it depends on the path only.
	ID   string `json:"id"`
	Path string `json:"path"` // slash-separated, relative to the project root
	// RawPath is the path's bytes when they are not valid UTF-8 (JSON
	// would mangle Path); select such a file by ID or raw path.
	RawPath []byte      `json:"raw_path,omitempty"`
	Kind    Kind        `json:"kind"`
	Type    Type        `json:"type"`               // what the session has (None for Deleted)
	OldType Type        `json:"old_type,omitempty"` // what the project has (None for Added)
	Mode    fs.FileMode `json:"mode,omitempty"`
	OldMode fs.FileMode `json:"old_mode,omitempty"`
	Size    int64       `json:"size"`
	OldSize int64       `json:"old_size"`
	// Binary is set when either side is not text, or too large for a text
	// diff (TooLarge says why); no text diff is made.
	Binary      bool   `json:"binary,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// TooLarge says why a text file gets no text diff (its size, a line's
	// length, or the review's text budget) and is shown like a binary.
	TooLarge string `json:"too_large,omitempty"`
	// ContentSum digests the session's file when it gets no text diff
	// (see Sum), so that a file shown only by its size is still named
	// exactly.
	ContentSum string `json:"content_sum,omitempty"`
	Link       string `json:"link,omitempty"`     // symlink target in the session
	OldLink    string `json:"old_link,omitempty"` // symlink target in the project
	// Note explains why a change cannot be accepted, when it cannot.
	Note string `json:"note,omitempty"`
	// HostChanged is set when the project's version of the path changed
	// since the session started (known from the session's base).
	HostChanged bool `json:"host_changed,omitempty"`
	// Merged is set when the session's change was merged with the host's
	// changes without overlap: accepting writes the merge.
	Merged bool `json:"merged,omitempty"`
	// Conflict is set when the host and the session changed the path in
	// ways that overlap; ConflictReason says how. Accept needs a choice.
	Conflict       bool   `json:"conflict,omitempty"`
	ConflictReason string `json:"conflict_reason,omitempty"`
	// From is the project path this one was renamed from (Kind Renamed).
	From       string `json:"from,omitempty"`
	Similarity int    `json:"similarity,omitempty"` // percent, for renames
	// Ignored is set on a change ignore rules cover (IgnoredByProject,
	// IgnoredBySession), listed only when the review asks for them or a
	// path names it; IgnoredBy names the rule.
	Ignored   string `json:"ignored,omitempty"`
	IgnoredBy string `json:"ignored_by,omitempty"`
	// Generated says why a display folds the file (a lockfile, or the
	// project's attributes mark it generated); its hunks are all there.
	Generated string `json:"generated,omitempty"`

	data     *contents   // small files' bytes, read once per review
	hostInfo fs.FileInfo // the project's Lstat when the change was found (nil: absent)
	cached   *FileDiff   // a finished review of this same version (see Cache)
	upperKey statKey     // the session's version, for caching its review
}

// contents holds the two sides of a small file, so that one review reads
// each file once.
type contents struct {
	old, new       []byte
	hasOld, hasNew bool
}

// noContent is an empty new file's (shared: never written to).
var noContent = &contents{new: []byte{}, hasNew: true}

// cacheLimit is the largest file whose bytes a review keeps in memory, and
// retainBudget the most it keeps over all files: past it, the steps after
// the walk read again, so a review's memory never follows the session's
// size.
const (
	cacheLimit   = 1 << 20
	retainBudget = 32 << 20
)

// Layers is where a review reads from: the session's upper layer and the
// current project.
type Layers struct {
	Upper   string
	Project string
	// Base is the project as the session started, when it was captured;
	// nil compares with the current project only.
	Base *Base
	// Cache, when set, keeps reviews of unchanged files between calls.
	Cache *Cache
	// Ignoring, when set, holds the ignore rules that decide which
	// changes are reviewed (Options.Ignored says what becomes of the
	// others) and which are generated.
	Ignoring *Ignoring
}

// Changes lists what the upper layer changes relative to the current project,
// sorted by path. An upper entry equal to the project's is not a change.
func Changes(l Layers) ([]Change, error) {
	return ChangesContext(context.Background(), l)
}

// ChangesContext is Changes, abandoned with ctx's error when ctx ends.
func ChangesContext(ctx context.Context, l Layers) ([]Change, error) {
	r, err := openRoots(l)
	if err != nil {
		return nil, err
	}
	defer r.close()
	items, _, err := changes(ctx, l, r, Options{})
	if err != nil {
		return nil, err
	}
	out := make([]Change, len(items))
	for i := range items {
		out[i] = items[i].change()
	}
	return out, nil
}

// CountChanges is how many changes Changes would list (renames not paired),
// without keeping them: what a session listing shows, in memory that does
// not grow with the session. It walks on the slots workers gives (nil: its
// own).
func CountChanges(ctx context.Context, l Layers, workers *Workers) (int, error) {
	r, err := openRoots(l)
	if err != nil {
		return 0, err
	}
	defer r.close()
	w := newWalker(ctx, l, r, Options{})
	w.counting = true
	if err := w.run(workers); err != nil {
		return 0, err
	}
	return int(w.counted.Load()), nil
}

// changes walks the upper layer. The walk is iterative (a stack of
// directories shared by a few goroutines), so its depth costs neither stack
// nor more than a few dozen descriptors: directories waiting their turn keep
// a descriptor while fewer than maxHeld do, and are opened again by path
// (confined, at most PATH_MAX long) otherwise.
//
// It returns the changes as items, lean for plain additions: a review of
// 200,000 files holds 200,000 of these and little else until it reviews
// them one batch at a time.
func changes(ctx context.Context, l Layers, r *roots, opts Options) ([]listed, IgnoredSummary, error) {
	w := newWalker(ctx, l, r, opts)
	if err := w.run(opts.Workers); err != nil {
		return nil, IgnoredSummary{}, err
	}
	if w.ignore != nil && opts.ScanIgnored != nil {
		if err := w.ignore.scanIgnored(ctx, r, opts.ScanIgnored); err != nil {
			return nil, IgnoredSummary{}, err
		}
	}
	return mergeListed(w.out), w.ignore.summary(), nil
}

// mergeListed sorts the walk's directories' changes by path into one slice
// of the exact size: each directory's sorted, then merged, a directory's
// slice let go as soon as it is used up. A directory's changes lie together
// in path order but for its subdirectories', so the walk's result is held
// about once while it is sorted, not twice.
func mergeListed(chunks [][]listed) []listed {
	n := 0
	h := &listedHeap{}
	for _, ch := range chunks {
		slices.SortFunc(ch, func(a, b listed) int { return strings.Compare(a.path, b.path) })
		n += len(ch)
		if len(ch) > 0 {
			h.chunks = append(h.chunks, ch)
		}
	}
	clear(chunks)
	heap.Init(h)
	out := make([]listed, 0, n)
	for h.Len() > 0 {
		ch := h.chunks[0]
		out = append(out, ch[0])
		if len(ch) == 1 {
			h.chunks[0] = nil // its array is free now
			heap.Pop(h)
			continue
		}
		ch[0] = listed{}
		h.chunks[0] = ch[1:]
		heap.Fix(h, 0)
	}
	return out
}

// listedHeap orders sorted slices by their first path.
type listedHeap struct{ chunks [][]listed }

func (h *listedHeap) Len() int           { return len(h.chunks) }
func (h *listedHeap) Less(i, j int) bool { return h.chunks[i][0].path < h.chunks[j][0].path }
func (h *listedHeap) Swap(i, j int)      { h.chunks[i], h.chunks[j] = h.chunks[j], h.chunks[i] }
func (h *listedHeap) Push(x any)         { h.chunks = append(h.chunks, x.([]listed)) }
func (h *listedHeap) Pop() any {
	last := h.chunks[len(h.chunks)-1]
	h.chunks[len(h.chunks)-1] = nil
	h.chunks = h.chunks[:len(h.chunks)-1]
	return last
}

func newWalker(ctx context.Context, l Layers, r *roots, opts Options) *walker {
	w := &walker{ctx: ctx, l: l, r: r, hostRoot: r.hostFd()}
	w.cond = sync.NewCond(&w.mu)
	root := dirJob{dir: r.upper, root: true, hostDir: true}
	if l.Ignoring != nil {
		w.ignore = &ignoreWalk{ig: l.Ignoring, mode: opts.Ignored, scan: opts.ScanIgnored != nil}
		for _, p := range append(slices.Clip(opts.Paths), opts.Named...) {
			if c, err := CleanPath(p); err == nil {
				w.ignore.named = append(w.ignore.named, c)
			}
		}
		if l.Ignoring.Project != nil {
			root.pd = l.Ignoring.Project.Root()
		}
		if l.Ignoring.Session != nil {
			root.sd = l.Ignoring.Session.Root()
		}
	}
	w.stack = []dirJob{root}
	return w
}

// run walks the layer on the caller's goroutine and as many more as
// workers has room for.
func (w *walker) run(workers *Workers) error {
	extra := workers.tryAcquire(walkers - 1)
	var wg sync.WaitGroup
	for range extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer workers.release(1)
			w.work()
		}()
	}
	w.work()
	wg.Wait()
	for _, j := range w.stack { // left by an error
		if j.dir != nil && !j.root {
			j.dir.Close()
		}
	}
	return w.err
}

// walkers is how many goroutines walk at most (when the shared limit has
// room): reading both sides of many small files is mostly syscalls.
var walkers = max(2, runtime.NumCPU())

// maxHeld is how many waiting directories keep their descriptor.
const maxHeld = 64

// walker is the state of one walk.
type walker struct {
	ctx      context.Context
	l        Layers
	r        *roots
	hostRoot int // the project root, or -1

	mu    sync.Mutex
	cond  *sync.Cond
	stack []dirJob
	busy  int
	err   error
	out   [][]listed // one slice per directory

	// counting: only count the changes (counted), keep none, and read no
	// content a count does not need.
	counting bool
	counted  atomic.Int64

	held     atomic.Int32 // descriptors held by waiting directories
	retained atomic.Int64 // bytes kept in Change.data

	ignore *ignoreWalk // nil: no ignore rules
}

// dirJob is a directory of the upper layer to visit.
type dirJob struct {
	rel  string
	dir  *confined.Root // nil: open rel again when its turn comes
	root bool           // the layer's root: not closed
	// inherited: a directory above hides the project's (rm -rf then
	// mkdir); hostDir: the project has this directory.
	inherited, hostDir bool
	// added is the change a new directory is, listed if it turns out empty
	// (a non-empty one is implied by its entries).
	added *Change
	// pd and sd are the project's and the session's ignore rules here
	// (nil: none, or ign decides); ign is how rules cover everything
	// under this directory, self how they cover the directory itself.
	pd, sd    *gitrules.Dir
	ign, self ignoreMark
}

func (w *walker) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.cond.Broadcast()
	w.mu.Unlock()
}

func (w *walker) work() {
	defer func() {
		if v := recover(); v != nil {
			w.fail(panicked("the walk of the session's layer", v))
		}
	}()
	for {
		w.mu.Lock()
		for len(w.stack) == 0 && w.busy > 0 && w.err == nil {
			w.cond.Wait()
		}
		if len(w.stack) == 0 || w.err != nil {
			w.cond.Broadcast()
			w.mu.Unlock()
			return
		}
		j := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		w.busy++
		w.mu.Unlock()
		if j.dir != nil && !j.root {
			w.held.Add(-1)
		}
		kept, subs, err := w.dir(j)
		w.mu.Lock()
		w.busy--
		if len(kept) > 0 {
			w.out = append(w.out, kept)
		}
		w.stack = append(w.stack, subs...)
		if err != nil && w.err == nil {
			w.err = err
		}
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// dirOut gathers a directory's changes: as listed (or only counted)
// every dirBatch, so that a directory of 200,000 new files never holds
// them all as Changes (some 360 bytes each, against a few dozen).
type dirOut struct {
	w    *walker
	cs   []Change
	kept []listed
}

const dirBatch = 1024

func (o *dirOut) add(c Change) {
	o.cs = append(o.cs, c)
	if len(o.cs) >= dirBatch {
		o.flush()
	}
}

// one is the directory's changes after c, when c ends them.
func (o *dirOut) one(c Change) []listed {
	o.add(c)
	return o.flush()
}

// flush keeps the changes gathered and returns all kept.
func (o *dirOut) flush() []listed {
	if o.w.counting {
		o.w.counted.Add(int64(len(o.cs)))
	} else {
		for i := range o.cs {
			o.kept = append(o.kept, listedOf(&o.cs[i]))
		}
	}
	clear(o.cs)
	o.cs = o.cs[:0]
	return o.kept
}

// reserve counts n bytes against the review's retention budget.
func (w *walker) reserve(n int64) bool {
	if w.retained.Add(n) > retainBudget {
		w.retained.Add(-n)
		return false
	}
	return true
}

// dir lists one directory's changes and the subdirectories to visit.
func (w *walker) dir(j dirJob) (kept []listed, subs []dirJob, err error) {
	out := &dirOut{w: w}
	if err := w.ctx.Err(); err != nil {
		if j.dir != nil && !j.root {
			j.dir.Close()
		}
		return nil, nil, err
	}
	d := j.dir
	if d == nil {
		if d, err = w.r.upper.OpenDir(j.rel); err != nil {
			if isNotExist(err) {
				return nil, nil, nil // removed while we looked
			}
			return out.one(unreviewable(j.rel+"/", err)), nil, nil
		}
	}
	if !j.root {
		defer d.Close()
	}
	// opaque: this directory hides the project's (here or above), so
	// project entries the session lacks are deletions.
	opaque := j.hostDir && (j.inherited || isOpaqueFd(d.Fd()))
	hostDir := j.hostDir && w.hostRoot >= 0
	names, err := readNames(d.Fd())
	if err != nil {
		return out.one(unreviewable(j.rel+"/", err)), nil, nil
	}
	if (j.added != nil || !j.hostDir) && !w.counting {
		out.kept = make([]listed, 0, len(names)) // a new directory: every entry is a change
	}
	if j.added != nil && len(names) == 0 && !w.ignore.counted(j.rel, 0, true, j.self) && w.ignore.keeps(j.added, j.self) {
		out.add(*j.added)
	}
	var seen map[string]bool
	if opaque {
		seen = make(map[string]bool, len(names))
	}
	for i, name := range names {
		if opaque {
			seen[name] = true
		}
		if name == ".git" {
			// Repository internals never reach the project as files; commits
			// made in the session are offered separately (see Commits).
			continue
		}
		if i%256 == 255 {
			if err := w.ctx.Err(); err != nil {
				return nil, subs, err // the caller closes what subs hold
			}
		}
		p := name
		if j.rel != "" {
			p = j.rel + "/" + name
		}
		if len(p) > maxPath {
			out.add(unreviewable(p, fmt.Errorf("the path is longer than %d bytes", maxPath)))
			continue
		}
		var ust, hst unix.Stat_t
		if err := unix.Fstatat(d.Fd(), name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				// One unreadable entry must not hide the others: list it,
				// unacceptable, with why.
				out.add(unreviewable(p, err))
			}
			continue
		}
		hasHost := false
		if hostDir {
			// The project's side is looked up relative to its root, which
			// costs less than opening each of its directories.
			if err := unix.Fstatat(w.hostRoot, p, &hst, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				hasHost = true
			} else if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
				out.add(unreviewable(p, err))
				continue
			}
		}
		if isWhiteoutStat(&ust) {
			if hasHost {
				isDir := typeOf(modeOf(hst.Mode)) == Dir
				m, _ := w.ignore.marks(&j, name, p, isDir)
				if !w.ignore.counted(p, 0, isDir, m) {
					if c := w.deletion(p, &hst); w.ignore.keeps(&c, m) {
						out.add(c)
					}
				}
			}
			continue
		}
		isDir := ust.Mode&unix.S_IFMT == unix.S_IFDIR
		mark, subMark := w.ignore.marks(&j, name, p, isDir)
		if mark.who != "" && !w.ignore.listed(p, mark) && !(isDir && w.ignore.reaches(p)) {
			if sub := w.countIgnored(d, name, p, &ust, hasHost, &hst, mark, subMark, opaque); sub != nil {
				subs = append(subs, w.hold(d, name, *sub))
			}
			continue
		}
		c, sub, err := w.entry(d, name, p, opaque, &ust, hasHost, &hst)
		if sub != nil {
			sub.ign, sub.self = subMark, mark
			if sub.added != nil {
				sub.added.Ignored, sub.added.IgnoredBy = mark.who, ruleName(mark.rule)
			}
			if subMark.who == "" {
				sub.pd, sub.sd = childRules(j.pd, name), childRules(j.sd, name)
			}
		}
		switch {
		case err != nil:
			out.add(unreviewable(p, err))
		case sub != nil:
			subs = append(subs, w.hold(d, name, *sub))
			if c != nil && w.ignore.keeps(c, mark) {
				out.add(*c)
			}
		case c != nil:
			if w.ignore.keeps(c, mark) {
				out.add(*c)
			}
		}
	}
	if opaque {
		out.cs = w.hostOnly(&j, seen, out.cs)
	}
	return out.flush(), subs, nil
}

// childRules is d's rules for its subdirectory name (nil: none).
func childRules(d *gitrules.Dir, name string) *gitrules.Dir {
	if d == nil {
		return nil
	}
	return d.Child(name)
}

// hold gives a subdirectory's job its descriptor while few waiting
// directories hold one.
func (w *walker) hold(d *confined.Root, name string, sub dirJob) dirJob {
	if w.held.Load() < maxHeld {
		if sd, err := d.OpenDir(name); err == nil {
			w.held.Add(1)
			sub.dir = sd
		}
	}
	return sub
}

// entry is the change (if any) one upper entry makes, and the directory to
// visit when it is one.
func (w *walker) entry(d *confined.Root, name, p string, opaque bool, ust *unix.Stat_t, hasHost bool, hst *unix.Stat_t) (*Change, *dirJob, error) {
	umode := modeOf(ust.Mode)
	utype := typeOf(umode)
	c := Change{Path: p, Type: utype, Mode: umode, Size: ust.Size, upperKey: keyOfStat(ust)}
	if utype == Dir {
		c.Size = 0
	}
	var hfi fs.FileInfo
	if hasHost {
		hfi = infoOf(name, hst)
		c.hostInfo = hfi
		c.OldType, c.OldMode, c.OldSize = typeOf(hfi.Mode()), hfi.Mode(), hst.Size
		if c.OldType == Dir {
			c.OldSize = 0
		}
	}
	switch {
	case utype == Dir:
		sub := &dirJob{rel: p, inherited: opaque, hostDir: hasHost && hfi.IsDir()}
		switch {
		case !hasHost:
			c.Kind = Added
			sub.added = &c
			return nil, sub, nil
		case !hfi.IsDir():
			c.Kind = Replaced
		case hfi.Mode() != umode:
			c.Kind = Mode
		default:
			return nil, sub, nil
		}
		return &c, sub, nil
	case !hasHost:
		c.Kind = Added
		if w.counting {
			return &c, nil, nil
		}
		if utype == File {
			if e, ok := w.l.Cache.lookup(p, c.upperKey, statKey{}); ok && e.diff != nil {
				cc := e.diff.Change
				cc.cached = e.diff
				return &cc, nil, nil
			}
			if ust.Size == 0 {
				c.data = noContent
			} else if data, ok := w.readSmall(d, name, ust.Size); ok {
				c.data = &contents{new: data, hasNew: true}
			}
		}
		return &c, nil, w.describe(d, name, &c)
	case typeOf(hfi.Mode()) != utype:
		c.Kind = Replaced
		return &c, nil, w.describe(d, name, &c)
	}
	uk, hk := c.upperKey, keyOfStat(hst)
	if e, ok := w.l.Cache.lookup(p, uk, hk); ok {
		if e.same {
			return nil, nil, nil
		}
		if e.diff != nil {
			cc := e.diff.Change
			cc.hostInfo, cc.cached = hfi, e.diff
			return &cc, nil, nil
		}
	}
	var same bool
	switch utype {
	case File:
		var err error
		if same, err = w.sameFile(d, name, &c, ust.Size, hst.Size); err != nil {
			return nil, nil, err
		}
	case Symlink:
		ta, err := d.Readlink(name)
		if err != nil {
			return nil, nil, err
		}
		tb, err := readlinkAt(w.hostRoot, p)
		same = err == nil && ta == tb
	}
	switch {
	case !same:
		c.Kind = Modified
	case acceptable(umode) != acceptable(hfi.Mode()):
		c.Kind = Mode
	default:
		w.l.Cache.store(p, cacheEntry{upper: uk, host: hk, same: true})
		return nil, nil, nil
	}
	return &c, nil, w.describe(d, name, &c)
}

// readSmall reads a small regular file of the session whole, when the
// review's retention budget allows, for the steps after the walk.
func (w *walker) readSmall(d *confined.Root, name string, size int64) ([]byte, bool) {
	if size == 0 {
		return nil, true // nothing to read
	}
	if size > cacheLimit || !w.reserve(size) {
		return nil, false
	}
	b, ok := readExactly(d, name, size)
	if !ok {
		w.retained.Add(-size)
	}
	return b, ok
}

// readExactly reads size bytes of the regular file rel, or fails if it is
// no longer a regular file of that size.
func readExactly(root *confined.Root, rel string, size int64) ([]byte, bool) {
	fd, st, err := root.OpenFd(rel)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	if st.Size != size {
		return nil, false
	}
	b := make([]byte, size)
	n, err := preadFull(fd, b, 0)
	return b, err == nil && int64(n) == size
}

// sameFile compares the session's file name (in d) with the project's:
// small ones are read whole and kept for the steps after the walk, others
// streamed.
func (w *walker) sameFile(d *confined.Root, name string, c *Change, usize, hsize int64) (bool, error) {
	if usize <= cacheLimit && hsize <= cacheLimit && w.reserve(usize+hsize) {
		nb, okN := readExactly(d, name, usize)
		ob, okO := readExactly(w.r.project, c.Path, hsize)
		if okN && okO {
			c.data = &contents{old: ob, new: nb, hasOld: true, hasNew: true}
			return bytes.Equal(nb, ob), nil
		}
		w.retained.Add(-usize - hsize)
	}
	if usize != hsize {
		return false, nil
	}
	return sameFile(w.ctx, d, w.r.project, name, c.Path)
}

func (c *Change) setID() {
	var in [512]byte // most paths: hashed without an allocation
	b := append(append(in[:0], "file\x00"...), c.Path...)
	sum := sha256.Sum256(b)
	var id [10]byte
	id[0] = 'f'
	var hx [10]byte
	hex.Encode(hx[:], sum[:5])
	copy(id[1:], hx[:9])
	c.ID = string(id[:])
	if !utf8.ValidString(c.Path) {
		c.RawPath = []byte(c.Path)
	}
}

func isWhiteoutStat(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

// isOpaqueFd reports whether the open directory fd hides the project's.
// Airlock mounts its overlays as root, so only the trusted namespace can
// hold the mark.
func isOpaqueFd(fd int) bool {
	buf := make([]byte, 8)
	n, err := unix.Fgetxattr(fd, "trusted.overlay.opaque", buf)
	return err == nil && n > 0 && buf[0] == 'y'
}

func typeOf(m fs.FileMode) Type {
	switch {
	case m.IsRegular():
		return File
	case m.IsDir():
		return Dir
	case m&fs.ModeSymlink != 0:
		return Symlink
	default:
		return Special
	}
}

// statInfo is an fs.FileInfo from a stat relative to a directory.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) Mode() fs.FileMode  { return modeOf(s.st.Mode) }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }

func infoOf(name string, st *unix.Stat_t) *statInfo {
	return &statInfo{name: name, st: syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Rdev: st.Rdev,
		Size: st.Size, Blksize: st.Blksize, Blocks: st.Blocks,
		Atim: syscall.Timespec(st.Atim), Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim),
	}}
}

// statAt lstats name in the directory dirfd.
func statAt(dirfd int, name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return infoOf(name, &st), nil
}

// readlinkAt reads a symlink's target relative to dirfd.
func readlinkAt(dirfd int, rel string) (string, error) {
	if dirfd < 0 {
		return "", errNoProject
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, rel, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func unreviewable(p string, err error) Change {
	return Change{Path: p, Kind: Added, Type: Special, Note: fmt.Sprintf("cannot be reviewed (%v): never accepted", err)}
}

// acceptable is the part of a mode an accept can carry: setuid and setgid
// never reach the project, so a difference in them alone is no change.
func acceptable(m fs.FileMode) fs.FileMode { return m &^ (fs.ModeSetuid | fs.ModeSetgid) }

// deletion is the change of a project entry the session deleted.
func (w *walker) deletion(p string, hst *unix.Stat_t) Change {
	hfi := infoOf(path.Base(p), hst)
	c := Change{Path: p, Kind: Deleted, OldType: typeOf(hfi.Mode()), OldMode: hfi.Mode(), OldSize: hst.Size}
	switch c.OldType {
	case Dir:
		c.OldSize = 0
	case Symlink:
		c.OldLink, _ = readlinkAt(w.hostRoot, p)
	case File:
		c.Binary, c.ContentType = sniffAt(w.r.project, p)
	}
	return c
}

// hostOnly lists, as deletions, the project's entries in directory rel that
// an opaque upper directory (whose names are seen) does not have.
func (w *walker) hostOnly(j *dirJob, seen map[string]bool, out []Change) []Change {
	rel := j.rel
	if w.r.project == nil {
		return out
	}
	hd, err := w.r.project.OpenDir(rel)
	if err != nil {
		return out // the project's side is gone: nothing to delete
	}
	defer hd.Close()
	names, err := readNames(hd.Fd())
	if err != nil {
		return out
	}
	for _, name := range names {
		if name == ".git" || seen[name] {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(hd.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		isDir := typeOf(modeOf(st.Mode)) == Dir
		m, _ := w.ignore.marks(j, name, p, isDir)
		if w.ignore.counted(p, 0, isDir, m) {
			continue
		}
		if c := w.deletion(p, &st); w.ignore.keeps(&c, m) {
			out = append(out, c)
		}
	}
	return out
}

// describe fills in link targets, binary detection and notes; d is the
// session's directory holding name.
func (w *walker) describe(d *confined.Root, name string, c *Change) error {
	switch c.Type {
	case Symlink:
		t, err := d.Readlink(name)
		if err != nil {
			return err
		}
		c.Link = t
	case File:
		if c.data != nil && c.data.hasNew {
			c.Binary, c.ContentType = sniffBytes(c.data.new)
		} else {
			c.Binary, c.ContentType = sniffAt(d, name)
		}
	case Special:
		c.Note = "device files, FIFOs and sockets are never accepted into the project"
	}
	switch c.OldType {
	case Symlink:
		c.OldLink, _ = readlinkAt(w.hostRoot, c.Path)
	case File:
		var b bool
		if c.data != nil && c.data.hasOld {
			b, _ = sniffBytes(c.data.old)
		} else {
			b, _ = sniffAt(w.r.project, c.Path)
		}
		if b {
			c.Binary = true
		}
	}
	return nil
}

// sniffBytes reports whether a file's first bytes (up to 8 KiB are looked
// at) look binary (a NUL byte or invalid UTF-8), and its MIME type.
func sniffBytes(buf []byte) (binary bool, contentType string) {
	if len(buf) > 8192 {
		buf = buf[:8192]
	}
	n := len(buf)
	check := buf
	if n == 8192 {
		check = buf[:n-3] // a rune may straddle the sample's end
	}
	if bytes.IndexByte(buf, 0) < 0 && utf8.Valid(check) {
		return false, "" // text; its type is only worth naming for binaries
	}
	return true, http.DetectContentType(buf)
}

// Select returns the changes at or under any of paths (all when paths is
// empty) and an error naming any path that matches nothing.
func Select(all []Change, paths []string) ([]Change, error) {
	if len(paths) == 0 {
		return all, nil
	}
	keep, err := selected(len(all), func(i int) string { return all[i].Path }, paths)
	if err != nil {
		return nil, err
	}
	var out []Change
	for i := range all {
		if keep[i] {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// selected marks which of n paths (pathAt gives each) are at or under any
// of paths, and fails naming those of paths that match none.
func selected(n int, pathAt func(int) string, paths []string) ([]bool, error) {
	clean := make([]string, len(paths))
	for i, p := range paths {
		c, err := CleanPath(p)
		if err != nil {
			return nil, err
		}
		clean[i] = c
	}
	keep := make([]bool, n)
	found := make([]bool, len(paths))
	for i := range n {
		p := pathAt(i)
		for k, c := range clean {
			if c == "." || p == c || strings.HasPrefix(p, c) && len(p) > len(c) && p[len(c)] == '/' {
				keep[i], found[k] = true, true
			}
		}
	}
	var unmatched []string
	for k, p := range paths {
		if !found[k] {
			unmatched = append(unmatched, p)
		}
	}
	if len(unmatched) > 0 {
		return nil, &NoMatchError{Paths: unmatched}
	}
	return keep, nil
}

// NoMatchError names paths that select no change.
type NoMatchError struct{ Paths []string }

func (e *NoMatchError) Error() string {
	return fmt.Sprintf("no change at %s: `airlock diff --stat` lists the changed paths", strings.Join(names.Quotes(e.Paths), ", "))
}

// CleanPath validates a user- or session-supplied relative path and returns
// it slash-separated and cleaned. It refuses absolute paths, ".." and NUL.
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", &PathError{Path: p, Reason: "empty path"}
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", &PathError{Path: p, Reason: "path contains a NUL byte"}
	}
	if strings.HasPrefix(p, "/") {
		return "", &PathError{Path: p, Reason: "absolute path: give it relative to the project root"}
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", &PathError{Path: p, Reason: "path leaves the project (..)"}
		}
	}
	return path.Clean(p), nil
}

// PathError is a path refused before anything was done with it.
type PathError struct{ Path, Reason string }

func (e *PathError) Error() string { return fmt.Sprintf("%s: %s", names.Quote(e.Path), e.Reason) }
