package review

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/airlock/airlock/names"
)

// tree opens directories beneath a root by walking one component at a time
// with O_NOFOLLOW, so no operation ever passes through a symlink or leaves
// the root, whatever the tree contains. Directory descriptors are cached.
type tree struct {
	root string
	fds  map[string]int // cleaned relative dir -> fd; "." is the root
	uid  int
	gid  int
}

func openTree(root string, uid, gid int) (*tree, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	return &tree{root: root, fds: map[string]int{".": fd}, uid: uid, gid: gid}, nil
}

func (t *tree) close() {
	for _, fd := range t.fds {
		unix.Close(fd)
	}
}

// maxCached is how many directory descriptors a tree keeps between
// operations (see trim).
const maxCached = 256

// trim bounds the cache: past maxCached descriptors, it closes all but the
// root's and keep's, so an operation over any number of directories holds
// a bounded number open. Descriptors handed out before are invalid after:
// call it between operations only.
func (t *tree) trim(keep string) {
	if len(t.fds) <= maxCached {
		return
	}
	for rel, fd := range t.fds {
		if rel != "." && rel != keep {
			unix.Close(fd)
			delete(t.fds, rel)
		}
	}
}

// refusal is an operation refused for safety; it is reported per path.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// dir returns an fd for the directory rel. With mkMode non-nil, missing
// directories are created with the mode it gives (owned by the tree's
// owner).
func (t *tree) dir(rel string, mkMode func(rel string) fs.FileMode) (int, error) {
	rel = path.Clean(rel)
	if fd, ok := t.fds[rel]; ok {
		return fd, nil
	}
	name := path.Base(rel)
	pfd, err := t.dir(path.Dir(rel), mkMode)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && mkMode != nil {
		if err := t.mkdir(pfd, name, mkMode(rel)); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("create directory %s: %w", names.Quote(rel), err)
		}
		fd, err = unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return -1, &refusal{fmt.Sprintf("%s is a symlink in %s: refusing to write through it", names.Quote(rel), t.root)}
	case errors.Is(err, unix.ENOTDIR):
		return -1, &refusal{fmt.Sprintf("%s is not a directory in %s (it became a file): move it aside, then accept again", names.Quote(rel), t.root)}
	case err != nil:
		return -1, fmt.Errorf("open directory %s: %w", names.Quote(rel), err)
	}
	t.fds[rel] = fd
	return fd, nil
}

func (t *tree) mkdir(pfd int, name string, mode fs.FileMode) error {
	fd, err := t.mkdirFd(pfd, name, mode)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// mkdirFd makes directory name in pfd with the tree's owner and mode, and
// returns it open.
func (t *tree) mkdirFd(pfd int, name string, mode fs.FileMode) (int, error) {
	if err := unix.Mkdirat(pfd, name, 0o700); err != nil {
		return -1, err
	}
	// Owner and mode through a descriptor: in a session's view the entry
	// can be swapped for a symlink right after the mkdir.
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, &refusal{fmt.Sprintf("%s was replaced while it was created: refusing to go through it", names.Quote(name))}
		}
		return -1, err
	}
	if err := unix.Fchown(fd, t.uid, t.gid); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Fchmod(fd, unixMode(mode)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// placeTree moves the directory sname of sfd (a tree staged whole) to
// dname in dfd, never through a symlink. When something stands at dname
// (the host made it since the accept was planned, or a recovery redoes
// the move halfway), a directory there is merged into, entry by entry,
// and anything else replaced: the result is what moving each staged
// entry on its own would give. A source that is gone was moved already.
func placeTree(sfd int, sname string, dfd int, dname string) error {
	for range 3 {
		err := unix.Renameat2(sfd, sname, dfd, dname, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			// No RENAME_NOREPLACE on this file system: look first.
			var st unix.Stat_t
			if err = unix.Fstatat(dfd, dname, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
				err = unix.Renameat(sfd, sname, dfd, dname)
			} else if err == nil {
				err = unix.EEXIST
			}
		}
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.ENOTDIR):
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, dname, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return mergeTree(sfd, sname, dfd, dname)
		}
		if err := removeAll(dfd, dname); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s keeps changing while the accept writes it: accept again", dname)
}

// mergeTree moves every entry of the staged directory sname into the
// existing directory dname, gives dname the staged one's mode, and removes
// sname.
func mergeTree(sfd int, sname string, dfd int, dname string) error {
	src, err := unix.Openat(sfd, sname, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	dst, err := unix.Openat(dfd, dname, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return &refusal{fmt.Sprintf("%s was replaced while it was written: refusing to go through it", dname)}
		}
		return err
	}
	defer unix.Close(dst)
	names, err := readNames(src)
	if err != nil {
		return err
	}
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(src, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = placeTree(src, n, dst, n)
		} else {
			err = unix.Renameat(src, n, dst, n)
			if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				// A directory stands where the file goes.
				if err = removeAll(dst, n); err == nil {
					err = unix.Renameat(src, n, dst, n)
				}
			}
			if errors.Is(err, unix.ENOENT) {
				err = nil
			}
		}
		if err != nil {
			return err
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return err
	}
	if err := chmodAt(dfd, dname, st.Mode&^unix.S_IFMT); err != nil {
		return err
	}
	return unix.Unlinkat(sfd, sname, unix.AT_REMOVEDIR)
}

// chmodAt sets the mode of name in dirfd, never through a symlink: the
// entry is opened with O_PATH|O_NOFOLLOW (which opens no file: a FIFO or
// device is not touched) and the mode set through that descriptor, so a
// symlink swapped in at any moment is refused rather than followed. It
// works for files and directories alike.
func chmodAt(dirfd int, name string, mode uint32) error {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return &refusal{fmt.Sprintf("%s is a symlink now: refusing to change its target's mode", names.Quote(name))}
	}
	// fchmod refuses O_PATH descriptors; fchmodat2 (Linux 6.6) takes one
	// with AT_EMPTY_PATH, and before it the descriptor's /proc link names
	// the same inode (a magic link to what was opened, not a path lookup).
	err = unix.Fchmodat(fd, "", mode, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		err = unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
	}
	return err
}

// unixMode converts permission bits, dropping setuid and setgid.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}

// parent splits rel into its directory fd and base name.
func (t *tree) parent(rel string, mkMode func(string) fs.FileMode) (int, string, error) {
	fd, err := t.dir(path.Dir(rel), mkMode)
	return fd, path.Base(rel), err
}

// removeAll removes name in dirfd and, if it is a directory, everything
// under it, never following symlinks. A missing name is not an error.
func removeAll(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	names, err := readNames(fd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	for _, n := range names {
		if err := removeAll(fd, n); err != nil {
			unix.Close(fd)
			return err
		}
	}
	unix.Close(fd)
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// readNames lists the names in the directory fd. Only a getdents call
// that returns nothing ends the listing: tmpfs can answer short before the
// end (seen on Linux 6.18, where trusting a short answer lost a directory's
// worth of changes now and then).
func readNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 64*1024)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
