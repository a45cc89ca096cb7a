package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/meter"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/docker/docker/api/types/container"
)

func checkProject(p string) (string, error) {
	if p == "" {
		return "", errdefs.Invalidf("no project given: pass --project DIR (the folder the agent works on)")
	}
	if !filepath.IsAbs(p) {
		return "", errdefs.Invalidf("project %q must be an absolute path", p)
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", errdefs.NotFoundf("project %s does not exist: check the path given to --project", p)
	}
	if err != nil {
		return "", errdefs.Invalidf("project %s: %v", p, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", errdefs.Invalidf("project %s: %v", p, err)
	}
	if !st.IsDir() {
		return "", errdefs.Invalidf("project %s is not a directory: point --project at the folder to work on", p)
	}
	return real, nil
}

func mergeLimits(req, def api.Limits) api.Limits {
	if req.CPUs == 0 {
		req.CPUs = def.CPUs
	}
	if req.Memory == 0 {
		req.Memory = def.Memory
	}
	if req.Pids == 0 {
		req.Pids = def.Pids
	}
	if req.WorkspaceSize == 0 {
		req.WorkspaceSize = def.WorkspaceSize
	}
	return req
}

func checkLimits(l api.Limits) error {
	switch {
	case l.CPUs < 0.01:
		return errdefs.Invalidf("--cpus %.2f is too small: give at least 0.01", l.CPUs)
	case l.WorkspaceSize < 1<<20:
		return errdefs.Invalidf("--workspace-size must be at least 1m")
	case l.Memory < l.WorkspaceSize+64<<20:
		return errdefs.Invalidf("--memory (%d MiB) must exceed --workspace-size (%d MiB) by at least 64 MiB: workspace writes count against the session's memory",
			l.Memory>>20, l.WorkspaceSize>>20)
	case l.Pids < 16:
		return errdefs.Invalidf("--pids %d is too small: give at least 16", l.Pids)
	}
	return nil
}

// teardown removes a session's container and mounts; what is gone already
// is fine.
func (e *Engine) teardown(ctx context.Context, rec store.Session) error {
	var errs []error
	name := rec.ContainerID
	if name == "" {
		name = "airlock-" + rec.ID
	}
	if err := e.docker.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil {
		if err := dockerError("remove container", err); !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && rec.Network != "" {
		e.nets.Release(network.KeyOf(rec.Network))
	}
	if len(errs) == 0 {
		if err := e.meter.Remove(ctx, rec.ID); err != nil {
			e.log.Warn("remove a session's cgroups", "session", rec.ID, "err", err)
		}
	}
	if len(errs) == 0 { // never unmount under a live container
		ws := &overlay.Workspace{Dir: rec.Dir, Lower: rec.Project, Disk: rec.Workspace == api.WorkspaceDisk}
		if err := ws.Unmount(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// What the base keeps of file contents the git index does not give.
const (
	baseMaxFile = 1 << 20
	baseBudget  = 64 << 20
)

func baseDir(sessionDir string) string { return filepath.Join(sessionDir, "base") }

// Remove ends a session: container removed, workspace unmounted, its
// changes gone, its records deleted.
func (e *Engine) Remove(ctx context.Context, id string) error {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return err
	}
	if err := review.Recover(e.journalPath(rec.ID)); err != nil {
		return err
	}
	e.timeline.Settle(rec.ID) // a command's checkpoint still being written
	if l := e.liveSession(rec.ID); l != nil {
		if l.stopCapture != nil {
			l.stopCapture()
		}
		l.mu.Lock() // no review or accept may be using the base
		l.base.Close()
		l.mu.Unlock()
		l.sums.close()
		e.nets.Stop(l.net)
	}
	e.dropPeek(rec.ID)
	if err := e.teardown(ctx, rec); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.sessions, rec.ID)
	e.mu.Unlock()
	e.removeCheckpoints(rec.ID)
	e.secrets.Forget(rec.ID)
	e.ports.Forget(rec.ID)
	if err := e.timeline.Remove(rec.ID); err != nil {
		e.log.Warn("remove a session's checkpoints", "session", rec.ID, "err", err)
	}
	e.log.Info("session removed", "session", rec.ID)
	return e.store.DeleteSession(ctx, rec.ID)
}

// List returns every session with its change count.
func (e *Engine) List(ctx context.Context) ([]api.Session, error) {
	recs, err := e.store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Session, 0, len(recs))
	for _, r := range recs {
		out = append(out, e.view(ctx, r, true))
	}
	return out, nil
}

// Exists reports, as a not-found error, whether id names a session.
func (e *Engine) Exists(ctx context.Context, id string) error {
	_, err := e.store.Session(ctx, id)
	return err
}

// Get returns one session by id or unique id prefix.
func (e *Engine) Get(ctx context.Context, id string) (api.Session, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Session{}, err
	}
	return e.view(ctx, rec, true), nil
}

func (e *Engine) view(ctx context.Context, r store.Session, count bool) api.Session {
	s := api.Session{
		ID: r.ID, Project: r.Project, Image: r.Image, State: r.State, Created: r.Created,
		ContainerID: r.ContainerID, User: r.User, Limits: r.Limits, Error: r.Error, Changed: -1,
		Egress: storedPolicy(r), IdleTimeout: r.IdleTimeout, CPUBudget: r.CPUBudget, CostBudget: r.CostBudget,
	}
	if s.IdleTimeout == 0 {
		s.IdleTimeout = e.defs().IdleTimeout
	}
	s.HibernateAfter = r.HibernateAfter
	if s.HibernateAfter == 0 {
		s.HibernateAfter = e.defs().HibernateAfter
	}
	s.WorkspaceKind = api.WorkspaceTmpfs
	if r.Workspace == api.WorkspaceDisk {
		s.WorkspaceKind = api.WorkspaceDisk
	}
	if r.State == api.StateHibernated {
		s.Hibernation = e.hibernation(ctx, r)
	}
	if used, err := e.meter.CPU(r.ID); err == nil {
		s.CPUSeconds, s.CostUSD = used.Seconds(), meter.Cost(used, e.defs().CostPerCoreHour)
	}
	if r.State == api.StateRunning {
		s.IdleFor = e.idleFor(r.ID).Round(time.Second)
	}
	s.Agent, _ = e.store.LastAgent(context.Background(), r.ID)
	if l := e.liveSession(r.ID); l != nil {
		if u, err := l.ws.Usage(); err == nil {
			s.Workspace = &api.Workspace{Used: u.Used, Size: u.Size, Full: u.Full, Files: u.Files}
		}
		if count {
			// Counted, not listed: a listing's memory does not grow with
			// what the sessions hold, and it walks on the review slots.
			if n, err := e.changeCount(ctx, r.ID, l, r.Project); err == nil {
				s.Changed = n
			}
		} else {
			s.Changed = 0
		}
	}
	return s
}

func (e *Engine) liveSession(id string) *live {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sessions[id]
}
