package engine

import (
	"context"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"net/netip"
	"time"
)

// adopt reconciles stored sessions with the system after a (re)start.
func (e *Engine) adopt(ctx context.Context) error {
	recs, err := e.store.Sessions(ctx)
	if err != nil {
		return err
	}
	var found map[string]container.Summary
	if len(recs) > 0 {
		if found, err = e.sessionContainers(ctx); err != nil {
			return err
		}
	}
	var installed map[string]bool // the firewall rules still in place, listed once
	for _, r := range recs {
		c, ok := found[r.ID]
		if ok && r.Network != "" && installed == nil {
			installed = e.nets.Installed()
		}
		e.adoptOne(ctx, r, c, ok, installed)
	}
	if err := e.store.InterruptTurns(ctx); err != nil {
		return err
	}
	used := map[string]bool{}
	if recs, err := e.store.Sessions(ctx); err == nil {
		// Warm containers are no one's session: the previous engine's
		// go (their networks with the unused ones, below).
		if err := e.cleanWarm(ctx, recs); err != nil {
			e.log.Warn("clean up warm containers", "err", err)
		}
		for _, r := range recs {
			used[network.KeyOf(r.Network)] = true
		}
		stale, err := e.nets.Unused(used)
		if err != nil {
			e.log.Warn("clean up networks", "err", err)
		}
		// Removed in the background: some 15 iptables and netlink calls
		// each (~180 ms), which kept an engine restarting after a reboot
		// from answering for 3.6 s with 20 sessions (a session woken
		// meanwhile under its old network's key releases it first).
		e.nets.ReleaseLater(stale)
	}
	return e.settleCommands(ctx)
}

// sessionContainers are the engine's session containers by session id:
// one list call instead of an inspect per session keeps re-adoption fast
// with many sessions.
func (e *Engine) sessionContainers(ctx context.Context) (map[string]container.Summary, error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", labelSession))})
	if err != nil {
		return nil, dockerError("list session containers", err)
	}
	out := map[string]container.Summary{}
	for _, c := range list {
		out[c.Labels[labelSession]] = c
	}
	return out, nil
}

// adoptOne takes session r back: a creation that was interrupted is
// cleaned up, a workspace that is gone fails the session, and otherwise
// the session is live again with its egress and its container (c, when
// found) as they were.
func (e *Engine) adoptOne(ctx context.Context, r store.Session, c container.Summary, found bool, installed map[string]bool) {
	if r.State == api.StateCreating {
		e.log.Warn("cleaning up a session whose creation was interrupted", "session", r.ID)
		e.teardown(ctx, r)
		e.store.DeleteSession(ctx, r.ID)
		return
	}
	if r.State == api.StateHibernated {
		// What an interrupted wake may have left: the next wake makes
		// it again.
		if found {
			e.release(ctx, r)
		}
		if r.Workspace != api.WorkspaceDisk {
			(&overlay.Workspace{Dir: r.Dir, Lower: r.Project}).Close()
		}
		return
	}
	ws, err := overlay.Find(r.Project, r.Dir)
	if err != nil {
		e.adoptLost(ctx, r, err)
		return
	}
	if ws.Disk && !found {
		e.adoptDisk(ctx, r, ws)
		return
	}
	if err := review.Recover(e.journalPath(r.ID)); err != nil {
		e.log.Error("recover an interrupted accept", "session", r.ID, "err", err)
	}
	l := &live{ws: ws, base: review.OpenBase(r.Project, baseDir(r.Dir)), cache: review.NewCache(), sums: e.watchWorkspace(r.ID, ws)}
	l.sums.captured.Store(true) // what the previous engine captured is all there is
	e.sessions[r.ID] = l
	if !found {
		e.store.SetSessionState(ctx, r.ID, api.StateStopped, "the session's container is gone; its workspace is intact and can still be reviewed")
		return
	}
	if r.Network != "" {
		// The proxy, DNS and firewall rules went with the previous
		// engine; until they are back the session has no way out.
		if err := e.restartEgress(ctx, r, l, installed[network.KeyOf(r.Network)]); err != nil {
			e.log.Error("restart a session's egress", "session", r.ID, "err", err)
		}
	}
	e.reconcile(ctx, r, c.State, c.Labels[labelFirst] != "", ws.Merged())
}

// reconcile brings an adopted session's container, in Docker's state, back
// to the session's.
func (e *Engine) reconcile(ctx context.Context, r store.Session, state string, first bool, merged string) {
	switch {
	case state == "paused" && r.State == api.StateRunning:
		// Frozen by an engine that died before it thawed it (a
		// snapshot being taken): the session was running.
		if err := e.docker.ContainerUnpause(ctx, r.ContainerID); err != nil {
			e.log.Warn("thaw a session frozen by an interrupted snapshot", "session", r.ID, "err", err)
			e.store.SetSessionState(ctx, r.ID, api.StatePaused, "")
		}
	case state == "paused":
		// Paused it was, paused it stays: new work wakes it.
		if r.State != api.StatePaused {
			e.store.SetSessionState(ctx, r.ID, api.StatePaused, "")
		}
	case state == "running":
		if r.State != api.StateRunning {
			e.store.SetSessionState(ctx, r.ID, api.StateRunning, "")
		}
	default:
		// The container exited (e.g. Docker restarted); the mounts are
		// still here, so start it again. One whose main process ran
		// the first command is made again, idle: a restart would run
		// that command a second time.
		var err error
		if first {
			err = e.recreate(ctx, &r, merged)
		} else {
			err = e.docker.ContainerStart(ctx, r.ContainerID, container.StartOptions{})
			if err == nil && r.Network != "" {
				err = e.attach(ctx, r, r.ContainerID)
			}
		}
		if err != nil {
			e.store.SetSessionState(ctx, r.ID, api.StateStopped, "the session's container could not be restarted: "+err.Error())
		} else {
			e.store.SetSessionState(ctx, r.ID, api.StateRunning, "")
		}
	}
}

// restartEgress brings a re-adopted session's egress back up with its
// stored policy.
func (e *Engine) restartEgress(ctx context.Context, r store.Session, l *live, rulesInPlace bool) error {
	pol, err := e.policyOf(storedPolicy(r))
	if err != nil {
		return err
	}
	n, err := e.nets.Open(network.KeyOf(r.Network), r.ID, pol, rulesInPlace)
	if err != nil {
		return err
	}
	l.net = n
	return nil
}

// recreate replaces a session's stopped container by a new idle one over
// the same workspace.
func (e *Engine) recreate(ctx context.Context, r *store.Session, merged string) error {
	if err := e.docker.ContainerRemove(ctx, r.ContainerID, container.RemoveOptions{Force: true}); err != nil {
		return err
	}
	var gw netip.Addr
	if r.Network != "" {
		var err error
		if gw, err = e.gateway(ctx, r.Network); err != nil {
			return err
		}
	}
	cfg, hostCfg := e.containerSpec(*r, keepAlive, merged, gw)
	var err error
	if hostCfg.CgroupParent, err = e.meter.CgroupParent(ctx, r.ID); err != nil {
		return err
	}
	created, err := e.docker.ContainerCreate(ctx, cfg, hostCfg, nil, nil, "airlock-"+r.ID)
	if err != nil {
		return err
	}
	r.ContainerID = created.ID
	if err := e.store.PutSession(ctx, *r); err != nil {
		return err
	}
	if err := e.docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return err
	}
	if r.Network != "" {
		return e.attach(ctx, *r, created.ID)
	}
	return nil
}

// settleCommands finishes the records of commands that were running when
// the previous engine stopped: their exit codes come from Docker.
func (e *Engine) settleCommands(ctx context.Context) error {
	cmds, err := e.store.RunningCommands(ctx)
	if err != nil {
		return err
	}
	for _, c := range cmds {
		c := c
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			e.awaitOrphan(c)
		}()
	}
	return nil
}

// awaitOrphan waits for a command whose output stream died with the
// previous engine and records its exit code.
func (e *Engine) awaitOrphan(c store.Command) {
	ctx := context.Background()
	if c.ExecID == firstExecID {
		// Its exit code went out on the output stream, now lost.
		e.store.FinishCommand(ctx, c.ID, "interrupted", nil, time.Now())
		return
	}
	for {
		ins, err := e.docker.ContainerExecInspect(ctx, c.ExecID)
		if err != nil {
			e.store.FinishCommand(ctx, c.ID, "interrupted", nil, time.Now())
			return
		}
		if !ins.Running {
			code := ins.ExitCode
			e.store.FinishCommand(ctx, c.ID, "exited", &code, time.Now())
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}
