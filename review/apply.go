package review

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Outcome is what happened to one selected change.
type Outcome struct {
	Path    string `json:"path"`
	Kind    Kind   `json:"kind"`
	Applied bool   `json:"applied"`
	// Error says why the change was skipped; the project's file is untouched.
	Error string `json:"error,omitempty"`
}

// Accept writes the selected changes into the project. Each file is
// replaced atomically (a temporary file in the same directory, renamed over
// the old one after the data is on disk), so a crash leaves every file
// either old or new. Nothing is written outside the project root or
// through a symlink; device files, FIFOs and sockets are skipped. Files
// belong to the project root's owner and keep the session's permission
// bits without setuid and setgid.
//
// A change that cannot be applied is reported in its Outcome and does not
// stop the others; the error return is for failures that stop everything.
func Accept(l Layers, changes []Change) ([]Outcome, error) {
	st, err := os.Stat(l.Project)
	if err != nil {
		return nil, fmt.Errorf("project %s: %w", l.Project, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	t, err := openTree(l.Project, int(sys.Uid), int(sys.Gid))
	if err != nil {
		return nil, err
	}
	defer t.close()
	// New parent directories take the session's mode for that directory.
	mkMode := func(rel string) fs.FileMode {
		if fi, err := os.Lstat(filepath.Join(l.Upper, filepath.FromSlash(rel))); err == nil && fi.IsDir() {
			return fi.Mode()
		}
		return 0o755
	}
	out := make([]Outcome, len(changes))
	type pending struct {
		i         int
		dirfd     int
		tmp, name string
	}
	var staged []pending
	fail := func(i int, err error) { out[i].Error = err.Error() }

	// Pass 1, in path order: structural changes take effect at once, and
	// file contents are staged as temporary files.
	for i, c := range changes {
		out[i] = Outcome{Path: c.Path, Kind: c.Kind}
		if _, err := CleanPath(c.Path); err != nil || c.Path == "." {
			fail(i, fmt.Errorf("refusing unsafe path %q", c.Path))
			continue
		}
		if c.Type == Special {
			fail(i, fmt.Errorf("skipped: %s", c.Note))
			continue
		}
		pfd, name, err := t.parent(c.Path, mkMode)
		if err != nil {
			fail(i, err)
			continue
		}
		switch {
		case c.Kind == Deleted:
			err = removeAll(pfd, name)
		case c.Type == Dir:
			err = applyDir(t, pfd, name, c)
		case c.Kind == Mode:
			err = chmodFile(pfd, name, c.Mode)
		default:
			if c.OldType == Dir {
				if err = removeAll(pfd, name); err != nil {
					break
				}
			}
			var tmp string
			tmp, err = stage(t, pfd, filepath.Join(l.Upper, filepath.FromSlash(c.Path)), c)
			if err == nil {
				staged = append(staged, pending{i, pfd, tmp, name})
				continue
			}
		}
		if err != nil {
			fail(i, err)
		} else {
			out[i].Applied = true
		}
	}
	if len(staged) == 0 {
		return out, nil
	}
	// Pass 2: one syncfs puts every staged file's data on disk before any
	// rename makes it visible; far cheaper than an fsync per file.
	if err := unix.Syncfs(t.fds["."]); err != nil {
		for _, s := range staged {
			unix.Unlinkat(s.dirfd, s.tmp, 0)
			fail(s.i, fmt.Errorf("sync: %w", err))
		}
		return out, nil
	}
	for _, s := range staged {
		if err := unix.Renameat(s.dirfd, s.tmp, s.dirfd, s.name); err != nil {
			unix.Unlinkat(s.dirfd, s.tmp, 0)
			if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) {
				err = fmt.Errorf("the project has a directory at %s now: move it aside, then accept again", changes[s.i].Path)
			}
			fail(s.i, err)
			continue
		}
		out[s.i].Applied = true
	}
	// And one more so the renames themselves are durable.
	if err := unix.Syncfs(t.fds["."]); err != nil {
		return out, fmt.Errorf("sync after accept: %w", err)
	}
	return out, nil
}

func applyDir(t *tree, pfd int, name string, c Change) error {
	var st unix.Stat_t
	err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return t.mkdir(pfd, name, c.Mode)
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		if err := unix.Unlinkat(pfd, name, 0); err != nil {
			return err
		}
		return t.mkdir(pfd, name, c.Mode)
	}
	return unix.Fchmodat(pfd, name, unixMode(c.Mode), 0)
}

// chmodFile changes a regular file's mode without following a symlink.
func chmodFile(pfd int, name string, mode fs.FileMode) error {
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return &refusal{"the project has a symlink there now: refusing to change its target's mode"}
		}
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, unixMode(mode))
}

func tmpName(name string) string {
	var b [6]byte
	rand.Read(b[:])
	base := name
	if len(base) > 100 {
		base = base[:100]
	}
	return ".airlock-" + hex.EncodeToString(b[:]) + "-" + base + ".tmp"
}

// stage writes the session's version of a file or symlink to a temporary
// name in pfd and returns that name.
func stage(t *tree, pfd int, src string, c Change) (string, error) {
	tmp := tmpName(path.Base(c.Path))
	if c.Type == Symlink {
		target, err := os.Readlink(src)
		if err != nil {
			return "", err
		}
		if err := unix.Symlinkat(target, pfd, tmp); err != nil {
			return "", err
		}
		if err := unix.Fchownat(pfd, tmp, t.uid, t.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			unix.Unlinkat(pfd, tmp, 0)
			return "", err
		}
		return tmp, nil
	}
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("read session file: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("the session's %s is no longer a regular file: look at the diff again", c.Path)
	}
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", err
	}
	out := os.NewFile(uintptr(fd), tmp)
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chown(t.uid, t.gid)
	}
	if err == nil {
		err = unix.Fchmod(fd, unixMode(fi.Mode()))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		if errors.Is(err, unix.ENOSPC) {
			return "", fmt.Errorf("the project's disk is full: free space, then accept again (the project file is unchanged)")
		}
		return "", err
	}
	return tmp, nil
}
