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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

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
	// Binary is set when either side is not text; no text diff is made.
	Binary      bool   `json:"binary,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Link        string `json:"link,omitempty"`     // symlink target in the session
	OldLink     string `json:"old_link,omitempty"` // symlink target in the project
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

// cacheLimit is the largest file a review keeps in memory.
const cacheLimit = 1 << 20

// readSmall reads a regular file of at most cacheLimit bytes.
func readSmallAt(dirfd int, name string, fi fs.FileInfo) ([]byte, bool) {
	if fi == nil || !fi.Mode().IsRegular() || fi.Size() > cacheLimit {
		return nil, false
	}
	// Raw open, read and close: the size is known from the stat, and
	// os.ReadFile's extra fstat and EOF read double the syscalls here.
	// (name may have directories in it; only its last part is never
	// followed if it is a symlink.)
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	b := make([]byte, fi.Size())
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil || n == 0 {
			return nil, false
		}
		off += n
	}
	return b, true
}

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
}

// Changes lists what the upper layer changes relative to the current project,
// sorted by path. An upper entry equal to the project's is not a change.
func Changes(l Layers) ([]Change, error) {
	w := &walker{sem: make(chan struct{}, max(4, 2*runtime.NumCPU())), hostRoot: -1}
	if fd, err := unix.Open(l.Project, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		w.hostRoot = fd
		defer unix.Close(fd)
	}
	var out []Change
	if err := w.walk(l, "", false, true, &out); err != nil {
		return nil, err
	}
	w.wg.Wait()
	out = append(out, w.more...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	for i := range out {
		out[i].setID()
	}
	return out, nil
}

func (c *Change) setID() {
	sum := sha256.Sum256([]byte("file\x00" + c.Path))
	c.ID = "f" + hex.EncodeToString(sum[:])[:9]
	if !utf8.ValidString(c.Path) {
		c.RawPath = []byte(c.Path)
	}
}

func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// isOpaqueFd is isOpaque on an open directory. Airlock mounts its overlays
// as root, so only the trusted namespace can hold the mark.
func isOpaqueFd(fd int) bool {
	buf := make([]byte, 8)
	n, err := unix.Fgetxattr(fd, "trusted.overlay.opaque", buf)
	return err == nil && n > 0 && buf[0] == 'y'
}

func isOpaque(p string) bool {
	buf := make([]byte, 8)
	for _, name := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		n, err := unix.Lgetxattr(p, name, buf)
		if err == nil && n > 0 && buf[0] == 'y' {
			return true
		}
	}
	return false
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

// walk visits the upper directory rel. opaque is true when the session's
// directory hides the project's (rm -rf then mkdir, at rel or above):
// then project entries the session lacks are deletions.
// walker walks subdirectories on a few goroutines: reading both sides of
// many small files is mostly waiting on syscalls.
type walker struct {
	hostRoot int // the project root, open
	sem      chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	more     []Change // changes found by subdirectory goroutines
}

func (w *walker) walk(l Layers, rel string, inherited, hostDir bool, out *[]Change) error {
	udir := filepath.Join(l.Upper, filepath.FromSlash(rel))
	// Entries are looked at relative to open directories: a stat or open by
	// full path resolves every component again, for every file.
	ufd, err := unix.Open(udir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: udir, Err: err}
	}
	defer unix.Close(ufd)
	// opaque: this directory hides the project's (rm -rf then mkdir, here
	// or above), so project entries the session lacks are deletions.
	opaque := hostDir && (inherited || isOpaqueFd(ufd))
	// The project's side is looked up relative to its root, which costs
	// less than opening each of its directories.
	hfd, herr := w.hostRoot, error(nil)
	if !hostDir || hfd < 0 {
		herr = unix.ENOENT
	}
	names, err := readNames(ufd)
	if err != nil {
		return err
	}
	for _, name := range names {
		p := path.Join(rel, name)
		if name == ".git" {
			// Repository internals never reach the project as files; commits
			// made in the session are offered separately (see Commits).
			continue
		}
		up := filepath.Join(udir, name)
		ufi, err := statAt(ufd, name)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed while we looked
			}
			// One unreadable entry (a path too long for the kernel, say)
			// must not hide the others: list it, unacceptable, with why.
			*out = append(*out, unreviewable(p, err))
			continue
		}
		hp := filepath.Join(l.Project, filepath.FromSlash(p))
		var hfi fs.FileInfo
		if herr == nil {
			if hfi, err = statAt(hfd, p); err != nil {
				if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
					*out = append(*out, unreviewable(p, err))
					continue
				}
				hfi = nil
			}
		}
		if isWhiteout(ufi) {
			if hfi != nil {
				*out = append(*out, deletion(p, hfi, hp))
			}
			continue
		}
		utype := typeOf(ufi.Mode())
		c := Change{Path: p, Type: utype, Mode: ufi.Mode(), Size: ufi.Size(), hostInfo: hfi, upperKey: keyOf(ufi)}
		if utype == Dir {
			c.Size = 0
		}
		if hfi != nil {
			c.OldType, c.OldMode, c.OldSize = typeOf(hfi.Mode()), hfi.Mode(), hfi.Size()
			if c.OldType == Dir {
				c.OldSize = 0
			}
		}
		switch {
		case utype == Dir:
			childHost := hfi != nil && hfi.IsDir()
			if hfi == nil {
				n, err := os.ReadDir(up)
				if err != nil {
					return err
				}
				if len(n) == 0 { // a non-empty new dir is implied by its entries
					c.Kind = Added
					*out = append(*out, c)
				}
			} else if !hfi.IsDir() {
				c.Kind = Replaced
				*out = append(*out, c)
			} else if hfi.Mode() != ufi.Mode() {
				c.Kind = Mode
				*out = append(*out, c)
			}
			select {
			case w.sem <- struct{}{}:
				w.wg.Add(1)
				go func(p string, opaque, childHost bool) {
					defer w.wg.Done()
					var local []Change
					if err := w.walk(l, p, opaque, childHost, &local); err != nil {
						local = append(local, unreviewable(p+"/", err))
					}
					<-w.sem
					w.mu.Lock()
					w.more = append(w.more, local...)
					w.mu.Unlock()
				}(p, opaque, childHost)
			default:
				if err := w.walk(l, p, opaque, childHost, out); err != nil {
					*out = append(*out, unreviewable(p+"/", err))
				}
			}
		case hfi == nil:
			c.Kind = Added
			if utype == File {
				if e, ok := l.Cache.lookup(p, c.upperKey, statKey{}); ok && e.diff != nil {
					cc := e.diff.Change
					cc.cached = e.diff
					*out = append(*out, cc)
					continue
				}
			}
			if b, ok := readSmallAt(ufd, name, ufi); ok {
				c.data = &contents{new: b, hasNew: true}
			}
			if err := describe(&c, up, "", ufi, nil); err != nil {
				return err
			}
			*out = append(*out, c)
		case typeOf(hfi.Mode()) != utype:
			c.Kind = Replaced
			if err := describe(&c, up, hp, ufi, hfi); err != nil {
				return err
			}
			*out = append(*out, c)
		default:
			uk, hk := keyOf(ufi), keyOf(hfi)
			if e, ok := l.Cache.lookup(p, uk, hk); ok {
				if e.same {
					continue
				}
				if e.diff != nil {
					cc := e.diff.Change
					cc.hostInfo, cc.cached = hfi, e.diff
					*out = append(*out, cc)
					continue
				}
			}
			var same bool
			nb, okN := readSmallAt(ufd, name, ufi)
			ob, okO := readSmallAt(hfd, p, hfi)
			if okN && okO {
				same = bytes.Equal(nb, ob)
				c.data = &contents{old: ob, new: nb, hasOld: true, hasNew: true}
			} else if same, err = sameContent(up, hp, ufi, hfi); err != nil {
				return err
			}
			switch {
			case !same:
				c.Kind = Modified
			case acceptable(ufi.Mode()) != acceptable(hfi.Mode()):
				c.Kind = Mode
			default:
				l.Cache.store(p, cacheEntry{upper: uk, host: hk, same: true})
				continue
			}
			if err := describe(&c, up, hp, ufi, hfi); err != nil {
				return err
			}
			*out = append(*out, c)
		}
	}
	if opaque {
		return hostOnly(l, rel, udir, out)
	}
	return nil
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

// statAt lstats name in the directory dirfd.
func statAt(dirfd int, name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return &statInfo{name: name, st: syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Rdev: st.Rdev,
		Size: st.Size, Blksize: st.Blksize, Blocks: st.Blocks,
		Atim: syscall.Timespec(st.Atim), Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim),
	}}, nil
}

func unreviewable(p string, err error) Change {
	return Change{Path: p, Kind: Added, Type: Special, Note: fmt.Sprintf("cannot be reviewed (%v): never accepted", err)}
}

// acceptable is the part of a mode an accept can carry: setuid and setgid
// never reach the project, so a difference in them alone is no change.
func acceptable(m fs.FileMode) fs.FileMode { return m &^ (fs.ModeSetuid | fs.ModeSetgid) }

func deletion(p string, hfi fs.FileInfo, hp string) Change {
	c := Change{Path: p, Kind: Deleted, OldType: typeOf(hfi.Mode()), OldMode: hfi.Mode(), OldSize: hfi.Size()}
	if c.OldType == Dir {
		c.OldSize = 0
	}
	if c.OldType == Symlink {
		c.OldLink, _ = os.Readlink(hp)
	}
	if c.OldType == File {
		c.Binary, c.ContentType = sniff(hp)
	}
	return c
}

// hostOnly lists, as deletions, the project's entries in directory p that an
// opaque upper directory up does not have.
func hostOnly(l Layers, p, up string, out *[]Change) error {
	hdir := filepath.Join(l.Project, filepath.FromSlash(p))
	entries, err := os.ReadDir(hdir)
	if err != nil {
		return nil // the project's side is gone: nothing to delete
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(up, e.Name())); err == nil {
			continue
		}
		hp := filepath.Join(hdir, e.Name())
		hfi, err := os.Lstat(hp)
		if err != nil {
			continue
		}
		*out = append(*out, deletion(path.Join(p, e.Name()), hfi, hp))
	}
	return nil
}

// describe fills in link targets, binary detection and notes.
func describe(c *Change, up, hp string, ufi, hfi fs.FileInfo) error {
	switch c.Type {
	case Symlink:
		t, err := os.Readlink(up)
		if err != nil {
			return err
		}
		c.Link = t
	case File:
		if c.data != nil && c.data.hasNew {
			c.Binary, c.ContentType = sniffBytes(c.data.new)
		} else {
			c.Binary, c.ContentType = sniff(up)
		}
	case Special:
		c.Note = "device files, FIFOs and sockets are never accepted into the project"
	}
	if hfi != nil {
		switch typeOf(hfi.Mode()) {
		case Symlink:
			c.OldLink, _ = os.Readlink(hp)
		case File:
			var b bool
			if c.data != nil && c.data.hasOld {
				b, _ = sniffBytes(c.data.old)
			} else {
				b, _ = sniff(hp)
			}
			if b {
				c.Binary = true
			}
		}
	}
	return nil
}

// sniff reports whether the file at p looks binary (a NUL byte or invalid
// UTF-8 in its first 8 KiB) and its MIME type.
func sniff(p string) (binary bool, contentType string) {
	f, err := os.Open(p)
	if err != nil {
		return false, ""
	}
	defer f.Close()
	buf := make([]byte, 8192)
	n, _ := io.ReadFull(f, buf)
	return sniffBytes(buf[:n])
}

// sniffBytes is sniff on a file's first bytes (up to 8 KiB are looked at).
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

// sameContent compares two regular files or two symlinks.
func sameContent(a, b string, afi, bfi fs.FileInfo) (bool, error) {
	if afi.Mode()&fs.ModeSymlink != 0 {
		ta, err := os.Readlink(a)
		if err != nil {
			return false, err
		}
		tb, err := os.Readlink(b)
		return err == nil && ta == tb, nil
	}
	if !afi.Mode().IsRegular() {
		return false, nil
	}
	if afi.Size() != bfi.Size() {
		return false, nil
	}
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, nil
	}
	defer fb.Close()
	ba, bb := make([]byte, 64*1024), make([]byte, 64*1024)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF), nil
		}
	}
}

// Select returns the changes at or under any of paths (all when paths is
// empty) and an error naming any path that matches nothing.
func Select(all []Change, paths []string) ([]Change, error) {
	if len(paths) == 0 {
		return all, nil
	}
	var out []Change
	var unmatched []string
	for _, p := range paths {
		clean, err := CleanPath(p)
		if err != nil {
			return nil, err
		}
		found := false
		for _, c := range all {
			if clean == "." || c.Path == clean || strings.HasPrefix(c.Path, clean+"/") {
				found = true
			}
		}
		if !found {
			unmatched = append(unmatched, p)
		}
	}
	if len(unmatched) > 0 {
		return nil, &NoMatchError{Paths: unmatched}
	}
	for _, c := range all {
		for _, p := range paths {
			clean, _ := CleanPath(p)
			if clean == "." || c.Path == clean || strings.HasPrefix(c.Path, clean+"/") {
				out = append(out, c)
				break
			}
		}
	}
	return out, nil
}

// NoMatchError names paths that select no change.
type NoMatchError struct{ Paths []string }

func (e *NoMatchError) Error() string {
	return fmt.Sprintf("no change at %s: `airlock diff --stat` lists the changed paths", strings.Join(e.Paths, ", "))
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

func (e *PathError) Error() string { return fmt.Sprintf("%q: %s", e.Path, e.Reason) }
