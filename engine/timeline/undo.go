package timeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/names"
	"golang.org/x/sys/unix"
)

// Undo puts session id's workspace back to a checkpoint (req; by default
// the state before its last turn) while the session lives: its processes
// are stopped first (Sessions.StopProcesses), the workspace as it is is
// checkpointed (so the undo can be undone), and every path that differs
// is written through the session's merged view — never into the upper
// layer under the mounted overlay, which the kernel leaves undefined.
// The result is recorded as a checkpoint of kind undo. Checkpoints of the
// session (a command stopped by the undo, the periodic one) wait for it.
//
// The container layer and home go back too when the checkpoint names
// theirs and they differ from what they are now (Sessions.RestoreLayers:
// the container is made again around the same workspace and network);
// undoing to the session's start leaves them as they are (their state
// before the first checkpoint is not kept). Undone.Layers says whether
// they went back.
func (t *Timeline) Undo(ctx context.Context, id string, req api.UndoRequest) (api.Undone, error) {
	list, err := t.List(ctx, id)
	if err != nil {
		return api.Undone{}, err
	}
	var to api.Checkpoint
	switch {
	case req.Checkpoint > 0:
		to, err = byID(list, id, req.Checkpoint)
	case req.Turn > 0:
		to, err = turnCheckpoint(list, id, req.Turn)
	default:
		to, err = lastTurnStart(list, id)
	}
	if err != nil {
		return api.Undone{}, err
	}
	_, merged, project, err := t.core.Workspace(ctx, id)
	if err != nil {
		return api.Undone{}, err
	}
	s, err := t.Store(id)
	if err != nil {
		return api.Undone{}, err
	}
	defer t.lock(id)()
	stopped, release, err := t.core.StopProcesses(ctx, id)
	if err != nil {
		return api.Undone{}, err
	}
	defer release()
	out := api.Undone{To: to, Stopped: stopped}
	if _, _, err := t.record(ctx, id, Mark{Kind: api.CheckpointPeriodic}); err != nil {
		return out, err
	}
	latest, err := s.Latest()
	if err != nil {
		return out, err
	}
	out.Before = int64(latest.ID)
	w, err := newWriter(s, checkpoint.ID(to.ID), latest.ID, merged, project)
	if err != nil {
		return out, err
	}
	defer w.close()
	if out.Files, err = w.apply(ctx); err != nil {
		return out, fmt.Errorf("undo session %s to checkpoint %d: %w (the workspace as it was is checkpoint %d: `airlock undo %s --checkpoint %d` puts it back)", id, to.ID, err, latest.ID, id, latest.ID)
	}
	now, _ := readMeta(s, *latest)
	want, err := t.layersAt(s, to)
	if err != nil {
		return out, err
	}
	if want != (Layers{}) && want != now.Layers {
		if out.Layers, err = t.core.RestoreLayers(ctx, id, want); err != nil {
			return out, fmt.Errorf("undo session %s to checkpoint %d: the workspace is put back, its container layer and home are not: %w (the state before is checkpoint %d: `airlock undo %s --checkpoint %d` puts it back)", id, to.ID, err, latest.ID, id, latest.ID)
		}
	}
	c, _, err := t.record(ctx, id, Mark{Kind: api.CheckpointUndo, UndoTo: to.ID, Always: true})
	if err != nil {
		return out, err
	}
	c.From = int64(latest.ID)
	out.Checkpoint = c
	return out, nil
}

// layersAt are the layers checkpoint to goes with (none for the session's
// start, to.ID 0).
func (t *Timeline) layersAt(s *checkpoint.Store, to api.Checkpoint) (Layers, error) {
	if to.ID != 0 {
		c, err := s.Get(checkpoint.ID(to.ID))
		if err != nil {
			return Layers{}, err
		}
		md, _ := readMeta(s, *c)
		return md.Layers, nil
	}
	return Layers{}, nil
}

// lastTurnStart is the checkpoint from which the last turn's changes are
// counted: the workspace before that turn.
func lastTurnStart(list []api.Checkpoint, id string) (api.Checkpoint, error) {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Kind == api.CheckpointTurn {
			if list[i].From == 0 {
				return api.Checkpoint{Kind: "start"}, nil // the session as it started
			}
			return byID(list, id, list[i].From)
		}
	}
	return api.Checkpoint{}, errdefs.NotFoundf("session %s has no agent turn to undo: give `--checkpoint ID` (`airlock turns %s` lists them)", id, id)
}

// writer makes the merged view hold what checkpoint to holds, starting
// from checkpoint now (the merged view as it is).
type writer struct {
	s       *checkpoint.Store
	res     *checkpoint.Resolver // of to
	to, now checkpoint.ID
	merged  *confined.Root
	project *confined.Root
	done    []string // subtrees put back whole
	dirs    []string // directories whose metadata to set last
	buf     []byte
}

func newWriter(s *checkpoint.Store, to, now checkpoint.ID, merged, project string) (*writer, error) {
	m, err := confined.OpenRoot(merged)
	if err != nil {
		return nil, err
	}
	p, err := confined.OpenRoot(project)
	if err != nil {
		m.Close()
		return nil, err
	}
	var res *checkpoint.Resolver // nil for 0: the empty upper layer a session starts with
	if to != 0 {
		if res, err = s.NewResolver(to); err != nil {
			m.Close()
			p.Close()
			return nil, err
		}
	}
	return &writer{s: s, res: res, to: to, now: now, merged: m, project: p, buf: make([]byte, 1<<20)}, nil
}

func (w *writer) close() {
	w.merged.Close()
	w.project.Close()
}

func (w *writer) under(p string) bool {
	for _, d := range w.done {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// resolve is what checkpoint to holds at p (see checkpoint.Resolve).
func (w *writer) resolve(p string) (*checkpoint.Entry, bool, error) {
	if w.res == nil {
		return nil, true, nil
	}
	return w.res.Resolve(p)
}

// apply writes every path that differs, parents first, then directories'
// metadata deepest first. It returns how many paths it put back.
func (w *writer) apply(ctx context.Context) (int, error) {
	changes, err := w.s.Diff(w.now, w.to)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if w.under(c.Path) {
			continue
		}
		if err := w.put(c.Path, c.Old, c.New); err != nil {
			return n, fmt.Errorf("%s: %w", names.Quote(c.Path), err)
		}
		n++
	}
	for i := len(w.dirs) - 1; i >= 0; i-- {
		p := w.dirs[i]
		e, _, err := w.resolve(p)
		if err != nil || e == nil || e.Type != checkpoint.Dir {
			continue
		}
		d, err := w.merged.OpenDir(p)
		if err != nil {
			return n, fmt.Errorf("%s: %w", p, err)
		}
		err = setMeta(d.Fd(), e)
		d.Close()
		if err != nil {
			return n, fmt.Errorf("%s: %w", p, err)
		}
	}
	return n, nil
}

// parent opens the directory holding p in the merged view.
func (w *writer) parent(p string) (*confined.Root, string, error) {
	d, err := w.merged.OpenDir(path.Dir(p))
	return d, path.Base(p), err
}

// put makes path p of the merged view what checkpoint to says: cur is
// the upper layer's entry now, want the checkpoint's (nil: none).
func (w *writer) put(p string, cur, want *checkpoint.Entry) error {
	d, name, err := w.parent(p)
	if err != nil {
		return err
	}
	defer d.Close()
	dfd := d.Fd()
	switch {
	case want == nil:
		// The checkpoint has no upper entry here: the project's p shows
		// through (or nothing).
		_, lower, err := w.resolve(p)
		if err != nil {
			return err
		}
		if cur != nil && cur.Type == checkpoint.Dir && !cur.Opaque && lower {
			if fi, err := w.project.Lstat(p); err == nil && fi.IsDir() {
				return nil // the directory merges with the project's: its entries are put back one by one
			}
		}
		if err := removeAll(dfd, name); err != nil {
			return err
		}
		w.done = append(w.done, p)
		if lower {
			return w.copyProject(dfd, name, p)
		}
		return nil
	case want.Type == checkpoint.Whiteout:
		w.done = append(w.done, p)
		return removeAll(dfd, name)
	case want.Type == checkpoint.Dir:
		var st unix.Stat_t
		isDir := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
		nowOpaque := cur != nil && cur.Type == checkpoint.Dir && cur.Opaque
		if isDir && (!want.Opaque || nowOpaque) {
			w.dirs = append(w.dirs, p)
			return nil
		}
		if err := removeAll(dfd, name); err != nil {
			return err
		}
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return err
		}
		w.dirs = append(w.dirs, p)
		if want.Opaque {
			// The overlay made it opaque (a directory made where one was
			// removed); what the checkpoint holds beneath it comes back
			// whole, changed or not.
			w.done = append(w.done, p)
			return w.fillDir(p)
		}
		return nil
	default:
		if err := removeAll(dfd, name); err != nil {
			return err
		}
		return w.create(dfd, name, want)
	}
}

// fillDir writes everything checkpoint to holds beneath directory p.
func (w *writer) fillDir(p string) error {
	all, err := w.s.Diff(0, w.to)
	if err != nil {
		return err
	}
	for _, c := range all {
		if !strings.HasPrefix(c.Path, p+"/") || c.New == nil {
			continue
		}
		d, name, err := w.parent(c.Path)
		if err != nil {
			return err
		}
		if c.New.Type == checkpoint.Dir {
			err = unix.Mkdirat(d.Fd(), name, 0o700)
			w.dirs = append(w.dirs, c.Path)
		} else if c.New.Type != checkpoint.Whiteout {
			err = w.create(d.Fd(), name, c.New)
		}
		d.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", c.Path, err)
		}
	}
	return nil
}

// create makes the entry e as name in the directory dfd of the merged
// view (nothing is there).
func (w *writer) create(dfd int, name string, e *checkpoint.Entry) error {
	switch e.Type {
	case checkpoint.File:
		if e.HardLink != "" {
			fd, _, err := w.merged.OpenFd(e.HardLink)
			if err != nil {
				return fmt.Errorf("hard link to %s: %w", e.HardLink, err)
			}
			defer unix.Close(fd)
			return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
		}
		fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		r, err := w.s.OpenContent(e)
		if err != nil {
			return err
		}
		defer r.Close()
		if err := copyTo(fd, r, w.buf); err != nil {
			return err
		}
		return setMeta(fd, e)
	case checkpoint.Symlink:
		if err := unix.Symlinkat(e.Target, dfd, name); err != nil {
			return err
		}
	case checkpoint.FIFO:
		if err := unix.Mkfifoat(dfd, name, e.Mode&0o7777); err != nil {
			return err
		}
	default:
		return fmt.Errorf("cannot make a %s", e.Type)
	}
	if err := unix.Fchownat(dfd, name, e.UID, e.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.Mtime), unix.NsecToTimespec(e.Mtime)}
	return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// copyTo writes everything r reads to the file fd.
func copyTo(fd int, r io.Reader, buf []byte) error {
	for {
		n, err := r.Read(buf)
		for b := buf[:n]; len(b) > 0; {
			k, werr := unix.Write(fd, b)
			if werr != nil {
				return werr
			}
			b = b[k:]
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// setMeta gives the open fd the entry's owner, mode, user.* extended
// attributes and times (a chown clears set-id bits: mode after it).
func setMeta(fd int, e *checkpoint.Entry) error {
	if err := unix.Fchown(fd, e.UID, e.GID); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, e.Mode&0o7777); err != nil {
		return err
	}
	for k, v := range e.Xattrs {
		if !strings.HasPrefix(k, "user.") {
			continue
		}
		if err := unix.Fsetxattr(fd, k, v, 0); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.Mtime), unix.NsecToTimespec(e.Mtime)}
	return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
}

// copyProject copies the project's p (a file, symlink or directory with
// everything beneath it) to name in the merged view's directory dfd.
func (w *writer) copyProject(dfd int, name, p string) error {
	fi, err := w.project.Lstat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	st, ok := statOf(fi)
	if !ok {
		return fmt.Errorf("%s: no stat data", p)
	}
	ts := []unix.Timespec{st.Mtim, st.Mtim}
	switch {
	case fi.Mode().IsRegular():
		src, err := w.project.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := copyTo(fd, src, w.buf); err != nil {
			return err
		}
		if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
			return err
		}
		return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := w.project.Readlink(p)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return err
		}
		unix.Fchownat(dfd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
		return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	case fi.IsDir():
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return err
		}
		names, err := w.project.ReadDirNames(p, maxProjectNames)
		if err != nil {
			return err
		}
		d, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(d)
		for _, n := range names {
			if err := w.copyProject(d, n, path.Join(p, n)); err != nil {
				return err
			}
		}
		if err := unix.Fchown(d, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		if err := unix.Fchmod(d, st.Mode&0o7777); err != nil {
			return err
		}
		return unix.UtimesNanoAt(d, "", ts, unix.AT_EMPTY_PATH)
	}
	return nil // the review never takes special files from the project
}

// statOf is the stat data behind fi.
func statOf(fi os.FileInfo) (unix.Stat_t, bool) {
	switch st := fi.Sys().(type) {
	case *unix.Stat_t:
		return *st, true
	case *syscall.Stat_t:
		return unix.Stat_t{Uid: st.Uid, Gid: st.Gid, Mode: st.Mode, Mtim: unix.Timespec(st.Mtim)}, true
	}
	return unix.Stat_t{}, false
}

// removeAll removes name from the directory dfd, with everything beneath
// it, never following a symlink; a missing name is no error.
func removeAll(dfd int, name string) error {
	err := unix.Unlinkat(dfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR {
		return err
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return err
	}
	for _, n := range names {
		if err := removeAll(fd, n); err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	return unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
}
