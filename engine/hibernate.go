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
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/criu"
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

func containerCheckpoints(dir string) (*checkpoint.Store, error) {
	return checkpoint.Open(filepath.Join(dir, "checkpoints", "container"))
}

func homeCheckpoints(dir string) (*checkpoint.Store, error) {
	return checkpoint.Open(filepath.Join(dir, "checkpoints", "home"))
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
