package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
)

// RecordOptions tune a Record.
type RecordOptions struct {
	// Label is kept with the checkpoint ("turn 3", "exec make test").
	Label string
	// Attempts is how often a file that changes while it is read is read
	// again before it is recorded as unstable (default 3).
	Attempts int
	// Dir, when set, is called with each directory's open descriptor
	// (beneath root, reached without following a symlink) before its
	// entries are read: a watch marked there sees every later change
	// the walk would not.
	Dir func(fd int)
	// IfChanged records nothing when the directory is as the newest
	// checkpoint has it (same root tree and metadata, nothing unstable):
	// Record then returns the newest checkpoint itself, whose ID is not
	// new. A command that changed nothing costs a walk, no record.
	IfChanged bool
}

// Limits of what one checkpoint records, against a hostile directory.
const (
	maxNames   = 1_000_000 // names in one directory
	maxXattrs  = 64 << 10  // bytes of one entry's extended attributes
	maxRegions = 4096      // data regions of one sparse file
)

// racyWindow is how close to the start of a Record a change must be for
// the file's stat data not to be trusted next time: a write in the same
// timestamp tick as the read could leave size and times as they were
// (git's "racily clean" entries). File times come from the kernel's
// coarse clock; twice its tick covers them.
func racyWindow() time.Duration {
	var ts unix.Timespec
	if unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &ts) != nil || ts.Nano() <= 0 {
		return 20 * time.Millisecond
	}
	return 2 * time.Duration(ts.Nano())
}

// opaqueXattr marks an overlay directory that hides the lower one.
const opaqueXattr = "trusted.overlay.opaque"

// keepXattr says which extended attributes a checkpoint carries: the
// user's, not those an overlay mounted with userxattr would obey.
func keepXattr(name string) bool {
	return strings.HasPrefix(name, "user.") && !strings.HasPrefix(name, "user.overlay.")
}

// Record records the directory root (an overlay upper directory) as a
// new checkpoint and returns it. Only what changed since the newest
// checkpoint is read: a file whose stat data (device, inode, size, mode,
// owner, mtime, ctime) equal the newest checkpoint's is taken from it
// unread, and only objects the store lacks are written.
//
// The directory may change meanwhile (a periodic checkpoint of a running
// session): every file is read through its open descriptor and its stat
// compared before and after; one that changed is read again, and after
// opts.Attempts recorded as unstable (Checkpoint.Unstable), never half.
// Nothing beneath root is reached through a symlink, FIFOs are recorded
// and never opened, sockets and devices are skipped.
//
// The record is written last, atomically, after everything it names is
// durable: a Record that fails or is killed lists nothing (its objects
// are removed by GC).
func (s *Store) Record(ctx context.Context, root *confined.Root, opts RecordOptions) (*Checkpoint, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	start := time.Now()
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	var prev *Checkpoint
	next := ID(1)
	if len(ids) > 0 {
		last := ids[len(ids)-1]
		if prev, err = s.readRecord(last); err != nil {
			return nil, err
		}
		next = last + 1
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	r := &recorder{s: s, ctx: ctx, opts: opts, start: start, racy: racyWindow(), links: map[[2]uint64]*Entry{},
		trees: map[string]*tree{}, buf: make([]byte, 1<<20), pendingDigests: map[string]bool{}}
	defer r.abort()
	if prev != nil {
		r.prevUnstable = map[string]bool{}
		for _, p := range prev.Unstable {
			r.prevUnstable[p] = true
		}
	}
	c := &Checkpoint{ID: next, Time: start.UTC(), Label: opts.Label}
	var prevRoot *Entry
	if prev != nil {
		c.Parent, prevRoot = prev.ID, &prev.Root
	}
	var st unix.Stat_t
	if err := unix.Fstat(root.Fd(), &st); err != nil {
		return nil, err
	}
	r.restored = s.loadRestored(&st)
	var was *Entry
	if r.restored != nil {
		was = &r.restored.root
	}
	if c.Root, err = r.directory(root, "", &st, prevRoot, was); err != nil {
		return nil, err
	}
	if err := r.flush(); err != nil {
		return nil, err
	}
	c.Unstable, c.Skipped = r.unstable, r.skipped
	if opts.IfChanged && prev != nil && !r.changed && len(c.Unstable) == 0 && len(prev.Unstable) == 0 && sameDirMeta(&c.Root, &prev.Root) {
		if s.trees == nil {
			s.trees = r.trees // prev's own, read back by this walk: kept for the next
		}
		return prev, nil
	}
	r.stats.Duration = time.Since(start)
	c.Stats = r.stats
	data, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	c.Stats.BytesWritten += int64(len(data))
	if data, err = json.Marshal(c); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(s.recordPath(c.ID), data, 0o600); err != nil {
		return nil, err
	}
	s.trees = r.trees
	if r.restored != nil {
		// The checkpoint carries the restored files' keys on.
		if err := s.dropRestored(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// RecordDir is Record of the directory dir (a path the caller trusts).
func (s *Store) RecordDir(ctx context.Context, dir string, opts RecordOptions) (*Checkpoint, error) {
	root, err := confined.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return s.Record(ctx, root, opts)
}

type recorder struct {
	s     *Store
	ctx   context.Context
	opts  RecordOptions
	start time.Time
	racy  time.Duration
	// links maps device and inode of files with several names to the
	// entry of the first name met.
	links  map[[2]uint64]*Entry
	trees  map[string]*tree // written or reused by this Record (nil: too many to keep)
	cached int              // entries in trees
	// restored are the files the last Restore made in this directory,
	// with their stat keys then (nil when it was into another one).
	restored     *restoredFiles
	prevUnstable map[string]bool
	unstable     []string
	skipped      []string
	stats        Stats
	buf          []byte
	small        []byte // storeSmall's, reused
	// pending are objects written and not yet synced and named.
	pending        []pendingObject
	pendingDigests map[string]bool
	// changed is set once an entry differs from the parent's in what
	// Diff compares (not only in its stat key).
	changed bool
}

// errChanged: the entry changed while it was read (or was swapped for
// another type): read it again.
var errChanged = errors.New("changed while read")

// directory records the open directory d (the entry rel, whose stat is
// st) and everything beneath it, and returns its entry (Name left to the
// caller). prev and was are its entries in the newest checkpoint and in
// the one the last Restore made it from (nil: none).
func (r *recorder) directory(d *confined.Root, rel string, st *unix.Stat_t, prev, was *Entry) (Entry, error) {
	if err := r.ctx.Err(); err != nil {
		return Entry{}, err
	}
	if r.opts.Dir != nil {
		r.opts.Dir(d.Fd())
	}
	e := entryOf(st)
	xs, err := confined.Xattrs(d.Fd(), func(k string) bool { return keepXattr(k) || k == opaqueXattr }, maxXattrs)
	if err != nil {
		return e, fmt.Errorf("%s: %w", d.Name(), err)
	}
	e.Opaque = xs[opaqueXattr] == "y"
	delete(xs, opaqueXattr)
	e.Xattrs = bytesMap(xs)
	prevDir, err := r.s.openDir(dirDigest(prev))
	if err != nil {
		return e, err
	}
	wasDir := prevDir // a wake: the newest checkpoint was restored
	if was == nil {
		wasDir = nil
	} else if dirDigest(was) != dirDigest(prev) {
		if wasDir, err = r.s.openDir(dirDigest(was)); err != nil {
			return e, err
		}
	}
	names, err := d.ReadDirNames("", maxNames)
	if err != nil {
		return e, err
	}
	slices.Sort(names)
	w := &dirWriter{r: r, prev: prevDir, big: len(names) > partMax, same: true}
	if !w.big {
		w.cur = make([]Entry, 0, len(names))
	}
	prevCount := prevDir.count()
	same := prevDir.top != nil && len(names) == prevCount
	for _, n := range names {
		o, err := prevDir.find(n)
		if err != nil {
			return e, err
		}
		wo, err := wasDir.find(n)
		if err != nil {
			return e, err
		}
		ce, ok, err := r.entry(d, path.Join(rel, n), n, o, wo)
		if err != nil {
			return e, err
		}
		if ok {
			ce.Name = n
			unchanged := o != nil && ce.sameAs(o) && sameStat(ce.Stat, o.Stat)
			same = same && unchanged
			if o == nil || ce.Type == Dir && o.Type == Dir && !sameDirMeta(&ce, o) || (ce.Type != Dir || o.Type != Dir) && !ce.sameAs(o) {
				r.changed = true
			}
			if err := w.add(ce, unchanged); err != nil {
				return e, err
			}
		} else {
			same = false
		}
	}
	if prevDir.top != nil && w.n != prevCount || prevDir.top == nil && w.n > 0 {
		r.changed = true // names went away (or a directory that was not one before)
	}
	if same && !w.big {
		// Every entry as before: the same tree, not encoded again.
		r.keepTree(prev.Digest, prevDir.top)
		e.Digest = prev.Digest
		r.stats.Entries++
		return e, nil
	}
	if e.Digest, err = w.finish(); err != nil {
		return e, err
	}
	r.stats.Entries++
	return e, nil
}

// dirDigest is the tree of the directory entry e ("": none).
func dirDigest(e *Entry) string {
	if e == nil || e.Type != Dir {
		return ""
	}
	return e.Digest
}

// dirWriter stores a directory's tree as its entries come, in name
// order: whole when it is small, else part by part (parts.go), each part
// written as soon as it is cut, or taken from the newest checkpoint
// unencoded when it holds the same entries.
type dirWriter struct {
	r     *recorder
	prev  *dirReader
	big   bool
	cur   []Entry // the entries (small), or the part being gathered
	same  bool    // every entry of cur is prev's, unchanged
	parts []part
	n     int
}

func (w *dirWriter) add(e Entry, unchanged bool) error {
	w.n++
	w.cur = append(w.cur, e)
	w.same = w.same && unchanged
	if w.big && cutAfter(e.Name, len(w.cur)) {
		return w.cut()
	}
	return nil
}

// cut stores the part gathered.
func (w *dirWriter) cut() error {
	if len(w.cur) == 0 {
		return nil
	}
	p := part{First: w.cur[0].Name, Count: len(w.cur)}
	if w.same {
		p.Digest = w.prevPart(p.First, p.Count, w.cur[len(w.cur)-1].Name)
	}
	if p.Digest == "" {
		t := &tree{Entries: w.cur}
		d, err := w.r.putTree(t)
		if err != nil {
			return err
		}
		w.r.keepTree(d, t)
		p.Digest = d
	}
	w.parts = append(w.parts, p)
	w.cur, w.same = make([]Entry, 0, partAvg), true
	return nil
}

// prevPart is the digest of the newest checkpoint's part of count
// entries from first to last, or "": a run of unchanged entries that
// fills it is that part, entry for entry.
func (w *dirWriter) prevPart(first string, count int, last string) string {
	if w.prev == nil || w.prev.top == nil {
		return ""
	}
	ps := w.prev.top.Parts
	i, ok := slices.BinarySearchFunc(ps, first, func(p part, n string) int { return strings.Compare(p.First, n) })
	if !ok || ps[i].Count != count || i+1 < len(ps) && last >= ps[i+1].First {
		return ""
	}
	return ps[i].Digest
}

// finish stores what is left and the directory's tree, and returns its
// digest.
func (w *dirWriter) finish() (string, error) {
	if w.big {
		if err := w.cut(); err != nil {
			return "", err
		}
	}
	t := &tree{Entries: w.cur}
	if len(w.parts) > 0 {
		t = &tree{Parts: w.parts}
	}
	d, err := w.r.putTree(t)
	if err != nil {
		return "", err
	}
	w.r.keepTree(d, t)
	return d, nil
}

// maxCachedEntries bounds the trees a store keeps in memory between
// Records (about 300 bytes an entry): a larger directory tree is read
// back from its objects by the next Record, so that a session of
// hundreds of thousands of files costs the engine no memory between its
// checkpoints.
const maxCachedEntries = 20000

// keepTree keeps t for the next Record while the trees kept stay small.
func (r *recorder) keepTree(digest string, t *tree) {
	if r.trees == nil {
		return
	}
	if r.cached += len(t.Entries) + len(t.Parts); r.cached > maxCachedEntries {
		r.trees = nil
		return
	}
	r.trees[digest] = t
}

// entry records the name n of directory d (the path rel): ok is false
// when it is not recorded (gone meanwhile, a socket, a device, unstable
// with no earlier version).
func (r *recorder) entry(d *confined.Root, rel, n string, prev, was *Entry) (Entry, bool, error) {
	for attempt := 1; ; attempt++ {
		e, ok, err := r.entryOnce(d, rel, n, prev, was)
		if !errors.Is(err, errChanged) {
			return e, ok, err
		}
		if attempt >= r.opts.Attempts {
			r.unstable = append(r.unstable, rel)
			if prev != nil && prev.Type == File && !r.prevUnstable[rel] && prev.HardLink == "" {
				keep := *prev
				keep.Stat = nil // read it again next time
				r.stats.Entries++
				r.stats.Bytes += keep.Size
				return keep, true, nil
			}
			return Entry{}, false, nil
		}
		r.stats.Retries++
	}
}

func (r *recorder) entryOnce(d *confined.Root, rel, n string, prev, was *Entry) (Entry, bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.Fd(), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return Entry{}, false, nil // deleted while walking
		}
		return Entry{}, false, fmt.Errorf("stat %s: %w", path.Join(d.Name(), n), err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		sub, err := d.OpenDir(n)
		if errors.Is(err, confined.ErrSymlink) || errors.Is(err, confined.ErrNotDir) || errors.Is(err, fs.ErrNotExist) {
			return Entry{}, false, errChanged // swapped since the stat
		}
		if err != nil {
			return Entry{}, false, err
		}
		defer sub.Close()
		if err := unix.Fstat(sub.Fd(), &st); err != nil {
			return Entry{}, false, err
		}
		e, err := r.directory(sub, rel, &st, prev, was)
		return e, err == nil, err
	case unix.S_IFREG:
		if e, ok := r.unopened(rel, &st, prev, was); ok {
			return e, true, nil
		}
		return r.file(d, rel, n, prev, was)
	case unix.S_IFLNK:
		target, err := d.Readlink(n)
		if err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, fs.ErrNotExist) {
				return Entry{}, false, errChanged
			}
			return Entry{}, false, err
		}
		var after unix.Stat_t
		if unix.Fstatat(d.Fd(), n, &after, unix.AT_SYMLINK_NOFOLLOW) != nil || after.Ino != st.Ino || after.Ctim != st.Ctim {
			return Entry{}, false, errChanged
		}
		e := entryOf(&st)
		e.Type, e.Target = Symlink, target
		r.stats.Entries++
		return e, true, nil
	case unix.S_IFIFO:
		e := entryOf(&st)
		e.Type = FIFO
		r.stats.Entries++
		return e, true, nil
	case unix.S_IFCHR:
		if st.Rdev == 0 {
			e := entryOf(&st)
			e.Type, e.Mode = Whiteout, 0
			r.stats.Entries++
			return e, true, nil
		}
	}
	r.skipped = append(r.skipped, rel) // a socket or a device
	return Entry{}, false, nil
}

func sameStat(a, b *StatKey) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// entryOf is the metadata of an entry from its stat.
func entryOf(st *unix.Stat_t) Entry {
	return Entry{Type: Dir, Mode: st.Mode & 0o7777, UID: int(st.Uid), GID: int(st.Gid), Mtime: st.Mtim.Nano()}
}

func bytesMap(xs map[string]string) map[string][]byte {
	if len(xs) == 0 {
		return nil
	}
	out := make(map[string][]byte, len(xs))
	for k, v := range xs {
		out[k] = []byte(v)
	}
	return out
}

// file records the regular file n: unread when its stat data equal prev's,
// else read (and stored unless the store has it).
func (r *recorder) file(d *confined.Root, rel, n string, prev, was *Entry) (Entry, bool, error) {
	fd, st, err := d.OpenFd(n)
	if errors.Is(err, confined.ErrNotRegular) || errors.Is(err, confined.ErrSymlink) || errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, errChanged // swapped since the stat
	}
	if err != nil {
		return Entry{}, false, err
	}
	defer unix.Close(fd)
	e := entryOf(st)
	e.Type, e.Size = File, st.Size
	key := &StatKey{Dev: st.Dev, Ino: st.Ino, Ctime: st.Ctim.Nano()}
	if st.Nlink > 1 {
		if first, ok := r.links[[2]uint64{st.Dev, st.Ino}]; ok {
			link := *first
			link.HardLink = first.Name // the first name's path, set below
			r.stats.Entries++
			return link, true, nil
		}
	}
	switch {
	case unread(prev, key, &e):
		e = *prev
		e.HardLink = ""
	case r.fromRestore(rel, key, &e, was):
		e.HardLink = ""
	default:
		if e, err = r.read(fd, st, rel, prev); err != nil {
			return Entry{}, false, err
		}
		if r.isRacy(st) {
			key = nil
		}
		e.Stat = key
	}
	r.stats.Entries++
	r.stats.Bytes += e.Size
	if st.Nlink > 1 {
		first := e
		first.Name = rel // the path later names link to
		r.links[[2]uint64{st.Dev, st.Ino}] = &first
	}
	return e, true, nil
}

// unopened takes a file of one name whose stat data (from fstatat beneath
// its directory, no symlink followed) equal prev's, or the restored
// file's (was), from them without opening it: most files of a checkpoint
// are unchanged, and an open and a close each cost more than the stat. A
// file with several names is opened (file), to group its names.
func (r *recorder) unopened(rel string, st *unix.Stat_t, prev, was *Entry) (Entry, bool) {
	if st.Nlink != 1 {
		return Entry{}, false
	}
	e := entryOf(st)
	e.Type, e.Size = File, st.Size
	key := &StatKey{Dev: st.Dev, Ino: st.Ino, Ctime: st.Ctim.Nano()}
	switch {
	case unread(prev, key, &e):
		e = *prev
	case r.fromRestore(rel, key, &e, was):
	default:
		return Entry{}, false
	}
	e.HardLink = ""
	r.stats.Entries++
	r.stats.Bytes += e.Size
	return e, true
}

// fromRestore says whether the file at rel, whose stat key and entry
// (from its stat) are key and e, is the one the last Restore made from
// was, unchanged since; if so e becomes was with the key.
func (r *recorder) fromRestore(rel string, key *StatKey, e *Entry, was *Entry) bool {
	if was == nil || !r.restored.has(rel, key) {
		return false
	}
	w := *was
	w.Stat = key
	if !unread(&w, key, e) {
		return false
	}
	*e = w
	return true
}

// unread says whether the file whose stat key and entry (from its stat)
// are key and e is the one prev was read from, unchanged since.
func unread(prev *Entry, key *StatKey, e *Entry) bool {
	return prev != nil && prev.Type == File && prev.Stat != nil && *prev.Stat == *key &&
		prev.Mode == e.Mode && prev.UID == e.UID && prev.GID == e.GID && prev.Mtime == e.Mtime && prev.Size == e.Size
}

// racy says whether the file changed so close to the Record's start that
// a later write could leave its stat data as they are now.
func (r *recorder) isRacy(st *unix.Stat_t) bool {
	t := r.start.Add(-r.racy).UnixNano()
	return st.Mtim.Nano() >= t || st.Ctim.Nano() >= t
}

// read reads the open file fd (stat st) into the store and returns its
// entry; errChanged when it changed meanwhile.
func (r *recorder) read(fd int, st *unix.Stat_t, rel string, prev *Entry) (Entry, error) {
	e := entryOf(st)
	e.Type, e.Size = File, st.Size
	xs, err := confined.Xattrs(fd, keepXattr, maxXattrs)
	if err != nil {
		return e, fmt.Errorf("%s: %w", rel, err)
	}
	e.Xattrs = bytesMap(xs)
	var regions []Region
	if st.Size > 0 && st.Blocks*512 < st.Size {
		if regions, err = dataRegions(fd, st.Size); err != nil {
			return e, fmt.Errorf("%s: %w", rel, err)
		}
		e.Sparse, e.Regions = regions != nil, regions
	}
	r.stats.FilesRead++
	// A file of the same size as before (touched, or the same bytes
	// again after a restore) is hashed first and written only when the
	// store lacks it; any other is hashed while it is written.
	if prev != nil && prev.Type == File && prev.Size == st.Size && prev.Sparse == e.Sparse {
		digest, n, err := r.hash(fd, st, e.Regions, e.Sparse)
		r.stats.BytesRead += n
		if err != nil {
			return e, err
		}
		if r.has(digest) {
			e.Digest = digest
			return e, r.unchanged(fd, st)
		}
	}
	if e.Digest, err = r.store(fd, st, e.Regions, e.Sparse); err != nil {
		return e, err
	}
	return e, r.unchanged(fd, st)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// unchanged checks that the open file still has the stat it was read with.
func (r *recorder) unchanged(fd int, st *unix.Stat_t) error {
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return err
	}
	if after.Size != st.Size || after.Mtim != st.Mtim || after.Ctim != st.Ctim {
		return errChanged
	}
	return nil
}

// contentHash starts the digest of a file's content: the bytes, or for a
// sparse file a header with its size and regions, then the data.
func contentHash(size int64, regions []Region, sparse bool) hash.Hash {
	h := sha256.New()
	if sparse {
		var b strings.Builder
		b.WriteString("airlock-sparse/1 " + strconv.FormatInt(size, 10) + "\n")
		for _, rg := range regions {
			b.WriteString(strconv.FormatInt(rg.Off, 10) + " " + strconv.FormatInt(rg.Len, 10) + "\n")
		}
		h.Write([]byte(b.String()))
	}
	return h
}

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// dataOf is what is read of a file: its regions, or all of it.
func dataOf(size int64, regions []Region, sparse bool) []Region {
	if sparse {
		return regions
	}
	if size == 0 {
		return nil
	}
	return []Region{{0, size}}
}

// hash reads the file's data and returns its digest and the bytes read.
func (r *recorder) hash(fd int, st *unix.Stat_t, regions []Region, sparse bool) (string, int64, error) {
	h := contentHash(st.Size, regions, sparse)
	n, err := copyRegions(fd, dataOf(st.Size, regions, sparse), r.buf, func(b []byte, _ int64) error {
		h.Write(b)
		return nil
	})
	return digestOf(h), n, err
}

// copyRegions reads the regions of fd and hands each piece, with its
// offset, to put; errChanged when the file ends early.
func copyRegions(fd int, regions []Region, buf []byte, put func(b []byte, off int64) error) (int64, error) {
	var total int64
	for _, rg := range regions {
		for off := rg.Off; off < rg.Off+rg.Len; {
			n, err := unix.Pread(fd, buf[:min(int64(len(buf)), rg.Off+rg.Len-off)], off)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return total, err
			}
			if n == 0 {
				return total, errChanged // it shrank
			}
			total += int64(n)
			if err := put(buf[:n], off); err != nil {
				return total, err
			}
			off += int64(n)
		}
	}
	return total, nil
}

// store writes the file's content as an object, hashing as it goes (or,
// where the file system can, reflinks it and hashes the clone), and
// returns its digest. The object is synced and named with the others at
// the end of the Record (flush).
func (r *recorder) store(fd int, st *unix.Stat_t, regions []Region, sparse bool) (string, error) {
	if !sparse && st.Size <= smallObject {
		return r.storeSmall(fd, st, regions)
	}
	tmp, err := os.CreateTemp(r.s.tmpDir(), "obj-*")
	if err != nil {
		return "", err
	}
	kept := false
	defer func() {
		if !kept {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	out := int(tmp.Fd())
	h := contentHash(st.Size, regions, sparse)
	src := fd
	var written int64
	if !sparse && !r.s.noClone && st.Size > 0 {
		// A reflink is an instant copy of the extents: the content is
		// then hashed from the clone, which nothing else can change.
		if err := unix.IoctlFileClone(out, fd); err == nil {
			src = out
		} else {
			r.s.noClone = true
		}
	}
	n, err := copyRegions(src, dataOf(st.Size, regions, sparse), r.buf, func(b []byte, off int64) error {
		h.Write(b)
		if src == out {
			return nil
		}
		_, err := unix.Pwrite(out, b, off)
		written += int64(len(b))
		return err
	})
	r.stats.BytesRead += n
	r.stats.BytesWritten += written
	if err != nil {
		return "", err
	}
	if sparse {
		if err := unix.Ftruncate(out, st.Size); err != nil {
			return "", err
		}
	}
	digest := digestOf(h)
	if r.has(digest) {
		return digest, nil // stored before: the copy is dropped
	}
	kept = true
	return digest, r.add(tmp, digest)
}

// smallObject is the size up to which a file is read whole before it is
// written: an object the store holds already (an empty file, a file
// unchanged but for its stat data) then costs no temporary file.
const smallObject = 64 << 10

// storeSmall is store for a file of at most smallObject bytes.
func (r *recorder) storeSmall(fd int, st *unix.Stat_t, regions []Region) (string, error) {
	data := r.small[:0]
	n, err := copyRegions(fd, dataOf(st.Size, regions, false), r.buf, func(b []byte, off int64) error {
		data = append(data, b...)
		return nil
	})
	r.small = data[:0]
	r.stats.BytesRead += n
	if err != nil {
		return "", err
	}
	h := contentHash(st.Size, regions, false)
	h.Write(data)
	return r.putAs(digestOf(h), data)
}

// has says whether the store holds the object, or this Record wrote it.
func (r *recorder) has(digest string) bool {
	if r.pendingDigests[digest] {
		return true
	}
	p, err := r.s.objectPath(digest)
	return err == nil && fileExists(p)
}

// putAs stores data, whose digest is digest, unless it is stored already.
func (r *recorder) putAs(digest string, data []byte) (string, error) {
	if r.has(digest) {
		return digest, nil
	}
	tmp, err := os.CreateTemp(r.s.tmpDir(), "obj-*")
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	r.stats.BytesWritten += int64(len(data))
	return digest, r.add(tmp, digest)
}

// add keeps a written object for flush; many at once are flushed early,
// to bound the open files.
func (r *recorder) add(tmp *os.File, digest string) error {
	r.pending = append(r.pending, pendingObject{tmp, digest})
	r.pendingDigests[digest] = true
	r.stats.NewObjects++
	if len(r.pending) >= 256 {
		return r.flush()
	}
	return nil
}

type pendingObject struct {
	f      *os.File
	digest string
}

// flush makes the written objects durable and gives them their names:
// the syncs run in parallel (a journaling file system commits them
// together: 10 objects in about the time of 2 or 3 syncs in a row).
func (r *recorder) flush() error {
	pending := r.pending
	r.pending = nil
	errs := make([]error, len(pending))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, o := range pending {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = unix.Fdatasync(int(o.f.Fd()))
			if err := o.f.Close(); errs[i] == nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	var first error
	for i, o := range pending {
		err := errs[i]
		if err == nil {
			var p string
			if p, err = r.s.objectPath(o.digest); err == nil {
				err = r.s.commit(o.f.Name(), p)
			}
		}
		if err != nil {
			os.Remove(o.f.Name())
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// abort drops the objects not yet flushed.
func (r *recorder) abort() {
	for _, o := range r.pending {
		o.f.Close()
		os.Remove(o.f.Name())
	}
	r.pending = nil
}
