package review

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock/airlock/names"
)

// Discard drops the selected changes from the session by restoring the
// project's version of each path (or, for single hunks, the session's file
// without them) in the session's merged view, never by editing the upper
// or lower layer under a mounted overlay, which the kernel leaves
// undefined. Added paths are removed; modified, deleted and replaced paths
// get the project's content, type and mode back.
func Discard(l Layers, merged string, diffs []FileDiff, sel Selection) ([]Outcome, error) {
	return DiscardContext(context.Background(), l, merged, diffs, sel)
}

// DiscardContext is Discard, stopping between paths when ctx ends: the
// paths not reached are reported as not applied.
func DiscardContext(ctx context.Context, l Layers, merged string, diffs []FileDiff, sel Selection) (out []Outcome, err error) {
	items, err := plan(l, diffs, sel, false)
	if err != nil {
		return nil, err
	}
	t, err := openTree(merged, 0, 0)
	if err != nil {
		return nil, err
	}
	defer t.close()
	out = make([]Outcome, len(items))
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, panicked("the discard", v)
		}
	}()
	// Deepest first, so removing an entry never races its parent's restore.
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return items[order[a]].d.Path > items[order[b]].d.Path })
	for _, i := range order {
		it := items[i]
		c := it.d.Change
		out[i] = Outcome{Path: c.Path, Kind: c.Kind, Partial: !it.whole}
		if it.err != nil {
			out[i].Error = it.err.Error()
			continue
		}
		if err := ctx.Err(); err != nil {
			out[i].Error = fmt.Sprintf("not discarded: the request ended (%v)", err)
			continue
		}
		if _, err := CleanPath(c.Path); err != nil || c.Path == "." {
			out[i].Error = fmt.Sprintf("refusing unsafe path %s", names.Quote(c.Path))
			continue
		}
		var err error
		if it.whole {
			err = discardOne(t, l, c)
			if err == nil && c.Kind == Renamed {
				// The rename's other half: the project's file comes back.
				err = discardOne(t, l, Change{Path: c.From, Kind: Deleted})
			}
		} else {
			err = rewriteInSession(t, c.Path, *it.content)
		}
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		out[i].Applied = true
	}
	// Directories left empty by removing added entries go too, unless the
	// project has them.
	for _, i := range order {
		if out[i].Applied && items[i].d.Kind == Added {
			pruneEmpty(t, l, path.Dir(items[i].d.Path))
		}
	}
	return out, nil
}

// rewriteInSession replaces a session file's content through the merged
// view, keeping its owner and mode.
func rewriteInSession(t *tree, p, content string) error {
	pfd, name, err := t.parent(p, nil)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file in the session", names.Quote(p))
	}
	tmp := tmpName(name)
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = io.WriteString(f, content)
	if err == nil {
		err = f.Chown(int(st.Uid), int(st.Gid))
	}
	if err == nil {
		err = unix.Fchmod(fd, st.Mode&0o7777)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(pfd, tmp, pfd, name)
	}
	if err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("the session's workspace is full: discard whole files first, or start a session with a larger --workspace-size")
		}
	}
	return err
}

func tmpName(name string) string {
	base := name
	if len(base) > 100 {
		base = base[:100]
	}
	return ".airlock-" + randHex() + "-" + base + ".tmp"
}

func discardOne(t *tree, l Layers, c Change) error {
	pfd, name, err := t.parent(c.Path, nil)
	if err != nil {
		return err
	}
	hp := filepath.Join(l.Project, filepath.FromSlash(c.Path))
	switch {
	case c.Kind == Added:
		return removeAll(pfd, name)
	case c.Kind == Mode:
		return chmodAt(pfd, name, unixMode(c.OldMode))
	}
	if err := removeAll(pfd, name); err != nil {
		return err
	}
	return copyIn(pfd, name, hp)
}

// copyIn copies the project's entry at src, recursively for a directory,
// to name in dirfd with its owner and mode.
func copyIn(dirfd int, name, src string) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the project no longer has it either
	}
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	uid, gid := int(st.Uid), int(st.Gid)
	switch typeOf(fi.Mode()) {
	case Symlink:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, dirfd, name); err != nil {
			return err
		}
		return unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	case Dir:
		if err := unix.Mkdirat(dirfd, name, 0o700); err != nil {
			return err
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyIn(fd, e.Name(), filepath.Join(src, e.Name())); err != nil {
				return err
			}
		}
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return err
		}
		return unix.Fchmod(fd, uint32(fi.Mode().Perm())|stickyBit(fi.Mode()))
	case File:
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		if _, err := io.Copy(f, in); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return fmt.Errorf("the session's workspace is full: discard added files first or start a session with a larger --workspace-size")
			}
			return err
		}
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
		// The project's own mode, special bits included: this restores
		// the project's state in the session, it does not import anything.
		return unix.Fchmod(fd, uint32(fi.Mode().Perm())|stickyBit(fi.Mode())|setBits(fi.Mode()))
	}
	return fmt.Errorf("the project's %s is a special file: left as it is", src)
}

func stickyBit(m fs.FileMode) uint32 {
	if m&fs.ModeSticky != 0 {
		return unix.S_ISVTX
	}
	return 0
}

func setBits(m fs.FileMode) uint32 {
	var u uint32
	if m&fs.ModeSetuid != 0 {
		u |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	return u
}

// pruneEmpty removes empty session directories up from dir that the
// project does not have.
func pruneEmpty(t *tree, l Layers, dir string) {
	for dir != "." && dir != "/" && dir != "" {
		if _, err := os.Lstat(filepath.Join(l.Project, filepath.FromSlash(dir))); err == nil {
			return
		}
		pfd, name, err := t.parent(dir, nil)
		if err != nil {
			return
		}
		if unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR) != nil {
			return // not empty, or gone
		}
		if fd, ok := t.fds[dir]; ok {
			unix.Close(fd)
			delete(t.fds, dir)
		}
		dir = path.Dir(dir)
	}
}
