package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/criu"
	"github.com/airlock/airlock/engine/index"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"
)

// A hibernated session has no container, no tmpfs and no live network:
// it uses no memory. What it had is on disk: its workspace layer in its
// newest checkpoint (a disk workspace's layer stays where it is), its
// container layer and home in checkpoints of their own, its record
// (image, limits, user, environment, policy, budgets) in the store, its
// base beside them. New work (exec, shell, terminal, agent turn, accept,
// discard, preview ports) wakes it: a fresh tmpfs filled from the
// checkpoint, a network under the same policy, a container made again
// from the record. Reading its diff, patch, commands, turns or log does
// not: a diff reads the checkpoint restored into a directory on disk
// (peek), kept until the session wakes.
//
// Not kept: running processes (they are stopped, as on a reboot) unless
// asked and the host can (engine/criu), the
// session's values given for secrets survive only within this engine
// (as for any session), a paused session wakes running.

// DefaultHibernateAfter is how long a session may be idle before it
// hibernates.
const DefaultHibernateAfter = 2 * time.Hour

// Where a session's checkpoints are: the workspace layer's at
// checkpoints/ID (shared with the turns' timeline), the container
// layer's and the home's in the session's directory, removed with it.
func (e *Engine) checkpointDir(id string) string { return timeline.Dir(e.stateDir, id) }

// checkpoints is the workspace's store, the timeline's own (one Store per
// session in the engine, whose records hibernation's join).
func (e *Engine) checkpoints(id string) (*checkpoint.Store, error) { return e.timeline.Store(id) }

// containerCheckpoints and homeCheckpoints are session id's (its
// directory dir), one Store each in the engine (the timeline keeps them):
// a Store keeps the trees of its last checkpoint, which the next Record
// compares against without reading them back (a container layer of 4,500
// entries: 64-157 ms a walk opened afresh each time).
func (e *Engine) containerCheckpoints(id, dir string) (*checkpoint.Store, error) {
	return e.timeline.LayerStore(id, filepath.Join(dir, "checkpoints", "container"))
}

func (e *Engine) homeCheckpoints(id, dir string) (*checkpoint.Store, error) {
	return e.timeline.LayerStore(id, filepath.Join(dir, "checkpoints", "home"))
}

// Hibernate records a session's checkpoint and releases everything it
// holds in memory (see above). It refuses while a command or turn runs,
// and, asked to keep the processes, where the host cannot.
func (e *Engine) Hibernate(ctx context.Context, id string, req api.HibernateRequest) (api.Session, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Session{}, err
	}
	if req.KeepProcesses {
		if err := criu.Check(ctx, e.docker); err != nil {
			return api.Session{}, err
		}
	}
	a := e.activityOf(rec.ID)
	a.gate.Lock()
	e.actMu.Lock()
	busy := a.busy
	e.actMu.Unlock()
	if busy == 0 {
		if rec, err = e.store.Session(ctx, rec.ID); err == nil {
			err = e.hibernate(ctx, rec, "asked", req.KeepProcesses)
		}
	}
	a.gate.Unlock()
	if busy > 0 {
		return api.Session{}, errdefs.Conflictf("session %s is running a command or an agent turn: wait for it to end (or stop it), then hibernate", rec.ID)
	}
	if err != nil {
		return api.Session{}, err
	}
	return e.Get(ctx, rec.ID)
}

// hibernate hibernates rec, its processes checkpointed when keep says so.
// The caller holds the session's gate with no work running, so none
// starts meanwhile.
func (e *Engine) hibernate(ctx context.Context, rec store.Session, reason string, keep bool) error {
	switch rec.State {
	case api.StateHibernated:
		return nil
	case api.StateRunning, api.StatePaused, api.StateStopped:
	default:
		return errdefs.Conflictf("session %s is %s: only a session with its workspace hibernates", rec.ID, rec.State)
	}
	l := e.liveSession(rec.ID)
	if l == nil {
		return errdefs.Conflictf("session %s has no workspace: %s", rec.ID, orNone(rec.Error))
	}
	ctx = context.WithoutCancel(ctx) // half a hibernation helps nobody
	t0 := time.Now()
	l.mu.Lock() // no review, accept, discard or snapshot meanwhile
	defer l.mu.Unlock()
	if l.gone {
		return nil
	}
	l.freeze.Lock() // nor a snapshot's freeze
	defer l.freeze.Unlock()
	if err := review.Recover(e.journalPath(rec.ID)); err != nil {
		return err
	}
	// Frozen, the session's processes leave its layers still while they
	// are recorded; they are not kept.
	pid := 0
	info, ierr := e.docker.ContainerInspect(ctx, rec.ContainerID)
	if ierr == nil && info.State != nil && info.State.Running {
		if !info.State.Paused {
			if err := e.freeze(ctx, rec.ContainerID); err != nil {
				e.log.Warn("freeze a session to hibernate it: recording it as it runs", "session", rec.ID, "err", err)
			}
		}
		pid = info.State.Pid
	}
	var kept *checkpoint.Checkpoint
	if !l.ws.Disk {
		cs, err := e.checkpoints(rec.ID)
		if err != nil {
			return err
		}
		if kept, err = cs.RecordDir(ctx, l.ws.Upper(), checkpoint.RecordOptions{Label: "hibernate"}); err != nil {
			e.thaw(ctx, rec)
			return fmt.Errorf("record the session's workspace: %w", err)
		}
	}
	if ierr == nil {
		if err := e.recordContainer(ctx, rec, info, pid); err != nil {
			e.thaw(ctx, rec)
			return err
		}
	}
	e.timeline.DropLayers(rec.ID)   // recorded: their stores' trees need not stay in memory
	os.RemoveAll(criu.Dir(rec.Dir)) // an earlier hibernation's, restored or not
	if keep && pid > 0 {
		if err := criu.Checkpoint(ctx, e.docker, rec.Dir, rec.ContainerID); err != nil {
			e.thaw(ctx, rec)
			return err
		}
		reason += "; processes kept"
	}
	if l.stopCapture != nil {
		l.stopCapture()
	}
	// Released: the container (a paused one is killed frozen), its
	// cgroups, the network's gateway, rules and bridge, the overlay and
	// the tmpfs. The record keeps the policy.
	if err := e.docker.ContainerRemove(ctx, rec.ContainerID, container.RemoveOptions{Force: true}); err != nil {
		if derr := dockerError("remove the session's container", err); !errdefs.IsNotFound(derr) {
			e.thaw(ctx, rec)
			return derr
		}
	}
	// The cgroups go, and with them what they counted: kept in the store.
	if used, err := e.meter.CPU(rec.ID); err == nil {
		if err := e.store.SetCPUCarried(ctx, rec.ID, used); err != nil {
			e.log.Warn("keep a hibernated session's CPU time", "session", rec.ID, "err", err)
		}
	}
	if err := e.meter.Remove(ctx, rec.ID); err != nil {
		e.log.Warn("remove a hibernated session's cgroups", "session", rec.ID, "err", err)
	}
	e.nets.Stop(l.net)
	if rec.Network != "" {
		e.nets.Release(network.KeyOf(rec.Network))
	}
	l.base.Close()
	l.sums.close()
	l.gone = true
	if err := l.ws.Close(); err != nil {
		// The container is gone; the workspace stays readable and the
		// next wake mounts it afresh.
		e.log.Warn("unmount a hibernated session's workspace", "session", rec.ID, "err", err)
	}
	e.mu.Lock()
	delete(e.sessions, rec.ID)
	e.mu.Unlock()
	rec.State, rec.Error, rec.ContainerID, rec.Network = api.StateHibernated, "", "", ""
	if err := e.store.PutSession(ctx, rec); err != nil {
		return err
	}
	what := "its disk workspace kept as it is"
	if kept != nil {
		what = fmt.Sprintf("checkpoint %d, %d bytes written", kept.ID, kept.Stats.BytesWritten)
	}
	e.log.Info("session hibernated", "session", rec.ID, "reason", reason, "kept", what, "took", time.Since(t0))
	return e.store.AddLifecycle(ctx, rec.ID, "hibernated", reason, time.Now())
}

// errGone is what work that took a session's live before it hibernated
// answers once it holds its lock.
func errGone(id string) error {
	return errdefs.Conflictf("session %s hibernated meanwhile: ask again (it is read from its checkpoint, or woken by new work)", id)
}

// thaw unfreezes a session whose hibernation failed: it goes on as it was.
func (e *Engine) thaw(ctx context.Context, rec store.Session) {
	if rec.State == api.StateRunning {
		e.docker.ContainerUnpause(ctx, rec.ContainerID)
	}
}

// recordContainer records the container's own layer (packages the agent
// installed, files it wrote outside the workspace) and its home (a tmpfs
// inside the container, reached through the frozen process pid) in the
// session's directory.
func (e *Engine) recordContainer(ctx context.Context, rec store.Session, info container.InspectResponse, pid int) error {
	_, _, err := e.recordLayers(ctx, rec, info, pid, checkpoint.RecordOptions{Label: "hibernate"}, nil)
	return err
}

// recordLayers records the container layer and home as opts say (with
// IfChanged, only what changed since their newest checkpoints) and
// returns their checkpoints; changed says whether either is new. A first
// checkpoint of either is not counted as a change: a container's layer
// holds from its start what Docker made in it (mount points), and it is
// the state before the first checkpoint that is not kept.
//
// How an unchanged container layer is told without a walk: lw, when
// given, is a fanotify watch with a mark on every directory of the layer
// (added by the walk that records it, before each directory is read),
// with their children's events; while its mark has not moved since the
// last checkpoint and no process of the session holds a shared writable
// mapping of a file (whose writes make no event), the layer is as that
// checkpoint has it. A mark on the whole of the container's overlay is
// refused (EOPNOTSUPP: overlayfs gives no file handles without
// nfs_export), and one on the file system under Docker's directory would
// count every write of the host. Otherwise, and for the home (a small
// tmpfs), the walk tells: it compares each entry's stat data with the
// newest checkpoint's and opens no unchanged file.
func (e *Engine) recordLayers(ctx context.Context, rec store.Session, info container.InspectResponse, pid int, opts checkpoint.RecordOptions, lw *layerWatch) (timeline.Layers, bool, error) {
	var out timeline.Layers
	changed := false
	recordIn := func(s *checkpoint.Store, root *confined.Root, opts checkpoint.RecordOptions) (checkpoint.ID, error) {
		prev, err := s.Latest()
		if err != nil {
			return 0, err
		}
		c, err := s.Record(ctx, root, opts)
		if err != nil {
			return 0, err
		}
		changed = changed || prev != nil && c.ID != prev.ID
		return c.ID, nil
	}
	if info.GraphDriver.Name != "" && overlayDriver(info.GraphDriver.Name) && info.GraphDriver.Data["UpperDir"] != "" {
		cs, err := e.containerCheckpoints(rec.ID, rec.Dir)
		if err != nil {
			return out, false, err
		}
		upper := info.GraphDriver.Data["UpperDir"]
		var mark string
		if lw != nil {
			mark = lw.w.Mark()
		}
		if lw != nil && lw.id != 0 && mark == lw.mark && !e.layerMapped(rec.ID, upper, pid) {
			out.Container = lw.id // unchanged: not walked
		} else {
			root, err := confined.OpenRoot(upper)
			if err != nil {
				return out, false, err
			}
			o := opts
			if lw != nil {
				o.Dir = lw.w.AddDir
			}
			out.Container, err = recordIn(cs, root, o)
			root.Close()
			if err != nil {
				return out, false, fmt.Errorf("record the session's container layer: %w", err)
			}
			if lw != nil {
				lw.mark, lw.id = mark, out.Container
			}
		}
	} else {
		e.log.Warn("the container layer is not kept: Docker's storage driver is not overlay2", "session", rec.ID, "driver", info.GraphDriver.Name)
	}
	if pid <= 0 {
		return out, changed, nil
	}
	home, err := openHome(pid)
	if err != nil {
		e.log.Warn("the session's home is not kept", "session", rec.ID, "err", err)
		return out, changed, nil
	}
	defer home.Close()
	hs, err := e.homeCheckpoints(rec.ID, rec.Dir)
	if err != nil {
		return out, false, err
	}
	if out.Home, err = recordIn(hs, home, opts); err != nil {
		return out, false, fmt.Errorf("record the session's home: %w", err)
	}
	return out, changed, nil
}

// layerWatch tells a session's container layer unchanged (see
// recordLayers): the watch on its directories, the layer's upper
// directory, and the mark and checkpoint of its last record.
type layerWatch struct {
	w     *index.Watch
	upper string
	mark  string
	id    checkpoint.ID
}

func (l *layerWatch) Close() error { return l.w.Close() }

// layerMapped says whether a process of session id may write a file of
// its container layer through a shared mapping (when unsure: yes).
func (e *Engine) layerMapped(id, upper string, pid int) bool {
	pids, err := e.meter.Procs(id)
	if err != nil {
		return true
	}
	var a, b unix.Stat_t
	if unix.Stat(upper, &a) != nil || pid <= 0 || unix.Stat(fmt.Sprintf("/proc/%d/root", pid), &b) != nil {
		return true
	}
	found, err := index.WritableMappings(pids, a.Dev, b.Dev)
	return found || err != nil
}

// removeCheckpoints deletes a removed session's workspace checkpoints
// (the others go with its directory).
func (e *Engine) removeCheckpoints(id string) {
	e.dropPeek(id)
	if err := os.RemoveAll(e.checkpointDir(id)); err != nil {
		e.log.Warn("remove a session's checkpoints", "session", id, "err", err)
	}
}

// hibernation describes a hibernated session for its view.
func (e *Engine) hibernation(ctx context.Context, r store.Session) *api.Hibernation {
	h := &api.Hibernation{}
	if life, err := e.store.Lifecycle(ctx, r.ID); err == nil {
		for i := len(life) - 1; i >= 0; i-- {
			if life[i].Kind == "hibernated" {
				h.Reason, h.Time = life[i].Reason, life[i].Time
				break
			}
		}
	}
	if r.Workspace == api.WorkspaceDisk {
		h.DiskBytes += diskUsage(filepath.Join(r.Dir, "ws"))
	} else if cs, err := e.checkpoints(r.ID); err == nil {
		if last, err := cs.Latest(); err == nil && last != nil {
			h.Checkpoint, h.Time = uint64(last.ID), last.Time
		}
		if n, err := cs.Usage(); err == nil {
			h.DiskBytes += n
		}
	}
	if criu.Kept(r.Dir) {
		h.Processes = true
		h.DiskBytes += diskUsage(criu.Dir(r.Dir))
	}
	for _, open := range []func(string, string) (*checkpoint.Store, error){e.containerCheckpoints, e.homeCheckpoints} {
		if s, err := open(r.ID, r.Dir); err == nil {
			if n, err := s.Usage(); err == nil {
				h.DiskBytes += n
			}
		}
	}
	return h
}

// diskUsage is what the files beneath dir take on disk (never following
// a symlink).
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// adoptLost is adopt's answer to a session whose tmpfs is gone (a host
// reboot): back as hibernated from its newest checkpoint, saying which
// and of when, or failed when it has none. Its container, if Docker kept
// one, is removed; its network's parts are adopt's to remove, with the
// other unused networks (the record keeps the policy).
func (e *Engine) adoptLost(ctx context.Context, r store.Session, cause error) {
	cs, err := e.checkpoints(r.ID)
	var last *checkpoint.Checkpoint
	if err == nil {
		last, err = cs.Latest()
	}
	fresh := false
	if err == nil && last == nil {
		// Nothing was ever recorded (no command changed the workspace, or
		// none ran long enough for a periodic checkpoint): the session
		// comes back as it started, an empty upper layer, rather than
		// failed — its record, policy and conversation are still good.
		last, err = startCheckpoint(ctx, cs, r.Dir)
		fresh = err == nil
	}
	if err != nil {
		if r.State != api.StateFailed {
			msg := "the session's workspace is gone (its tmpfs did not survive, e.g. a host reboot) and no checkpoint of it could be read: its changes are lost; remove it with `airlock rm " + r.ID + "`"
			e.log.Warn("session workspace lost", "session", r.ID, "err", errors.Join(cause, err))
			e.store.SetSessionState(ctx, r.ID, api.StateFailed, msg)
		}
		return
	}
	lost := r
	lost.Network = "" // its network's parts go with adopt's unused networks, in the background
	e.release(ctx, lost)
	what := ""
	if last.Label != "" {
		what = " (" + last.Label + ")"
	}
	reason := fmt.Sprintf("host restarted: restored from checkpoint %d of %s%s; changes after it are lost, processes were not kept",
		last.ID, last.Time.UTC().Format(time.RFC3339), what)
	if fresh {
		reason = fmt.Sprintf("host restarted before any checkpoint was made: restored as the session started (checkpoint %d, empty); changes made in it are lost, processes were not kept", last.ID)
	}
	r.State, r.Error, r.ContainerID, r.Network = api.StateHibernated, "", "", ""
	if err := e.store.PutSession(ctx, r); err != nil {
		e.log.Error("record a session restored after a restart", "session", r.ID, "err", err)
		return
	}
	e.log.Warn("session workspace lost with its tmpfs: hibernated from its last checkpoint", "session", r.ID, "checkpoint", last.ID, "time", last.Time)
	e.store.AddLifecycle(ctx, r.ID, "hibernated", reason, time.Now())
}

// startCheckpoint records the session's workspace as it started (an
// empty upper layer) in cs, for a session that lost its tmpfs before its
// first checkpoint.
func startCheckpoint(ctx context.Context, cs *checkpoint.Store, dir string) (*checkpoint.Checkpoint, error) {
	empty, err := os.MkdirTemp(dir, ".start-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(empty)
	return cs.RecordDir(ctx, empty, checkpoint.RecordOptions{Label: "start: no checkpoint had been made"})
}

// adoptDisk is adopt's answer to a disk workspace whose container is
// gone (a host reboot): hibernated as it is, new work wakes it.
func (e *Engine) adoptDisk(ctx context.Context, r store.Session, ws *overlay.Workspace) {
	if err := ws.Close(); err != nil {
		e.log.Warn("unmount a disk workspace to hibernate it", "session", r.ID, "err", err)
	}
	e.release(ctx, r)
	r.State, r.Error, r.ContainerID, r.Network = api.StateHibernated, "", "", ""
	if err := e.store.PutSession(ctx, r); err != nil {
		return
	}
	e.store.AddLifecycle(ctx, r.ID, "hibernated", "host restarted: the disk workspace is as it was; processes were not kept", time.Now())
}

// carriedMeter is the meter with, added to a session's CPU time, what
// its cgroups counted before it hibernated (they go with its container):
// its cost and budget go on from where they were.
type carriedMeter struct {
	Meter
	store *store.Store
}

func (m carriedMeter) CPU(id string) (time.Duration, error) {
	now, err := m.Meter.CPU(id)
	before := m.store.CPUCarried(context.Background(), id)
	if err != nil && before == 0 {
		return 0, err
	}
	return before + now, nil
}

// release removes what a session no longer running may have left of its
// container and network.
func (e *Engine) release(ctx context.Context, r store.Session) {
	name := r.ContainerID
	if name == "" {
		name = "airlock-" + r.ID
	}
	e.docker.ContainerRemove(ctx, name, container.RemoveOptions{Force: true})
	if r.Network != "" {
		e.nets.Release(network.KeyOf(r.Network))
	}
	if err := e.meter.Remove(ctx, r.ID); err != nil {
		e.log.Warn("remove a session's cgroups", "session", r.ID, "err", err)
	}
}
