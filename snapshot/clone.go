package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
)

// cloneWorkers is how many files a clone copies at once.
const cloneWorkers = 4

// CloneTree copies the tree in src into dst, a fresh directory (whose
// own owner, mode and times stay as they are, as ApplyLayer leaves its
// target's): what
// ApplyLayer made there, with its modes, owners, times, user.* and
// trusted.overlay.* extended attributes, hard links, symlinks, whiteouts
// (0/0 character devices) and fifos, and its files' holes. src is
// Airlock's own (a layer applied into the layer cache); every lookup on
// both sides is made from an open directory without following a symlink,
// and any other kind of entry is refused. File contents are copied in
// the kernel (copy_file_range, else sendfile), several files at once.
func CloneTree(src, dst *confined.Root) error {
	c := &cloner{dst: dst.Fd(), links: map[[2]uint64]string{}, jobs: make(chan fileJob, cloneWorkers)}
	var wg sync.WaitGroup
	for range cloneWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range c.jobs {
				if err := j.copy(); err != nil {
					c.fail(fmt.Errorf("copy %s: %w", j.rel, err))
				}
			}
		}()
	}
	sfd, err := unix.Openat(src.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = c.dir(sfd, dst.Fd(), "")
		unix.Close(sfd)
	}
	close(c.jobs)
	wg.Wait()
	if err != nil {
		return err
	}
	return c.err
}

type cloner struct {
	dst   int // the destination root
	links map[[2]uint64]string
	jobs  chan fileJob
	mu    sync.Mutex
	err   error // the first copy that failed
}

func (c *cloner) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

func (c *cloner) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// dir copies the entries of the directory sfd into dfd; rel names it, for
// messages and hard links. The directories' own metadata is set after
// their entries, so that their times stay.
func (c *cloner) dir(sfd, dfd int, rel string) error {
	names, err := readNames(sfd)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	for _, name := range names {
		if err := c.failed(); err != nil {
			return err
		}
		if err := c.entry(sfd, dfd, name, path.Join(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

func (c *cloner) entry(sfd, dfd int, name, rel string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	const nofollow = unix.O_NOFOLLOW | unix.O_CLOEXEC
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		// A directory there already (the container's upper directory
		// may have some) is filled in; a symlink is refused below.
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("make %s: %w", rel, err)
		}
		s, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|nofollow, 0)
		if err != nil {
			return err
		}
		defer unix.Close(s)
		d, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|nofollow, 0)
		if err != nil {
			return err
		}
		defer unix.Close(d)
		if err := c.dir(s, d, rel); err != nil {
			return err
		}
		return copyMeta(s, d)
	case unix.S_IFREG:
		key := [2]uint64{st.Dev, st.Ino}
		if st.Nlink > 1 {
			if first, ok := c.links[key]; ok {
				return unix.Linkat(c.dst, first, dfd, name, 0)
			}
			c.links[key] = rel
		}
		s, err := unix.Openat(sfd, name, unix.O_RDONLY|nofollow, 0)
		if err != nil {
			return err
		}
		d, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|nofollow, 0o600)
		if err != nil {
			unix.Close(s)
			return fmt.Errorf("make %s: %w", rel, err)
		}
		if err := unix.Fchown(d, int(st.Uid), int(st.Gid)); err != nil {
			unix.Close(s)
			unix.Close(d)
			return err
		}
		c.jobs <- fileJob{src: s, dst: d, st: st, rel: rel}
		return nil
	case unix.S_IFLNK:
		target, err := readlinkat(sfd, name)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return fmt.Errorf("make %s: %w", rel, err)
		}
	case unix.S_IFCHR, unix.S_IFIFO:
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev != 0 {
			return fmt.Errorf("%w: %s is a device", ErrUnsafe, rel)
		}
		if err := unix.Mknodat(dfd, name, st.Mode&(unix.S_IFMT|0o777), 0); err != nil {
			return fmt.Errorf("make %s: %w", rel, err)
		}
	default:
		return fmt.Errorf("%w: %s is a %s", ErrUnsafe, rel, confined.FileMode(st.Mode).Type())
	}
	if err := unix.Fchownat(dfd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return unix.UtimesNanoAt(dfd, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

// copyMeta gives the directory d the owner, mode, extended attributes
// and times of s.
func copyMeta(s, d int) error {
	var st unix.Stat_t
	if err := unix.Fstat(s, &st); err != nil {
		return err
	}
	if err := unix.Fchown(d, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := copyXattrs(s, d); err != nil {
		return err
	}
	if err := unix.Fchmod(d, st.Mode&0o7777); err != nil {
		return err
	}
	return unix.UtimesNanoAt(d, "", []unix.Timespec{st.Atim, st.Mtim}, unix.AT_EMPTY_PATH)
}

func copyXattrs(s, d int) error {
	xs, err := confined.Xattrs(s, func(name string) bool {
		return strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "trusted.overlay.")
	}, 0)
	if err != nil {
		return err
	}
	for k, v := range xs {
		if err := unix.Fsetxattr(d, k, []byte(v), 0); err != nil {
			return fmt.Errorf("set xattr %s: %w", k, err)
		}
	}
	return nil
}

// fileJob is a regular file made empty in the destination, with its
// owner, whose data, extended attributes, mode and times are left to
// copy.
type fileJob struct {
	src, dst int
	st       unix.Stat_t
	rel      string
}

func (j fileJob) copy() error {
	defer unix.Close(j.src)
	defer unix.Close(j.dst)
	if err := copyData(j.src, j.dst, j.st.Size); err != nil {
		return err
	}
	if err := copyXattrs(j.src, j.dst); err != nil {
		return err
	}
	if err := unix.Fchmod(j.dst, j.st.Mode&0o7777); err != nil {
		return err
	}
	return unix.UtimesNanoAt(j.dst, "", []unix.Timespec{j.st.Atim, j.st.Mtim}, unix.AT_EMPTY_PATH)
}

// copyData copies the data regions of s into d in the kernel, leaving
// the holes holes.
func copyData(s, d int, size int64) error {
	inKernel := true
	for off := int64(0); off < size; {
		start, err := unix.Seek(s, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return err
		}
		end, err := unix.Seek(s, start, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		end = min(end, size)
		for pos := start; pos < end; {
			var n int
			if inKernel {
				roff, woff := pos, pos
				n, err = unix.CopyFileRange(s, &roff, d, &woff, int(min(end-pos, 1<<30)), 0)
				if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
					inKernel = false
					continue
				}
			} else {
				if _, err = unix.Seek(d, pos, unix.SEEK_SET); err != nil {
					return err
				}
				roff := pos
				n, err = unix.Sendfile(d, s, &roff, int(min(end-pos, 1<<30)))
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("the file shrank while copied")
			}
			pos += int64(n)
		}
		off = end
	}
	return unix.Ftruncate(d, size)
}

func readNames(fd int) ([]string, error) {
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

func readlinkat(fd int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}
