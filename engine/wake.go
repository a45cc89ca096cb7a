package engine

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/criu"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/docker/docker/api/types/container"
)

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
	if w.processes != "" {
		reason += "; " + w.processes
	}
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
	// processes says what became of processes kept at hibernation:
	// restored, or why not (the session then wakes without them).
	processes string
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
		var last *checkpoint.Checkpoint
		if last, err = cs.Latest(); err != nil {
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
// its layer from its checkpoint, and starts it with the processes kept
// at hibernation, or else afresh with its home from its checkpoint.
func (w *waking) container(ctx context.Context) error {
	if !criu.Kept(w.rec.Dir) {
		return w.start(ctx, false)
	}
	err := w.start(ctx, true)
	os.RemoveAll(criu.Dir(w.rec.Dir)) // used once, restored or not
	if err == nil {
		w.processes = "processes restored"
		return nil
	}
	w.e.log.Warn("restore a session's processes: waking it without them", "session", w.rec.ID, "err", err)
	w.processes = fmt.Sprintf("processes not restored (%v): they were stopped", err)
	return w.start(ctx, false)
}

// start makes and starts the container, from the process checkpoint when
// processes says so (CRIU restores the home tmpfs with them).
func (w *waking) start(ctx context.Context, processes bool) error {
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
	if processes {
		if err := criu.Restore(ctx, e.docker, w.rec.Dir, created.ID); err != nil {
			return err
		}
		return e.attach(ctx, w.rec, created.ID)
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
