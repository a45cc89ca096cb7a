package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"sync"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/errdefs"
	"golang.org/x/sys/unix"
)

// Restore rebuilds checkpoint id in target, which must be an empty
// directory (a new upper directory, before the overlay is mounted over
// it): files with their content, modes (set-id bits included), owners,
// times and user.* extended attributes, sparse files as sparse, hard
// links, symlinks, FIFOs, whiteouts as 0/0 character devices and opaque
// directories with trusted.overlay.opaque=y (these two need root, as the
// overlay itself does). The target's own metadata become the recorded
// root's.
//
// Everything is created beneath directories Restore made itself and holds
// open, with O_NOFOLLOW and O_EXCL, so nothing put into the target
// meanwhile is followed. Every object is checked against its digest as it
// is copied: a damaged store fails the restore (ErrCorrupt), and the
// caller discards the target.
//
// Restore keeps the stat keys of the files it made, so that the next
// Record of target reads only what changed after the restore (see
// restored.go); it returns once they can be trusted (at most two clock
// ticks after the last file was made).
func (s *Store) Restore(ctx context.Context, id ID, target *confined.Root) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	c, err := s.readRecord(id)
	if err != nil {
		return err
	}
	names, err := target.ReadDirNames("", 1)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return errdefs.Conflictf("restore into %s: the directory is not empty: restore into a new, empty directory", target.Name())
	}
	if err := s.dropRestored(); err != nil {
		return err
	}
	rs := newRestorer(ctx, s, target)
	err = rs.dir(target.Fd(), "", c.Root.Digest)
	if werr := rs.wait(); werr != nil {
		err = werr // the cause, where the walk saw only the cancel
	}
	if err != nil {
		return fmt.Errorf("restore checkpoint %s: %w", id, err)
	}
	if err := rs.meta(target.Fd(), &c.Root); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(target.Fd(), &st); err != nil {
		return err
	}
	if err := s.saveRestored(id, &st, rs.keys, rs.newest); err != nil {
		// The restore itself is whole: without the keys the next
		// Record reads every file once.
		s.dropRestored()
	}
	return nil
}

// RestoreDir is Restore into the directory dir (a path the caller
// trusts).
func (s *Store) RestoreDir(ctx context.Context, id ID, dir string) error {
	root, err := confined.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return s.Restore(ctx, id, root)
}

// A restore is bound by hashing (SHA-256, with the CPU's SHA extensions
// where it has them: about 1.5 GB/s a core here, 0.4 GB/s under this
// machine's usual load) and copying each object, not by the walk: the
// walk makes every name itself, in order, and hands each file's content
// to restoreWorkers goroutines that copy, check and finish it. Copying
// through the kernel instead (sendfile into the tmpfs, then hashing the
// new file through a mapping) was measured no faster than a read and a
// write through a buffer the hash reads from the CPU's cache; copy_file_range
// refuses to cross file systems (the store is on disk, the target a tmpfs).
const (
	restoreWorkers = 4
	restoreBuf     = 256 << 10 // read, hashed and written while in the cache
)

type restorer struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
	target *confined.Root
	// jobs are files made and open, whose content the workers write.
	jobs chan restoreJob
	wg   sync.WaitGroup

	mu sync.Mutex
	// keys are the new stat keys of the regular files made; newest is
	// the latest ctime among them; linked are first names given another
	// name (their ctime moved: read them again).
	keys   []restoredKey
	linked map[string]bool
	newest int64
	err    error // a worker's first
}

type restoreJob struct {
	fd  int
	rel string
	e   *Entry
}

func newRestorer(ctx context.Context, s *Store, target *confined.Root) *restorer {
	ctx, cancel := context.WithCancel(ctx)
	rs := &restorer{s: s, ctx: ctx, cancel: cancel, target: target,
		jobs: make(chan restoreJob, 64), linked: map[string]bool{}}
	for range restoreWorkers {
		rs.wg.Go(func() {
			buf := make([]byte, restoreBuf)
			for j := range rs.jobs {
				if rs.ctx.Err() == nil {
					if err := rs.finish(j, buf); err != nil {
						rs.fail(fmt.Errorf("%s: %w", j.rel, err))
					}
				}
				unix.Close(j.fd)
			}
		})
	}
	return rs
}

// fail keeps a worker's first error and stops the restore.
func (rs *restorer) fail(err error) {
	rs.mu.Lock()
	if rs.err == nil {
		rs.err = err
	}
	rs.mu.Unlock()
	rs.cancel()
}

// wait waits for the workers and returns their first error; the stat
// keys of files given another name are dropped.
func (rs *restorer) wait() error {
	close(rs.jobs)
	rs.wg.Wait()
	rs.cancel()
	if len(rs.linked) > 0 {
		drop := map[uint64]bool{}
		for p := range rs.linked {
			drop[pathHash(p)] = true
		}
		rs.keys = slices.DeleteFunc(rs.keys, func(k restoredKey) bool { return drop[k.Path] })
	}
	return rs.err
}

// finish writes a made file's content, checking its digest, then its
// metadata, and keeps its stat key.
func (rs *restorer) finish(j restoreJob, buf []byte) error {
	if err := rs.content(j.fd, j.e, buf); err != nil {
		return err
	}
	if err := rs.meta(j.fd, j.e); err != nil {
		return err
	}
	return rs.made(j.fd, j.rel)
}

// dir fills the directory dfd (the path rel) from the tree digest.
func (rs *restorer) dir(dfd int, rel, digest string) error {
	if err := rs.ctx.Err(); err != nil {
		return err // a worker's error, or the caller's
	}
	d, err := rs.s.openDir(digest)
	if err != nil {
		return err
	}
	for {
		e, err := d.entry()
		if e == nil || err != nil {
			return err
		}
		if err := checkName(e.Name); err != nil {
			return err
		}
		if err := rs.entry(dfd, path.Join(rel, e.Name), e); err != nil {
			return fmt.Errorf("%s: %w", path.Join(rel, e.Name), err)
		}
	}
}

// checkName refuses a name that is not one path element: trees are the
// store's own, but a damaged one must not write elsewhere.
func checkName(n string) error {
	if n == "" || n == "." || n == ".." || len(n) > 255 || path.Base(n) != n || n[0] == '/' {
		return fmt.Errorf("%w: an entry is named %q", ErrCorrupt, n)
	}
	for i := 0; i < len(n); i++ {
		if n[i] == 0 || n[i] == '/' {
			return fmt.Errorf("%w: an entry is named %q", ErrCorrupt, n)
		}
	}
	return nil
}

func (rs *restorer) entry(dfd int, rel string, e *Entry) error {
	n := e.Name
	switch e.Type {
	case Dir:
		if err := unix.Mkdirat(dfd, n, 0o700); err != nil {
			return err
		}
		fd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := rs.dir(fd, rel, e.Digest); err != nil {
			return err
		}
		return rs.meta(fd, e)
	case File:
		if e.HardLink != "" {
			return rs.link(dfd, e)
		}
		fd, err := unix.Openat(dfd, n, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		// Its content, checked, and its metadata are the workers'.
		select {
		case rs.jobs <- restoreJob{fd: fd, rel: rel, e: e}:
			return nil
		case <-rs.ctx.Done():
			unix.Close(fd)
			return rs.ctx.Err()
		}
	case Symlink:
		if err := unix.Symlinkat(e.Target, dfd, n); err != nil {
			return err
		}
	case FIFO:
		if err := unix.Mkfifoat(dfd, n, 0o600); err != nil {
			return err
		}
	case Whiteout:
		if err := unix.Mknodat(dfd, n, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("make the whiteout (needs root): %w", err)
		}
	default:
		return fmt.Errorf("%w: unknown entry type %q", ErrCorrupt, e.Type)
	}
	// Not opened: set beneath dfd without following the new name.
	if err := unix.Fchownat(dfd, n, e.UID, e.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if e.Type == FIFO {
		// dfd is a directory Restore made: nothing swapped the FIFO.
		if err := unix.Fchmodat(dfd, n, e.Mode, 0); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.Mtime), unix.NsecToTimespec(e.Mtime)}
	return unix.UtimesNanoAt(dfd, n, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// made keeps the stat key of the file just restored at rel.
func (rs *restorer) made(fd int, rel string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	k := restoredKey{Dev: st.Dev, Ino: st.Ino, Ctime: st.Ctim.Nano(), Path: pathHash(rel)}
	rs.mu.Lock()
	rs.keys = append(rs.keys, k)
	rs.newest = max(rs.newest, st.Ctim.Nano(), st.Mtim.Nano())
	rs.mu.Unlock()
	return nil
}

// link makes e another name of the file restored at e.HardLink, found
// beneath the target without following a symlink.
func (rs *restorer) link(dfd int, e *Entry) error {
	fd, _, err := rs.target.OpenFd(e.HardLink)
	if err != nil {
		return fmt.Errorf("%w: hard link to %s: %v", ErrCorrupt, e.HardLink, err)
	}
	defer unix.Close(fd)
	// A new link changes the file's ctime: its first name is read again.
	rs.mu.Lock()
	rs.linked[e.HardLink] = true
	rs.mu.Unlock()
	return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), dfd, e.Name, unix.AT_SYMLINK_FOLLOW)
}

// content copies a file's object into fd, checking its digest.
func (rs *restorer) content(fd int, e *Entry, buf []byte) error {
	if e.Digest == "" {
		return fmt.Errorf("%w: a file without content", ErrCorrupt)
	}
	p, err := rs.s.objectPath(e.Digest)
	if err != nil {
		return err
	}
	obj, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: object %s is missing", ErrCorrupt, e.Digest)
	}
	if err != nil {
		return err
	}
	defer obj.Close()
	h := contentHash(e.Size, e.Regions, e.Sparse)
	_, err = copyRegions(int(obj.Fd()), dataOf(e.Size, e.Regions, e.Sparse), buf, func(b []byte, off int64) error {
		h.Write(b)
		_, err := unix.Pwrite(fd, b, off)
		return err
	})
	if errors.Is(err, errChanged) || err == nil && digestOf(h) != e.Digest {
		return fmt.Errorf("%w: object %s does not match its digest", ErrCorrupt, e.Digest)
	}
	if err != nil {
		return err
	}
	return unix.Ftruncate(fd, e.Size)
}

// meta gives the open file or directory fd the entry's owner, mode,
// extended attributes and times (in this order: a chown clears set-id
// bits, and every change moves the times).
func (rs *restorer) meta(fd int, e *Entry) error {
	if err := unix.Fchown(fd, e.UID, e.GID); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, e.Mode); err != nil {
		return err
	}
	for k, v := range e.Xattrs {
		if !keepXattr(k) {
			return fmt.Errorf("%w: extended attribute %q", ErrCorrupt, k)
		}
		if err := unix.Fsetxattr(fd, k, v, 0); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	if e.Opaque {
		if err := unix.Fsetxattr(fd, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark the directory opaque (needs root): %w", err)
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.Mtime), unix.NsecToTimespec(e.Mtime)}
	return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
}
