package confined

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock/airlock/names"
	"golang.org/x/sys/unix"
)

// The reasons a confined open is refused. Errors returned by this package
// wrap one of these (test with errors.Is) inside an *Error naming the path.
var (
	// ErrSymlink: a component of the path is a symlink.
	ErrSymlink = errors.New("the path goes through a symlink")
	// ErrEscape: the path leaves the root (absolute, "..", or a mount
	// trick the kernel detected).
	ErrEscape = errors.New("the path leaves its root")
	// ErrNotRegular: the file is a FIFO, a socket, a device or a
	// directory where a regular file was expected.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotDir: a directory was expected.
	ErrNotDir = errors.New("not a directory")
	// ErrTooLarge: the file is larger than the caller's limit.
	ErrTooLarge = errors.New("the file is larger than the limit")
)

// Error is a refused or failed confined operation.
type Error struct {
	Op   string // "open", "stat", "readlink", "readdir"
	Path string // relative to the root
	Err  error
}

func (e *Error) Error() string {
	p := e.Path
	if p == "" {
		p = "."
	}
	return fmt.Sprintf("%s %s: %v", e.Op, names.Quote(p), e.Err) // p is the adversary's name
}

func (e *Error) Unwrap() error { return e.Err }

// Root is an open directory beneath which lookups are confined. A Root is
// safe for concurrent use; Close it when done.
type Root struct {
	fd   int
	name string
	// noOpenat2 is set once openat2 is found missing (ENOSYS, or refused
	// by a seccomp profile); from then on the component walk is used.
	noOpenat2 *atomic.Bool
}

// OpenRoot opens dir as a root. dir itself is the caller's (trusted) path
// and is resolved normally; only what lies beneath it is confined.
func OpenRoot(dir string) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Root{fd: fd, name: dir, noOpenat2: new(atomic.Bool)}, nil
}

// Close releases the root's descriptor.
func (r *Root) Close() error {
	if r == nil || r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Name is the path the root was opened at (or root/rel for a subroot), for
// messages.
func (r *Root) Name() string { return r.name }

// Fd is the root's directory descriptor, for *at calls the package does not
// wrap. It stays owned by the Root.
func (r *Root) Fd() int { return r.fd }

// Clean validates rel (slash-separated, relative) and returns it cleaned;
// "" and "." name the root itself.
func Clean(rel string) (string, error) {
	if strings.IndexByte(rel, 0) >= 0 {
		return "", ErrEscape
	}
	if strings.HasPrefix(rel, "/") {
		return "", ErrEscape
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return "", ErrEscape
		}
	}
	c := path.Clean(rel)
	if c == "." {
		return "", nil
	}
	return c, nil
}

const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openat opens rel beneath the root with flags (O_NOFOLLOW and O_CLOEXEC
// are always added).
func (r *Root) openat(rel string, flags int) (int, error) {
	fd, err := r.openat1(rel, flags)
	if err == unix.ENOTDIR && flags&unix.O_DIRECTORY != 0 && r.isLink(rel) {
		// O_NOFOLLOW|O_DIRECTORY on a final symlink says ENOTDIR.
		err = ErrSymlink
	}
	return fd, err
}

// isLink reports whether rel's last component is a symlink (its parent
// resolved confined).
func (r *Root) isLink(rel string) bool {
	dir, name := path.Split(rel)
	dfd := r.fd
	if dir != "" {
		var err error
		if dfd, err = r.openat1(strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY); err != nil {
			return false
		}
		defer unix.Close(dfd)
	}
	var st unix.Stat_t
	return unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func (r *Root) openat1(rel string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if rel == "" {
		rel = "."
	}
	if !r.noOpenat2.Load() {
		for {
			fd, err := unix.Openat2(r.fd, rel, &unix.OpenHow{Flags: uint64(flags), Resolve: resolve})
			if err == unix.EINTR || err == unix.EAGAIN {
				// EAGAIN: a rename raced the lookup (RESOLVE_BENEATH
				// retries are the caller's); try again.
				continue
			}
			if err == unix.ENOSYS || err == unix.EPERM && !isPermErr(r.fd, rel) {
				r.noOpenat2.Store(true)
				break
			}
			return fd, mapErr(err)
		}
	}
	return r.walk(rel, flags)
}

// isPermErr tells a real EPERM (file permissions) from a seccomp refusal
// of the syscall: a seccomp profile refuses openat2 for "." too.
func isPermErr(dirfd int, rel string) bool {
	if rel == "." {
		return false
	}
	fd, err := unix.Openat2(dirfd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// walk is openat2's confinement done by hand: one component at a time,
// never following a symlink.
func (r *Root) walk(rel string, flags int) (int, error) {
	if rel == "." {
		fd, err := unix.Openat(r.fd, ".", flags, 0)
		return fd, mapErr(err)
	}
	parts := strings.Split(rel, "/")
	dfd := r.fd
	for i, part := range parts {
		last := i == len(parts)-1
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			f = flags
		}
		fd, err := unix.Openat(dfd, part, f, 0)
		if err != nil && !last && err == unix.ENOTDIR {
			// A symlink opened with O_DIRECTORY|O_NOFOLLOW is ENOTDIR:
			// tell the two apart.
			var st unix.Stat_t
			if unix.Fstatat(dfd, part, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		if dfd != r.fd {
			unix.Close(dfd)
		}
		if err != nil {
			return -1, mapErr(err)
		}
		dfd = fd
	}
	return dfd, nil
}

func mapErr(err error) error {
	switch err {
	case nil:
		return nil
	case unix.ELOOP:
		return ErrSymlink
	case unix.EXDEV:
		return ErrEscape
	}
	return err
}

// Lstat stats rel without following a final symlink; no earlier component
// may be a symlink.
func (r *Root) Lstat(rel string) (fs.FileInfo, error) {
	c, err := Clean(rel)
	if err != nil {
		return nil, &Error{"stat", rel, err}
	}
	dir, name := path.Split(c)
	dfd := r.fd
	if dir != "" {
		if dfd, err = r.openat(strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY); err != nil {
			return nil, &Error{"stat", rel, err}
		}
		defer unix.Close(dfd)
	}
	if name == "" {
		name = "."
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &Error{"stat", rel, err}
	}
	return fileInfo(path.Base("/"+c), &st), nil
}

// Readlink reads the symlink rel's target (never resolved).
func (r *Root) Readlink(rel string) (string, error) {
	c, err := Clean(rel)
	if err != nil || c == "" {
		if err == nil {
			err = unix.EINVAL
		}
		return "", &Error{"readlink", rel, err}
	}
	dir, name := path.Split(c)
	dfd := r.fd
	if dir != "" {
		if dfd, err = r.openat(strings.TrimSuffix(dir, "/"), unix.O_PATH|unix.O_DIRECTORY); err != nil {
			return "", &Error{"readlink", rel, err}
		}
		defer unix.Close(dfd)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", &Error{"readlink", rel, err}
	}
	return string(buf[:n]), nil
}

// Open opens the regular file rel for reading. A FIFO, socket, device,
// directory or symlink is refused (ErrNotRegular, ErrSymlink) and never
// read: the open is non-blocking, so a FIFO returns at once and is closed
// unread, a socket cannot be opened at all, and the type is checked on the
// open descriptor (fstat), so the file cannot be swapped after the check.
// (A device node's driver would see the open, never a read; sessions cannot
// make device nodes: containers run without CAP_MKNOD, an overlay whiteout
// has no driver, and layer application refuses them.)
func (r *Root) Open(rel string) (*os.File, error) {
	fd, _, err := r.OpenFd(rel)
	if err != nil {
		return nil, err
	}
	// Blocking again, so that os.File does not try the poller.
	unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), path.Join(r.name, rel)), nil
}

// OpenFd is Open returning the raw descriptor (the caller closes it) and
// the file's stat, for loops over many files where an *os.File's setup
// costs more than the open.
func (r *Root) OpenFd(rel string) (int, *unix.Stat_t, error) {
	return r.openRegular(rel, unix.O_RDONLY)
}

// openRegular opens rel non-blocking with mode (O_RDONLY or O_WRONLY) and
// keeps it only if fstat on the descriptor says it is a regular file.
func (r *Root) openRegular(rel string, mode int) (int, *unix.Stat_t, error) {
	c, err := Clean(rel)
	if err != nil {
		return -1, nil, &Error{"open", rel, err}
	}
	fd, err := r.openat(c, mode|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		if err == unix.ENXIO || err == unix.ENODEV || err == unix.EISDIR {
			// A socket, a device without a driver (an overlay whiteout),
			// or a directory opened for writing.
			err = fmt.Errorf("%w (%v)", ErrNotRegular, err)
		}
		return -1, nil, &Error{"open", rel, err}
	}
	st := new(unix.Stat_t)
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return -1, nil, &Error{"open", rel, err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, nil, &Error{"open", rel, fmt.Errorf("%w (%s)", ErrNotRegular, typeName(st.Mode))}
	}
	return fd, st, nil
}

// OpenDir opens the directory rel as a Root of its own.
func (r *Root) OpenDir(rel string) (*Root, error) {
	c, err := Clean(rel)
	if err != nil {
		return nil, &Error{"open", rel, err}
	}
	fd, err := r.openat(c, unix.O_RDONLY|unix.O_DIRECTORY)
	if err == unix.ENOTDIR {
		err = ErrNotDir
	}
	if err != nil {
		return nil, &Error{"open", rel, err}
	}
	return &Root{fd: fd, name: path.Join(r.name, c), noOpenat2: r.noOpenat2}, nil
}

// ReadDirNames lists the names in the directory rel (unsorted, without "."
// and ".."), at most max of them (max <= 0: no limit); more than max is an
// error wrapping ErrTooLarge.
func (r *Root) ReadDirNames(rel string, max int) ([]string, error) {
	d, err := r.OpenDir(rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var names []string
	buf := make([]byte, 32*1024)
	for {
		n, err := unix.ReadDirent(d.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &Error{"readdir", rel, err}
		}
		// Only an empty read ends the listing: tmpfs can answer short
		// before the end.
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		if max > 0 && len(names) > max {
			return nil, &Error{"readdir", rel, fmt.Errorf("%w: more than %d entries", ErrTooLarge, max)}
		}
	}
}

// ReadFile reads the regular file rel whole, refusing one larger than limit
// bytes (limit <= 0: no limit). A file that grows while it is read is
// refused too, never read past the limit.
func (r *Root) ReadFile(rel string, limit int64) ([]byte, error) {
	f, err := r.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, rel, limit)
}

// ReadAll reads f whole, refusing more than limit bytes (limit <= 0: no
// limit); rel names the file in the error.
func ReadAll(f *os.File, rel string, limit int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, &Error{"read", rel, err}
	}
	if limit > 0 && fi.Size() > limit {
		return nil, &Error{"read", rel, fmt.Errorf("%w (%d bytes, limit %d)", ErrTooLarge, fi.Size(), limit)}
	}
	rd := io.Reader(f)
	if limit > 0 {
		rd = io.LimitReader(f, limit+1)
	}
	b := make([]byte, 0, fi.Size()+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &Error{"read", rel, err}
		}
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, &Error{"read", rel, fmt.Errorf("%w (it grew past %d bytes while read)", ErrTooLarge, limit)}
	}
	return b, nil
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symlink"
	}
	return "not a regular file"
}

// fileInfo is an fs.FileInfo from a stat.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func fileInfo(name string, st *unix.Stat_t) *statInfo {
	return &statInfo{name: name, st: syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Rdev: st.Rdev,
		Size: st.Size, Blksize: st.Blksize, Blocks: st.Blocks,
		Atim: syscall.Timespec(st.Atim), Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim),
	}}
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.st.Mode&unix.S_IFMT == unix.S_IFDIR }
func (s *statInfo) Sys() any           { return &s.st }
func (s *statInfo) Mode() fs.FileMode  { return FileMode(s.st.Mode) }

// FileMode converts a stat mode to an fs.FileMode as os.Lstat does.
func FileMode(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
