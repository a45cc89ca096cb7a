package review

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-billy/v5"

	"github.com/airlock/airlock/confined"
)

// Size limits of the files of a session's git directory, checked before a
// file is read (and again while it is read, should it grow). A legitimate
// repository stays far below them; a hostile one cannot make the engine
// read more.
const (
	// HEAD, a loose ref, commondir, a .git file: a line each.
	gitSmallFile = 1 << 20
	// packed-refs: about 300,000 refs; it is scanned a line at a time.
	gitPackedRefsFile = 32 << 20
	// A loose object: the largest object (gitMaxBlob) stored without
	// compression, plus zlib's framing.
	gitLooseFile = gitMaxBlob + gitMaxBlob/64 + 4096
	// Packs and their indexes are read at offsets only, never whole;
	// what is inflated from them is bounded per object and per read.
	gitPackFile = 16 << 30
	gitIdxFile  = 1 << 30
	// Entries listed in one directory (objects/pack is the only one).
	gitDirEntries = 4096
)

// gitFS is a session's git directory as go-git and the object reader see
// it: a read-only billy.Filesystem whose every lookup is confined beneath
// the directory (confined.Root: no symlink in any component, nothing
// outside, no FIFO, socket or device opened for reading) and whose every
// file has a size limit by what it is in a git directory.
//
// go-git treats some failures as "not there" (a loose ref it cannot open
// sends it to packed-refs); gitFS remembers the first refusal so that the
// caller can say why a reference was not found. Not safe for concurrent
// use.
type gitFS struct {
	root    *confined.Root
	dir     string // the root's path in the workspace, for messages
	refused *error // the first refusal, shared with the caller
}

var _ billy.Filesystem = (*gitFS)(nil)

func newGitFS(root *confined.Root, dir string, refused *error) *gitFS {
	return &gitFS{root: root, dir: dir, refused: refused}
}

// fail turns a confined error into an *os.PathError (go-git tests
// os.IsNotExist on them) naming the file in the workspace, and remembers
// a refusal.
func (g *gitFS) fail(op, name string, err error) error {
	var ce *confined.Error
	if errors.As(err, &ce) {
		err = ce.Err
	}
	err = &os.PathError{Op: op, Path: path.Join(g.dir, name), Err: err}
	if *g.refused == nil && isRefusal(err) {
		*g.refused = err
	}
	return err
}

// isRefusal reports whether err is the confined resolver refusing
// something hostile, as opposed to a file that is simply missing.
func isRefusal(err error) bool {
	return errors.Is(err, confined.ErrSymlink) || errors.Is(err, confined.ErrEscape) ||
		errors.Is(err, confined.ErrNotRegular) || errors.Is(err, confined.ErrTooLarge)
}

func gitFileLimit(name string) int64 {
	switch {
	case name == "packed-refs":
		return gitPackedRefsFile
	case strings.HasPrefix(name, "objects/pack/") && strings.HasSuffix(name, ".pack"):
		return gitPackFile
	case strings.HasPrefix(name, "objects/pack/") && strings.HasSuffix(name, ".idx"):
		return gitIdxFile
	case strings.HasPrefix(name, "objects/") && len(name) == len("objects/")+41 && name[len("objects/")+2] == '/':
		return gitLooseFile
	}
	return gitSmallFile
}

func (g *gitFS) clean(op, name string) (string, error) {
	c, err := confined.Clean(strings.TrimPrefix(name, "./"))
	if err != nil {
		return "", g.fail(op, name, err)
	}
	return c, nil
}

// Open opens a regular file for reading, refusing it when it is larger
// than its limit.
func (g *gitFS) Open(name string) (billy.File, error) {
	c, err := g.clean("open", name)
	if err != nil {
		return nil, err
	}
	f, err := g.root.Open(c)
	if err != nil {
		return nil, g.fail("open", c, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, g.fail("open", c, err)
	}
	limit := gitFileLimit(c)
	if fi.Size() > limit {
		f.Close()
		return nil, g.fail("open", c, gitTooLarge(fi.Size(), limit))
	}
	return &gitFile{f: f, name: c, limit: limit, g: g}, nil
}

func gitTooLarge(size, limit int64) error {
	return &sizeError{size, limit}
}

type sizeError struct{ size, limit int64 }

func (e *sizeError) Error() string {
	return "the file is larger than the limit (" + byteSize(e.size) + ", limit " + byteSize(e.limit) + ")"
}

func (e *sizeError) Unwrap() error { return confined.ErrTooLarge }

// OpenFile opens for reading only.
func (g *gitFS) OpenFile(name string, flag int, _ os.FileMode) (billy.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, &os.PathError{Op: "open", Path: path.Join(g.dir, name), Err: billy.ErrReadOnly}
	}
	return g.Open(name)
}

// Stat is Lstat, refusing a symlink: nothing in a session's git directory
// is followed.
func (g *gitFS) Stat(name string) (os.FileInfo, error) {
	fi, err := g.Lstat(name)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, g.fail("stat", name, confined.ErrSymlink)
	}
	return fi, err
}

func (g *gitFS) Lstat(name string) (os.FileInfo, error) {
	c, err := g.clean("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := g.root.Lstat(c)
	if err != nil {
		return nil, g.fail("stat", c, err)
	}
	return fi, nil
}

// ReadDir lists at most gitDirEntries entries.
func (g *gitFS) ReadDir(name string) ([]os.FileInfo, error) {
	c, err := g.clean("readdir", name)
	if err != nil {
		return nil, err
	}
	names, err := g.root.ReadDirNames(c, gitDirEntries)
	if err != nil {
		return nil, g.fail("readdir", c, err)
	}
	out := make([]os.FileInfo, 0, len(names))
	for _, n := range names {
		fi, err := g.root.Lstat(path.Join(c, n))
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, fi)
	}
	return out, nil
}

func (g *gitFS) Join(elem ...string) string { return path.Join(elem...) }
func (g *gitFS) Root() string               { return g.dir }

func (g *gitFS) Readlink(name string) (string, error) {
	return "", g.fail("readlink", name, confined.ErrSymlink)
}

func (g *gitFS) readOnly(op, name string) error {
	return &os.PathError{Op: op, Path: path.Join(g.dir, name), Err: billy.ErrReadOnly}
}

func (g *gitFS) Create(name string) (billy.File, error)       { return nil, g.readOnly("create", name) }
func (g *gitFS) Rename(from, _ string) error                  { return g.readOnly("rename", from) }
func (g *gitFS) Remove(name string) error                     { return g.readOnly("remove", name) }
func (g *gitFS) MkdirAll(name string, _ os.FileMode) error    { return g.readOnly("mkdir", name) }
func (g *gitFS) Symlink(_, link string) error                 { return g.readOnly("symlink", link) }
func (g *gitFS) TempFile(dir, _ string) (billy.File, error)   { return nil, g.readOnly("create", dir) }
func (g *gitFS) Chroot(name string) (billy.Filesystem, error) { return nil, billy.ErrNotSupported }
func (g *gitFS) Capabilities() billy.Capability {
	return billy.ReadCapability | billy.SeekCapability
}

// gitFile is a confined, read-only file that is never read past its
// limit, even when it grows after it was opened.
type gitFile struct {
	f     *os.File
	name  string
	limit int64
	off   int64
	g     *gitFS
}

func (f *gitFile) Name() string { return f.name }

func (f *gitFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: os.ErrInvalid}
	}
	want := len(p)
	if off >= f.limit {
		p = p[:0]
	} else if int64(len(p)) > f.limit-off {
		p = p[:f.limit-off]
	}
	n, err := f.f.ReadAt(p, off)
	if n == len(p) && n < want {
		// Cut at the limit: is there more?
		var one [1]byte
		if m, _ := f.f.ReadAt(one[:], f.limit); m > 0 {
			return n, f.g.fail("read", f.name, &sizeError{f.limit + 1, f.limit})
		}
		return n, io.EOF
	}
	return n, err
}

func (f *gitFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *gitFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		fi, err := f.f.Stat()
		if err != nil {
			return 0, err
		}
		offset += min(fi.Size(), f.limit)
	}
	if offset < 0 {
		return 0, &os.PathError{Op: "seek", Path: f.name, Err: os.ErrInvalid}
	}
	f.off = offset
	return offset, nil
}

func (f *gitFile) Stat() (os.FileInfo, error) { return f.f.Stat() }
func (f *gitFile) Close() error               { return f.f.Close() }
func (f *gitFile) Lock() error                { return nil }
func (f *gitFile) Unlock() error              { return nil }
func (f *gitFile) Write([]byte) (int, error)  { return 0, billy.ErrReadOnly }
func (f *gitFile) Truncate(int64) error       { return billy.ErrReadOnly }
