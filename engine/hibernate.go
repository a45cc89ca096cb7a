package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/docker/docker/api/types/container"
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
// Not kept: running processes (they are stopped, as on a reboot), the
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

func containerCheckpoints(dir string) (*checkpoint.Store, error) {
	return checkpoint.Open(filepath.Join(dir, "checkpoints", "container"))
}

func homeCheckpoints(dir string) (*checkpoint.Store, error) {
	return checkpoint.Open(filepath.Join(dir, "checkpoints", "home"))
}

// Hibernate records a session's checkpoint and releases everything it
// holds in memory (see above). It refuses while a command or turn runs.
func (e *Engine) Hibernate(ctx context.Context, id string) (api.Session, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Session{}, err
	}
	a := e.activityOf(rec.ID)
	a.gate.Lock()
	e.actMu.Lock()
	busy := a.busy
	e.actMu.Unlock()
	if busy == 0 {
		if rec, err = e.store.Session(ctx, rec.ID); err == nil {
			err = e.hibernate(ctx, rec, "asked")
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

// hibernate hibernates rec. The caller holds the session's gate with no
// work running, so none starts meanwhile.
func (e *Engine) hibernate(ctx context.Context, rec store.Session, reason string) error {
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
	if info.GraphDriver.Name != "" && overlayDriver(info.GraphDriver.Name) && info.GraphDriver.Data["UpperDir"] != "" {
		cs, err := containerCheckpoints(rec.Dir)
		if err != nil {
			return err
		}
		if _, err := cs.RecordDir(ctx, info.GraphDriver.Data["UpperDir"], checkpoint.RecordOptions{Label: "hibernate"}); err != nil {
			return fmt.Errorf("record the session's container layer: %w", err)
		}
	} else {
		e.log.Warn("the container layer is not kept: Docker's storage driver is not overlay2", "session", rec.ID, "driver", info.GraphDriver.Name)
	}
	if pid <= 0 {
		return nil
	}
	home, err := openHome(pid)
	if err != nil {
		e.log.Warn("the session's home is not kept", "session", rec.ID, "err", err)
		return nil
	}
	defer home.Close()
	hs, err := homeCheckpoints(rec.Dir)
	if err != nil {
		return err
	}
	if _, err := hs.Record(ctx, home, checkpoint.RecordOptions{Label: "hibernate"}); err != nil {
		return fmt.Errorf("record the session's home: %w", err)
	}
	return nil
}

// Wake brings a hibernated session back, as new work would (a paused
// one resumes; a running one is left as it is).
func (e *Engine) Wake(ctx context.Context, id string) (api.Session, error) {
	_, done, err := e.working(ctx, id)
	if err != nil {
		return api.Session{}, err
	}
	done()
	return e.Get(ctx, id)
}

// wake brings a hibernated session back, once however many ask at once.
// The caller counts as work in the session (see working), so it does
// not hibernate again meanwhile.
func (e *Engine) wake(ctx context.Context, id, reason string) (store.Session, error) {
	a := e.activityOf(id)
	a.wake.Lock()
	defer a.wake.Unlock()
	rec, err := e.store.Session(ctx, id)
	if err != nil || rec.State != api.StateHibernated {
		return rec, err
	}
	ctx = context.WithoutCancel(ctx) // a wake that stops halfway is undone, and helps nobody
	t0 := time.Now()
	e.dropPeek(rec.ID)
	w := &waking{e: e, rec: rec}
	ok := false
	defer func() {
		if !ok {
			w.undo(ctx)
		}
	}()
	if err := w.mount(ctx); err != nil {
		return rec, err
	}
	if err := w.network(); err != nil {
		return rec, err
	}
	if err := w.container(ctx); err != nil {
		return rec, err
	}
	w.rec.State, w.rec.Error = api.StateRunning, ""
	if err := e.store.PutSession(ctx, w.rec); err != nil {
		return rec, err
	}
	ok = true
	e.mu.Lock()
	l := &live{ws: w.ws, base: review.OpenBase(rec.Project, baseDir(rec.Dir)), cache: review.NewCache(), net: w.net, sums: e.watchWorkspace(id, w.ws)}
	l.sums.captured.Store(true) // the base is the one recorded at create
	e.sessions[id] = l
	e.mu.Unlock()
	e.touch(id)
	e.log.Info("session woken", "session", id, "reason", reason, "took", time.Since(t0))
	e.store.AddLifecycle(ctx, id, "woken", reason, time.Now())
	return w.rec, nil
}

// waking is a hibernated session being brought back, as steps that each
// add their own cleanup (like creation).
type waking struct {
	e        *Engine
	rec      store.Session
	ws       *overlay.Workspace
	net      *sessionNet
	cleanups []func(ctx context.Context)
}

func (w *waking) undo(ctx context.Context) {
	for i := len(w.cleanups) - 1; i >= 0; i-- {
		w.cleanups[i](ctx)
	}
}

// mount mounts the workspace: a fresh tmpfs filled from the newest
// checkpoint, or the disk workspace's own upper directory.
func (w *waking) mount(ctx context.Context) error {
	rec := w.rec
	var err error
	if rec.Workspace == api.WorkspaceDisk {
		w.ws, err = overlay.Find(rec.Project, rec.Dir)
	} else {
		var cs *checkpoint.Store
		if cs, err = w.e.checkpoints(rec.ID); err != nil {
			return err
		}
		last, err := cs.Latest()
		if err != nil {
			return err
		}
		if last == nil {
			return errdefs.Conflictf("session %s has no checkpoint to wake from: its workspace is lost; remove it with `airlock rm %s`", rec.ID, rec.ID)
		}
		w.ws, err = overlay.MountFilled(rec.Project, rec.Dir, rec.Limits.WorkspaceSize, func(upper string) error {
			return cs.RestoreDir(ctx, last.ID, upper)
		})
	}
	if err != nil {
		return fmt.Errorf("mount the session's workspace: %w", err)
	}
	w.cleanups = append(w.cleanups, func(context.Context) { w.ws.Close() })
	return nil
}

// network takes a network under the session's stored policy and writes
// what the container mounts of it.
func (w *waking) network() error {
	e, rec := w.e, w.rec
	pol, err := e.policyOf(storedPolicy(rec))
	if err != nil {
		return err
	}
	if w.net, err = e.nets.Take(rec.ID, pol); err != nil {
		return err
	}
	w.cleanups = append(w.cleanups, func(context.Context) { e.dropNetwork(w.net) })
	w.rec.Network = network.Name(w.net.Key)
	if _, err := writeCABundle(rec.Dir, rec.CABundle, e.ca.PEM); err != nil {
		return err
	}
	_, err = writeNetConfig(rec.Dir, w.net.GW)
	return err
}

// container makes the session's container again from its record, with
// its layer and home from their checkpoints, and starts it.
func (w *waking) container(ctx context.Context) error {
	e := w.e
	cfg, hostCfg := e.containerSpec(w.rec, keepAlive, w.ws.Merged(), w.net.GW)
	var err error
	if hostCfg.CgroupParent, err = e.meter.CgroupParent(ctx, w.rec.ID); err != nil {
		return dockerError("ask Docker how it manages cgroups", err)
	}
	// A container of an earlier, interrupted wake.
	e.docker.ContainerRemove(ctx, "airlock-"+w.rec.ID, container.RemoveOptions{Force: true})
	created, err := e.docker.ContainerCreate(ctx, cfg, hostCfg, nil, nil, "airlock-"+w.rec.ID)
	if err != nil {
		return dockerError("create the session's container", err)
	}
	w.rec.ContainerID = created.ID
	w.cleanups = append(w.cleanups, func(ctx context.Context) {
		e.docker.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true})
		e.meter.Remove(ctx, w.rec.ID)
	})
	if err := e.restoreContainerLayer(ctx, w.rec, created.ID); err != nil {
		return err
	}
	if err := e.docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return dockerError("start the session's container", err)
	}
	if err := e.attach(ctx, w.rec, created.ID); err != nil {
		return err
	}
	return e.restoreHome(ctx, w.rec, created.ID)
}

// restoreContainerLayer fills a new container's own layer, before it
// starts, from the newest checkpoint of the session's.
func (e *Engine) restoreContainerLayer(ctx context.Context, rec store.Session, containerID string) error {
	cs, err := containerCheckpoints(rec.Dir)
	if err != nil {
		return err
	}
	last, err := cs.Latest()
	if err != nil || last == nil {
		return err
	}
	info, err := e.docker.ContainerInspect(ctx, containerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	upper := info.GraphDriver.Data["UpperDir"]
	if !overlayDriver(info.GraphDriver.Name) || upper == "" {
		e.log.Warn("the container layer is not restored: Docker's storage driver is not overlay2", "session", rec.ID)
		return nil
	}
	if err := cs.RestoreDir(ctx, last.ID, upper); err != nil {
		return fmt.Errorf("restore the session's container layer: %w", err)
	}
	return nil
}

// restoreHome fills the running container's home tmpfs from the newest
// checkpoint of the session's home.
func (e *Engine) restoreHome(ctx context.Context, rec store.Session, containerID string) error {
	hs, err := homeCheckpoints(rec.Dir)
	if err != nil {
		return err
	}
	last, err := hs.Latest()
	if err != nil || last == nil {
		return err
	}
	info, err := e.docker.ContainerInspect(ctx, containerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	if info.State == nil || info.State.Pid <= 0 {
		return errdefs.Unavailablef("the session's container stopped as it started")
	}
	home, err := openHome(info.State.Pid)
	if err != nil {
		return err
	}
	defer home.Close()
	if err := hs.Restore(ctx, last.ID, home); err != nil {
		return fmt.Errorf("restore the session's home: %w", err)
	}
	return nil
}

// awake wakes session id if it hibernates: for what writes its
// workspace (accept, discard).
func (e *Engine) awake(ctx context.Context, id string) error {
	rec, err := e.store.Session(ctx, id)
	if err != nil || rec.State != api.StateHibernated {
		return err
	}
	_, done, err := e.working(ctx, id)
	if err == nil {
		done()
	}
	return err
}

// peeks are hibernated sessions' workspaces restored for reading, by
// session id.
type peeks struct {
	mu sync.Mutex
	m  map[string]*live
}

func peekDir(sessionDir string) string { return filepath.Join(sessionDir, "peek") }

// peek is a hibernated session's workspace for reading: its newest
// checkpoint restored into a directory on disk (a disk workspace's own
// upper directory), kept until the session wakes or is removed.
func (e *Engine) peek(ctx context.Context, rec store.Session) (*live, error) {
	e.peeks.mu.Lock()
	defer e.peeks.mu.Unlock()
	if l := e.peeks.m[rec.ID]; l != nil {
		return l, nil
	}
	ws := &overlay.Workspace{Dir: rec.Dir, Lower: rec.Project, Disk: true}
	if rec.Workspace != api.WorkspaceDisk {
		cs, err := e.checkpoints(rec.ID)
		if err != nil {
			return nil, err
		}
		last, err := cs.Latest()
		if err != nil {
			return nil, err
		}
		if last == nil {
			return nil, errdefs.Conflictf("session %s has no checkpoint: its workspace is lost", rec.ID)
		}
		ws = &overlay.Workspace{Dir: peekDir(rec.Dir), Lower: rec.Project, Disk: true}
		os.RemoveAll(ws.Dir)
		if err := os.MkdirAll(ws.Upper(), 0o700); err != nil {
			return nil, err
		}
		if err := cs.RestoreDir(ctx, last.ID, ws.Upper()); err != nil {
			os.RemoveAll(ws.Dir)
			return nil, err
		}
	}
	l := &live{ws: ws, base: review.OpenBase(rec.Project, baseDir(rec.Dir)), cache: review.NewCache()}
	if e.peeks.m == nil {
		e.peeks.m = map[string]*live{}
	}
	e.peeks.m[rec.ID] = l
	return l, nil
}

// dropPeek removes a session's peek, once no review reads it.
func (e *Engine) dropPeek(id string) {
	e.peeks.mu.Lock()
	l := e.peeks.m[id]
	delete(e.peeks.m, id)
	e.peeks.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	l.base.Close()
	l.mu.Unlock()
	if l.ws.Dir != "" && filepath.Base(l.ws.Dir) == "peek" {
		os.RemoveAll(l.ws.Dir)
	}
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
	for _, open := range []func(string) (*checkpoint.Store, error){containerCheckpoints, homeCheckpoints} {
		if s, err := open(r.Dir); err == nil {
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
// one, is removed; so are its network's parts (the record keeps the
// policy).
func (e *Engine) adoptLost(ctx context.Context, r store.Session, cause error) {
	cs, err := e.checkpoints(r.ID)
	var last *checkpoint.Checkpoint
	if err == nil {
		last, err = cs.Latest()
	}
	if err != nil || last == nil {
		if r.State != api.StateFailed {
			msg := "the session's workspace is gone (its tmpfs did not survive, e.g. a host reboot) and it has no checkpoint: its changes are lost; remove it with `airlock rm " + r.ID + "`"
			e.log.Warn("session workspace lost", "session", r.ID, "err", errors.Join(cause, err))
			e.store.SetSessionState(ctx, r.ID, api.StateFailed, msg)
		}
		return
	}
	e.release(ctx, r)
	what := ""
	if last.Label != "" {
		what = " (" + last.Label + ")"
	}
	reason := fmt.Sprintf("host restarted: restored from checkpoint %d of %s%s; changes after it are lost, processes were not kept",
		last.ID, last.Time.UTC().Format(time.RFC3339), what)
	r.State, r.Error, r.ContainerID, r.Network = api.StateHibernated, "", "", ""
	if err := e.store.PutSession(ctx, r); err != nil {
		e.log.Error("record a session restored after a restart", "session", r.ID, "err", err)
		return
	}
	e.log.Warn("session workspace lost with its tmpfs: hibernated from its last checkpoint", "session", r.ID, "checkpoint", last.ID, "time", last.Time)
	e.store.AddLifecycle(ctx, r.ID, "hibernated", reason, time.Now())
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
