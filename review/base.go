package review

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/confined"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"golang.org/x/sys/unix"
)

// Base records what the project looked like when a session started, so
// that a later review can tell the session's changes from the host's and
// merge the two. See docs/ARCHITECTURE.md ("Base capture") for the choice
// and its cost.
//
// At start: a stat manifest of every project file (size, mtime, ctime,
// inode, mode) and, for git projects, a copy of .git/index, whose blob ids
// give the start content of every file that was clean then. After start,
// in the background, the content of the other files (untracked or dirty in
// git, or all files of a non-git project) is captured while it is cheap
// (files up to 1 MiB, a total budget).
type Base struct {
	dir     string
	project string

	once     sync.Once
	manifest manifest
	loadErr  error
	gitIndex map[string]*index.Entry
	packed   map[string][2]int64 // path -> offset, length in the pack
	// overrides record what accepts wrote since the start: the new common
	// ancestor of the host and the session for those paths. Mapped from
	// their table (see overrides.go), replaced whole by each accept.
	overrides  overrideTable
	overMapped []byte
	mu         sync.Mutex
	mapped     []byte // the manifest, memory-mapped: only the pages a lookup touches are read
	// accepting serializes accepts' rewrites of the overrides.
	accepting sync.Mutex
	// pending is closed when a background walk has written the manifest.
	pending    chan struct{}
	pendingErr error
}

// mapFile maps a file read-only; an empty file maps to nil.
func mapFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil, err
	}
	return unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
}

func unmap(data []byte) {
	if data != nil {
		unix.Munmap(data)
	}
}

// Close releases the mapped manifest and overrides. The Base must not be
// used after.
func (b *Base) Close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	unmap(b.mapped)
	unmap(b.overMapped)
	b.mapped, b.overMapped = nil, nil
	b.manifest, b.overrides = manifest{}, overrideTable{}
}

// override is the base of a path after an accept wrote it.
type override struct {
	Path    string    `json:"path"`
	Gone    bool      `json:"gone,omitempty"` // deleted by the accept
	Stat    statEntry `json:"stat"`
	Object  string    `json:"object,omitempty"`  // content stored in objects/
	Session string    `json:"session,omitempty"` // sha256 of the session's file it came from
}

type statEntry struct {
	Size  int64
	Mtime int64
	Ctime int64
	Ino   uint64
	Mode  uint32
	// Uncertain: the session had already written this path when the walk
	// reached it, so its start state is not known; any change on the host
	// side is then treated as a conflict.
	Uncertain bool `json:",omitempty"`
}

func entryOf(fi fs.FileInfo) statEntry {
	st := fi.Sys().(*syscall.Stat_t)
	return statEntry{Size: fi.Size(), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino, Mode: uint32(fi.Mode())}
}

const (
	manifestName  = "manifest"
	gitIndexName  = "git-index"
	contentsName  = "contents"
	packName      = "contents.pack"
	objectsDir    = "objects"
	overridesName = "overrides"
)

// CaptureBase records the project's base in dir. upper is the session's
// upper directory (the session may already be writing when a walk reaches
// a path; such paths are marked).
//
// For a git project the call returns once the git index is copied, and
// the walk finishes in the background (review waits for it): the index
// gives the start state of every tracked file the session touches before
// the walk reaches it, so a clean checkout costs the session's start O(1).
// Without git the walk is done before the call returns.
//
// after, when not nil, delays a background walk until it is closed (the
// engine closes it once the container has started, so the walk does not
// compete with Docker for the CPU).
func CaptureBase(project, dir, upper string, after <-chan struct{}) (*Base, error) {
	if err := os.MkdirAll(filepath.Join(dir, objectsDir), 0o700); err != nil {
		return nil, err
	}
	b := OpenBase(project, dir)
	data, err := os.ReadFile(filepath.Join(project, ".git", "index"))
	if err != nil {
		return b, b.walk(upper, nil)
	}
	if err := os.WriteFile(filepath.Join(dir, gitIndexName), data, 0o600); err != nil {
		return nil, err
	}
	b.pending = make(chan struct{})
	go func() {
		defer close(b.pending)
		if after != nil {
			<-after
		}
		if err := b.walk(upper, b.index); err != nil {
			b.pendingErr = err
		}
	}()
	return b, nil
}

// walk records the manifest. Paths the session had written before the
// walk reached them take their git index entry when there is one, and
// are marked uncertain otherwise. The git index (nil: none) is decoded
// only then: a large one takes about as long as the walk.
func (b *Base) walk(upper string, gitIndex func() map[string]*index.Entry) error {
	entries, err := walkStats(b.project, upper)
	if err != nil {
		return err
	}
	var idx map[string]*index.Entry
	for i, e := range entries {
		if !e.Uncertain {
			continue
		}
		if idx == nil && gitIndex != nil {
			idx = gitIndex()
		}
		if ie := idx[e.path]; ie != nil {
			mode, err := ie.Mode.ToOSFileMode()
			if err != nil {
				continue
			}
			entries[i].statEntry = statEntry{Size: int64(ie.Size), Mtime: ie.ModifiedAt.UnixNano(), Ctime: ie.CreatedAt.UnixNano(),
				Ino: uint64(ie.Inode), Mode: uint32(mode)}
		}
	}
	return writeManifest(filepath.Join(b.dir, manifestName), entries)
}

// Ready waits until the base is recorded and reports whether it is usable.
func (b *Base) Ready() error {
	if b == nil {
		return nil
	}
	return b.load()
}

// OpenBase opens a base recorded by CaptureBase; it is loaded on first use.
func OpenBase(project, dir string) *Base {
	return &Base{dir: dir, project: project}
}

func (b *Base) load() error {
	if b.pending != nil {
		<-b.pending
		if b.pendingErr != nil {
			return b.pendingErr
		}
	}
	b.once.Do(func() {
		data, err := mapFile(filepath.Join(b.dir, manifestName))
		if err != nil {
			b.loadErr = fmt.Errorf("read the session's base manifest: %w", err)
			return
		}
		b.mapped = data
		m, err := parseManifest(data)
		if err != nil {
			b.loadErr = err
			return
		}
		b.manifest = m
		if err := b.convertOverrides(); err != nil {
			b.loadErr = fmt.Errorf("read the session's base records of accepted files: %w", err)
			return
		}
		if err := b.mapOverrides(); err != nil {
			b.loadErr = err
			return
		}
		b.packed = map[string][2]int64{}
		if data, err := os.ReadFile(filepath.Join(b.dir, contentsName)); err == nil {
			for _, line := range bytes.Split(data, []byte{0}) {
				if p, loc, ok := bytes.Cut(line, []byte{'\n'}); ok {
					var off, n int64
					if _, err := fmt.Sscanf(string(loc), "%d %d", &off, &n); err == nil {
						b.packed[string(p)] = [2]int64{off, n}
					}
				}
			}
		}
	})
	return b.loadErr
}

// index returns the git index copied at start, by path (nil without one).
func (b *Base) index() map[string]*index.Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gitIndex != nil {
		return b.gitIndex
	}
	f, err := os.Open(filepath.Join(b.dir, gitIndexName))
	if err != nil {
		return nil
	}
	defer f.Close()
	idx := &index.Index{}
	if err := index.NewDecoder(bufio.NewReader(f)).Decode(idx); err != nil {
		return nil
	}
	m := make(map[string]*index.Entry, len(idx.Entries))
	for _, e := range idx.Entries {
		if e.Stage == 0 { // not an unmerged entry
			m[e.Name] = e
		}
	}
	b.gitIndex = m
	return m
}

// HostChanged reports whether the project's entry at p differs from what
// it was when the session started. hfi is its current Lstat (nil when it
// does not exist now).
func (b *Base) HostChanged(p string, hfi fs.FileInfo) (bool, error) {
	if b == nil {
		return false, nil
	}
	if err := b.load(); err != nil {
		return false, err
	}
	e, had := b.start(p)
	switch {
	case !had && hfi == nil:
		return false, nil
	case !had || hfi == nil:
		return true, nil
	}
	if e.Uncertain {
		return true, nil
	}
	if hfi.IsDir() {
		return fs.FileMode(e.Mode).IsDir() == false, nil
	}
	return entryOf(hfi) != e, nil
}

// start returns the base stat of p: after an accept wrote p, what it
// wrote; otherwise what p was when the session started.
func (b *Base) start(p string) (statEntry, bool) {
	if o, ok := b.override(p); ok {
		return o.Stat, !o.Gone
	}
	return b.manifest.lookup(p)
}

// override returns what the last accept that wrote p recorded of it.
func (b *Base) override(p string) (override, bool) {
	b.mu.Lock()
	defer b.mu.Unlock() // an accept unmaps the table it replaces
	return b.overrides.lookup(p)
}

// Content returns the base content of p (see start), if it is known and
// at most limit bytes. upper is the session's upper layer, where an
// accepted file's content may still be (read confined). ok is false when
// the base of p is unknown or too large.
func (b *Base) Content(p string, upper *confined.Root, limit int64) (data []byte, ok bool, err error) {
	if b == nil {
		return nil, false, nil
	}
	if err := b.load(); err != nil {
		return nil, false, err
	}
	if o, overridden := b.override(p); overridden {
		switch {
		case o.Gone:
			return nil, true, nil
		case o.Object != "":
			obj := filepath.Join(b.dir, objectsDir, o.Object)
			if fi, err := os.Stat(obj); err == nil && fi.Size() > limit {
				return nil, false, nil
			}
			data, err := os.ReadFile(obj)
			return data, err == nil, err
		case o.Session != "":
			data, err := upper.ReadFile(p, limit)
			if err == nil && sha256hex(data) == o.Session {
				return data, true, nil
			}
			return nil, false, nil
		}
		// Only the mode changed: the content's base is the original one.
	}
	e, had := b.manifest.lookup(p)
	if !had {
		return nil, true, nil // did not exist: the base is empty
	}
	if e.Uncertain {
		return nil, false, nil
	}
	b.mu.Lock()
	loc, captured := b.packed[p]
	b.mu.Unlock()
	if captured && loc[1] > limit {
		return nil, false, nil
	}
	if captured {
		f, err := os.Open(filepath.Join(b.dir, packName))
		if err != nil {
			return nil, false, err
		}
		defer f.Close()
		data := make([]byte, loc[1])
		if _, err := f.ReadAt(data, loc[0]); err != nil && !(err == io.EOF && loc[1] == 0) {
			return nil, false, err
		}
		return data, true, nil
	}
	if ie := b.index()[p]; ie != nil {
		if cleanInIndex(ie, e) && int64(ie.Size) <= limit && e.Size <= limit {
			out, err := exec.Command("git", "-C", b.project, "cat-file", "blob", ie.Hash.String()).Output()
			if err == nil {
				return out, true, nil
			}
		}
	}
	return nil, false, nil
}

// cleanInIndex reports whether a file with manifest entry e matched its
// git index entry ie at start: same stat data, and not "racily clean"
// (modified in the same second the index was written).
func cleanInIndex(ie *index.Entry, e statEntry) bool {
	if int64(ie.Size) != e.Size&0xffffffff || uint64(ie.Inode) != e.Ino&0xffffffff {
		return false
	}
	if ie.ModifiedAt.UnixNano() != e.Mtime || ie.CreatedAt.UnixNano() != e.Ctime {
		return false
	}
	return true
}

// CaptureContent copies the start content of files whose base the git
// index does not give, while that is cheap: regular files up to maxFile
// bytes, at most budget bytes in all, skipping any file that changes while
// it is read. The copies go to one pack file, not a file each. It runs
// after the session has started and stops when ctx ends. The files the
// session has already changed (in upper, when given) go first: theirs is
// the base a merge needs if the host changes them too, and the host may
// do so as soon as the session's first command returns.
func (b *Base) CaptureContent(ctx context.Context, upper string, maxFile, budget int64) error {
	if err := b.load(); err != nil {
		return err
	}
	list := b.notInIndex(maxFile)
	first, err := b.touchedFirst(ctx, list, upper)
	if err != nil {
		return err
	}
	pack, err := os.OpenFile(filepath.Join(b.dir, packName), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer pack.Close()
	w := bufio.NewWriterSize(pack, 1<<20)
	// A file is readable from the pack (b.packed) once its bytes are
	// written out, not while they sit in w: the touched files as soon as
	// they are all read, the rest each time w fills.
	type placed struct {
		path string
		at   [2]int64 // offset and length in the pack
	}
	var pending []placed
	publish := func() error {
		if err := w.Flush(); err != nil {
			return err
		}
		b.mu.Lock()
		for _, x := range pending {
			b.packed[x.path] = x.at
		}
		b.mu.Unlock()
		pending = pending[:0]
		return nil
	}
	var spent, off int64
	var index bytes.Buffer
	buf := make([]byte, maxFile+1)
	for i, x := range list {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if i == first && len(pending) > 0 {
			if err := publish(); err != nil {
				return err
			}
		}
		p, e := x.path, x.statEntry
		if spent+e.Size > budget {
			continue
		}
		f, err := os.OpenFile(filepath.Join(b.project, filepath.FromSlash(p)), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		n, rerr := io.ReadFull(f, buf)
		fi, serr := f.Stat()
		f.Close()
		if rerr != nil && rerr != io.ErrUnexpectedEOF && rerr != io.EOF || serr != nil || entryOf(fi) != e || int64(n) != e.Size {
			continue // changed since start: its base stays unknown
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		fmt.Fprintf(&index, "%s\n%d %d\x00", p, off, n)
		pending = append(pending, placed{p, [2]int64{off, int64(n)}})
		off += int64(n)
		spent += e.Size
		if w.Buffered() >= 1<<19 {
			if err := publish(); err != nil {
				return err
			}
		}
	}
	if err := publish(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.dir, contentsName), index.Bytes(), 0o600)
}

// notInIndex are the regular files of at most maxFile bytes whose start
// content the git index does not give, in path order.
func (b *Base) notInIndex(maxFile int64) []pathStat {
	idx := b.index()
	var list []pathStat
	b.manifest.each(func(p string, e statEntry) {
		if !fs.FileMode(e.Mode).IsRegular() || e.Size > maxFile {
			return
		}
		if ie := idx[p]; ie != nil && cleanInIndex(ie, e) {
			return
		}
		list = append(list, pathStat{p, e})
	})
	return list
}

// touchedFirst moves the entries of list the session has changed in
// upper ("": none) to its front, and says how many there are.
func (b *Base) touchedFirst(ctx context.Context, list []pathStat, upper string) (int, error) {
	if upper == "" {
		return 0, nil
	}
	changed, err := ChangesContext(ctx, Layers{Upper: upper, Project: b.project})
	if err != nil && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	touched := make(map[string]bool, len(changed))
	for _, c := range changed {
		touched[c.Path] = true
	}
	first := 0
	for i := range list {
		if touched[list[i].path] {
			list[first], list[i] = list[i], list[first]
			first++
		}
	}
	return first, nil
}

// pathStat is a walked entry: its slash-separated relative path and stat.
type pathStat struct {
	path string
	statEntry
}

// walkStats lstats every entry under root (not descending into .git) with
// a few goroutines, and returns them in no order. With upper set, an
// entry the session has already written there (or that lies under a
// directory the session replaced) is marked Uncertain.
func walkStats(root, upper string) ([]pathStat, error) {
	// The session's side is read confined: the session may be writing it
	// (and swapping directories for symlinks) while the walk runs.
	var ur *confined.Root
	if upper != "" {
		var err error
		if ur, err = confined.OpenRoot(upper); err != nil {
			return nil, fmt.Errorf("open the session's layer: %w", err)
		}
		defer ur.Close()
	}
	var out []pathStat
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(4, 2*runtime.NumCPU()))
	var visit func(rel string, hidden bool)
	visit = func(rel string, hidden bool) {
		defer wg.Done()
		sem <- struct{}{}
		dir := filepath.Join(root, filepath.FromSlash(rel))
		f, err := os.Open(dir)
		if err != nil {
			<-sem
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
			return
		}
		// The session's side of this directory, if it has one yet.
		ufd := -1
		if ur != nil && !hidden {
			if d, err := ur.OpenDir(rel); err == nil {
				ufd = d.Fd()
				defer d.Close()
				if rel != "" && isOpaqueFd(ufd) {
					hidden = true
				}
			}
		}
		names, _ := f.Readdirnames(-1)
		local := make([]pathStat, 0, len(names))
		type sub struct {
			p      string
			hidden bool
		}
		var subdirs []sub
		for _, n := range names {
			p := n
			if rel != "" {
				p = rel + "/" + n
			}
			if p == ".git" {
				continue
			}
			var st unix.Stat_t
			if err := unix.Fstatat(int(f.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue
			}
			e := statEntry{Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino, Mode: uint32(modeOf(st.Mode))}
			touched := hidden
			if ufd >= 0 && !touched {
				var ust unix.Stat_t
				touched = unix.Fstatat(ufd, n, &ust, unix.AT_SYMLINK_NOFOLLOW) == nil && ust.Mode&unix.S_IFMT != unix.S_IFDIR
			}
			e.Uncertain = touched
			local = append(local, pathStat{p, e})
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				subdirs = append(subdirs, sub{p, hidden})
			}
		}
		f.Close()
		<-sem
		mu.Lock()
		out = append(out, local...)
		mu.Unlock()
		for _, s := range subdirs {
			wg.Add(1)
			go visit(s.p, s.hidden)
		}
	}
	wg.Add(1)
	visit("", false)
	wg.Wait()
	return out, firstErr
}

// modeOf converts a stat mode to an fs.FileMode as os.Lstat does.
func modeOf(m uint32) fs.FileMode { return confined.FileMode(m) }

// manifest is the serialized stat manifest: a table (see table.go) of
// stat entries.
type manifest struct{ table }

const manifestMagic = "ALBM2\n"

func writeManifest(path string, entries []pathStat) error {
	slices.SortFunc(entries, func(a, b pathStat) int { return strings.Compare(a.path, b.path) })
	var buf bytes.Buffer
	buf.Grow(len(entries) * 48)
	offsets := make([]byte, 0, 4*len(entries))
	var tmp [binary.MaxVarintLen64]byte
	for _, e := range entries {
		p := e.path
		offsets = binary.LittleEndian.AppendUint32(offsets, uint32(buf.Len()))
		buf.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(p)))])
		buf.WriteString(p)
		for _, v := range []int64{e.Size, e.Mtime, e.Ctime} {
			buf.Write(tmp[:binary.PutVarint(tmp[:], v)])
		}
		buf.Write(tmp[:binary.PutUvarint(tmp[:], e.Ino)])
		buf.Write(tmp[:binary.PutUvarint(tmp[:], uint64(e.Mode))])
		flags := byte(0)
		if e.Uncertain {
			flags = 1
		}
		buf.WriteByte(flags)
	}
	if buf.Len() > 1<<32-1 {
		return fmt.Errorf("project too large for a base manifest")
	}
	buf.Write(offsets)
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(entries))))
	buf.WriteString(manifestMagic)
	// Written whole or not at all, and kept: a crash never leaves half a
	// manifest, nor an empty one renamed into place before its data.
	return atomicfile.Write(path, buf.Bytes(), 0o600)
}

var errCorrupt = errors.New("the session's base manifest is corrupt: its conflict detection is unavailable")

func parseManifest(data []byte) (manifest, error) {
	t, ok := parseTable(data, manifestMagic)
	if !ok {
		return manifest{}, errCorrupt
	}
	return manifest{t}, nil
}

// at decodes entry i.
func (m manifest) at(i int) (string, statEntry, bool) {
	rec := m.record(i)
	if rec == nil {
		return "", statEntry{}, false
	}
	r := bytes.NewReader(rec)
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(r.Len()) {
		return "", statEntry{}, false
	}
	p := make([]byte, n)
	io.ReadFull(r, p)
	var e statEntry
	e.Size, _ = binary.ReadVarint(r)
	e.Mtime, _ = binary.ReadVarint(r)
	e.Ctime, _ = binary.ReadVarint(r)
	e.Ino, _ = binary.ReadUvarint(r)
	mode, err := binary.ReadUvarint(r)
	e.Mode = uint32(mode)
	flags, ferr := r.ReadByte()
	e.Uncertain = flags&1 != 0
	return string(p), e, err == nil && ferr == nil
}

func (m manifest) lookup(p string) (statEntry, bool) {
	i, ok := m.find(p)
	if !ok {
		return statEntry{}, false
	}
	q, e, ok := m.at(i)
	return e, ok && q == p
}

func (m manifest) each(f func(string, statEntry)) {
	for i := 0; i < m.n; i++ {
		if p, e, ok := m.at(i); ok {
			f(p, e)
		}
	}
}

func sha256hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Accepted records what an accept wrote: from now on the project's path
// as it is now is the base of that path. files calls record with each
// path the accept wrote, in any order (for a path given twice, the later
// counts). A file's content is what was written when the accept computed
// it (a partial accept or a merge); its SessionSum identifies the session
// file that was copied otherwise. The records go to the base's table on
// disk; however many there are, they take bounded memory.
func (b *Base) Accepted(files func(record func(AcceptedFile) error) error) error {
	if b == nil {
		return files(func(AcceptedFile) error { return nil })
	}
	if err := b.load(); err != nil {
		return err
	}
	b.accepting.Lock()
	defer b.accepting.Unlock()
	return b.rewriteOverrides(func(add func(override) error) error {
		return files(func(a AcceptedFile) error {
			o, err := b.overrideOf(a)
			if err != nil {
				return err
			}
			return add(o)
		})
	})
}

// overrideOf is what the base records of a, as the project has it now.
func (b *Base) overrideOf(a AcceptedFile) (override, error) {
	o := override{Path: a.Path}
	fi, err := os.Lstat(filepath.Join(b.project, filepath.FromSlash(a.Path)))
	if err != nil {
		o.Gone = true
		return o, nil
	}
	o.Stat = entryOf(fi)
	if a.Content == nil {
		o.Session = a.SessionSum
		return o, nil
	}
	data := []byte(*a.Content)
	o.Object = sha256hex(data)
	obj := filepath.Join(b.dir, objectsDir, o.Object)
	if _, err := os.Stat(obj); err != nil {
		if err := os.WriteFile(obj, data, 0o600); err != nil {
			return o, err
		}
	}
	return o, nil
}

// AcceptedFile is one path an accept wrote (see Base.Accepted).
type AcceptedFile struct {
	Path       string
	Content    *string
	SessionSum string
}
