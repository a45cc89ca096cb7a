package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/engine/warm"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// The warm pool (engine/warm): containers made ahead of time for the
// kinds of session asked for lately. Each entry is a session in all but
// its project: its id (so its container's name, label, hostname,
// AIRLOCK_SESSION and cgroup parent are the session's from the start),
// its directory with the workspace's tmpfs and shared mount point
// (overlay.Prepare), its network taken and plugged with the gateway
// serving it under deny-all, its container made by containerSpec from
// the same record a cold create would store, started, then frozen
// (`docker pause`: the cgroup freezer, no CPU). A create that finds one
// of its kind claims it: mount the overlay (the container sees it
// through the rslave bind), serve the session's policy on the gateway,
// thaw, and it runs. The plug happens when the entry is made, not at the
// claim: a frozen container on a deny-all gateway sends nothing.
//
// Why a claimed session is a cold one: containerSpec is called with a
// record equal in every field it reads (warmRecord) — see containerSpec
// for each field. What the record leaves out (project, egress policy,
// budgets, timeouts) is not in the container: the project is the
// overlay's lower layer, mounted at the claim; the policy is the
// gateway's, set at the claim before the thaw; the rest is the engine's.
// The trust store, resolver and proxy files of the session's directory
// are written again at the claim (in place: the container binds their
// inodes). The kind (warmKey) holds every input of containerSpec that a
// request can change, the image by id.
//
// Not pooled: disk workspaces (no tmpfs to prepare; their upper
// directory is on disk and outlives the container), wakes (wake.go: the
// session's id is already fixed), restores whose snapshot changed the
// container's own files (those are written into Docker's upper
// directory before the container starts), and an engine without a
// firewall for session networks.

// warmKey is a kind of warm entry: what of a session its container is
// made from.
type warmKey struct {
	image, imageID, user, caBundle, env string
	limits                              api.Limits
}

// warmEntry is a pooled container, not yet anyone's session.
type warmEntry struct {
	key         warmKey
	id          string
	containerID string
	net         *sessionNet
	made        time.Time
}

type warmPool = warm.Pool[warmKey, *warmEntry]

func newWarmPool(e *Engine) *warmPool {
	return warm.New[warmKey, *warmEntry](warmMaker{e}, warm.Options{Size: func() int { return e.defs().WarmPool }, Logger: e.log})
}

// warmKeyOf is the kind of entry a create of plan can claim.
func warmKeyOf(p createPlan) warmKey {
	return warmKey{image: p.image, imageID: p.imageID, user: p.user, caBundle: p.caBundle,
		env: strings.Join(p.req.Env, "\x00"), limits: p.limits}
}

// warmRecord is the record of a session made from entry id of kind k as
// containerSpec reads it; a claim fills in the rest.
func (e *Engine) warmRecord(k warmKey, id string) store.Session {
	var env []string
	if k.env != "" {
		env = strings.Split(k.env, "\x00")
	}
	return store.Session{ID: id, Image: k.image, Dir: e.sessionDir(id), User: k.user, Limits: k.limits,
		Env: env, CABundle: k.caBundle}
}

// warmMaker makes and discards the pool's entries (warm.Maker).
type warmMaker struct{ e *Engine }

// Make makes an entry of kind k: started, plugged and frozen.
func (m warmMaker) Make(ctx context.Context, k warmKey) (*warmEntry, error) {
	e := m.e
	t0 := time.Now()
	w := &warmEntry{key: k, id: newID()}
	ok := false
	defer func() {
		if !ok {
			m.Discard(context.WithoutCancel(ctx), w)
		}
	}()
	rec := e.warmRecord(k, w.id)
	if err := overlay.Prepare(rec.Dir, k.limits.WorkspaceSize); err != nil {
		return nil, err
	}
	n, err := e.nets.Take(w.id, &egress.Policy{Mode: egress.DenyAll})
	if err != nil {
		return nil, err
	}
	w.net = n
	rec.Network = network.Name(n.Key)
	if _, err := writeCABundle(rec.Dir, k.caBundle, e.ca.PEM); err != nil {
		return nil, err
	}
	if _, err := writeNetConfig(rec.Dir, n.GW); err != nil {
		return nil, err
	}
	cfg, hostCfg := e.containerSpec(rec, keepAlive, (&overlay.Workspace{Dir: rec.Dir}).Merged(), n.GW)
	if hostCfg.CgroupParent, err = e.meter.CgroupParent(ctx, w.id); err != nil {
		return nil, dockerError("ask Docker how it manages cgroups", err)
	}
	created, err := e.docker.ContainerCreate(ctx, cfg, hostCfg, nil, nil, "airlock-"+w.id)
	if err != nil {
		return nil, dockerError("create a warm container", err)
	}
	w.containerID = created.ID
	if err := e.docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return nil, dockerError("start a warm container", err)
	}
	ins, err := e.docker.ContainerInspect(ctx, created.ID)
	if err != nil {
		return nil, dockerError("inspect a warm container", err)
	}
	if ins.Image != k.imageID {
		// The image's name moved to another image while the entry was
		// made: it is not of its kind.
		return nil, errdefs.Conflictf("image %s changed while a warm container was made", k.image)
	}
	if ins.State == nil || ins.State.Pid <= 0 {
		return nil, errdefs.Unavailablef("the warm container stopped as it started")
	}
	if err := e.nets.Attach(n.Key, ins.State.Pid); err != nil {
		return nil, err
	}
	if err := e.docker.ContainerPause(ctx, created.ID); err != nil {
		return nil, dockerError("freeze a warm container", err)
	}
	ok = true
	w.made = time.Now()
	e.log.Debug("warm container made", "session", w.id, "took", time.Since(t0))
	return w, nil
}

// Discard removes an entry that no session claimed: its container, its
// cgroups, its network and its directory's mounts.
func (m warmMaker) Discard(ctx context.Context, w *warmEntry) {
	e := m.e
	name := w.containerID
	if name == "" {
		name = "airlock-" + w.id
	}
	if err := e.docker.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil {
		if err := dockerError("remove container", err); !errdefs.IsNotFound(err) {
			// Never unmount under a live container; the next engine
			// start cleans it (cleanWarm).
			e.log.Warn("remove a warm container", "session", w.id, "err", err)
			return
		}
	}
	if err := e.meter.Remove(ctx, w.id); err != nil {
		e.log.Warn("remove a warm container's cgroups", "session", w.id, "err", err)
	}
	e.dropNetwork(w.net)
	if err := (&overlay.Workspace{Dir: e.sessionDir(w.id)}).Unmount(); err != nil {
		e.log.Warn("unmount a warm container's workspace", "session", w.id, "err", err)
	}
}

// claimWarm takes a warm entry for a create of plan in mode, if the pool
// has one of its kind and the mode can start from one. Having claimed
// one, the pool makes none until release is called (warm.Pool.Claim);
// without one, release does nothing.
func (e *Engine) claimWarm(p createPlan, mode createMode) (_ *warmEntry, release func()) {
	if e.warm == nil || p.workspace == api.WorkspaceDisk || p.imageID == "" || !mode.warm() {
		return nil, func() {}
	}
	w, release, _ := e.warm.Claim(warmKeyOf(p)) // nil when none is ready
	return w, release
}

// createWarm makes a session of plan from warm entry w, as create does
// cold and with the same cleanups: record, policy, mount (the thaw
// meanwhile), base.
// retry says the entry failed for a reason of its own (its directory or
// its container is gone): the caller makes the session cold instead.
func (e *Engine) createWarm(ctx context.Context, plan createPlan, mode createMode, w *warmEntry) (_ api.Session, retry bool, _ error) {
	t0 := time.Now()
	if _, err := os.Lstat((&overlay.Workspace{Dir: e.sessionDir(w.id)}).Merged()); err != nil {
		// Gone under the pool: another engine over the same state
		// directory cleaned it up as a leftover (tests reopen one).
		warmMaker{e}.Discard(context.WithoutCancel(ctx), w)
		return api.Session{}, true, err
	}
	c := &creation{e: e, mode: mode}
	ok := false
	defer func() {
		if !ok {
			c.undo(context.WithoutCancel(ctx))
		}
	}()
	if err := c.recordWarm(ctx, plan, w); err != nil {
		return api.Session{}, false, err
	}
	// The entry's network, mounts and container are the session's now,
	// and taken back as a cold session's are, in the same order: the
	// container first (never unmount under it), then the mounts, then
	// the network.
	c.net = w.net
	c.onFail(func(ctx context.Context) {
		c.removeContainer(ctx)
		if !c.containerKept {
			if err := (&overlay.Workspace{Dir: c.rec.Dir}).Unmount(); err != nil {
				e.log.Warn("unmount a session that failed to start", "session", c.rec.ID, "err", err)
			}
		}
		e.dropNetwork(c.net)
	})
	// The thaw runs while the session's policy, files and workspace are
	// put in place: nothing of the session runs in the container before
	// create returns (its main process is the idle init), and Docker's
	// unpause is the claim's longest step.
	mode.starting()
	tThaw := time.Now()
	thawc := make(chan error, 1)
	go func() { thawc <- e.docker.ContainerUnpause(context.WithoutCancel(ctx), w.containerID) }()
	var tThawed time.Time
	thaw := sync.OnceValue(func() error {
		err := <-thawc
		tThawed = time.Now()
		return err
	})
	c.onFail(func(context.Context) { thaw() })
	// What the mode puts in the running container (a restore's home,
	// through /proc/PID/root) goes in meanwhile too: a frozen
	// container's files are written as a running one's.
	runc := make(chan error, 1)
	var tRan time.Time
	go func() {
		err := mode.running(ctx, c)
		tRan = time.Now()
		runc <- err
	}()
	c.onFail(func(context.Context) { runc <- <-runc })
	tPolicy := time.Now()
	w.net.Gateway.Serve(c.rec.ID, plan.policy)
	if _, err := writeCABundle(c.rec.Dir, plan.caBundle, e.ca.PEM); err != nil {
		return api.Session{}, false, err
	}
	if _, err := writeNetConfig(c.rec.Dir, w.net.GW); err != nil {
		return api.Session{}, false, err
	}
	tMount := time.Now()
	if err := c.mount(true); err != nil {
		return api.Session{}, false, err
	}
	c.captureBase()
	tWait := time.Now()
	err := thaw()
	c.markStarted()
	if err != nil {
		e.log.Warn("a warm container could not be thawed: the session is made cold", "session", c.rec.ID, "err", err)
		return api.Session{}, true, dockerError("thaw the session's container", err)
	}
	tRun := time.Now()
	err = <-runc
	runc <- err // for the cleanup
	if err != nil {
		return api.Session{}, false, err
	}
	tBase := time.Now()
	if err := c.base(ctx); err != nil {
		return api.Session{}, false, err
	}
	ok = true
	if f, isFirst := mode.(*firstRun); isFirst {
		f.claimed = true
	}
	id := c.rec.ID
	e.log.Info("session created", "session", id, "project", plan.project, "image", plan.image, "warm", true)
	e.log.Debug("warm claim timing", "session", id, "record", tThaw.Sub(t0), "policy", tMount.Sub(tPolicy),
		"mount", tWait.Sub(tMount), "plug", time.Duration(0), "thaw", tThawed.Sub(tThaw), "thaw_wait", tRun.Sub(tWait),
		"running", tRan.Sub(tThaw), "running_wait", tBase.Sub(tRun), "base_wait", time.Since(tBase), "total", time.Since(t0), "pooled_for", t0.Sub(w.made).Round(time.Millisecond))
	return e.view(ctx, c.rec, false), false, nil
}

// recordWarm stores the session made from w as creating, as record does
// for a cold one. Cleanup: the record is deleted.
func (c *creation) recordWarm(ctx context.Context, p createPlan, w *warmEntry) error {
	e := c.e
	c.rec = e.warmRecord(w.key, w.id)
	c.rec.Project, c.rec.State, c.rec.Created = p.project, api.StateCreating, time.Now()
	c.rec.Env = p.req.Env // as given (nil and empty alike)
	c.rec.Egress, c.rec.IdleTimeout, c.rec.CPUBudget, c.rec.CostBudget = specJSON(p.policy), p.req.IdleTimeout, p.req.CPUBudget, p.req.CostBudget
	c.rec.Workspace, c.rec.HibernateAfter = p.workspace, p.req.HibernateAfter
	c.rec.Network, c.rec.ContainerID = network.Name(w.net.Key), w.containerID
	if err := e.store.PutSession(ctx, c.rec); err != nil {
		// Nothing of the entry is the session's yet.
		warmMaker{e}.Discard(context.WithoutCancel(ctx), w)
		return err
	}
	c.onFail(func(ctx context.Context) { e.store.DeleteSession(ctx, w.id) })
	return nil
}

// cleanWarm removes what warm entries of an earlier engine left (a
// kill -9 leaves them frozen): containers of this engine whose session
// the store does not know, with their cgroups and mounts. Their networks
// go with RemoveUnused. recs are the stored sessions.
func (e *Engine) cleanWarm(ctx context.Context, recs []store.Session) error {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", labelEngine+"="+e.stateDir))})
	if err != nil {
		return dockerError("list the engine's containers", err)
	}
	known := map[string]bool{}
	for _, r := range recs {
		known[r.ID] = true
	}
	for _, c := range list {
		id := c.Labels[labelSession]
		if id == "" || known[id] || c.Labels[labelEngine] != e.stateDir {
			continue
		}
		e.log.Info("removing a warm container an earlier engine left", "session", id)
		warmMaker{e}.Discard(ctx, &warmEntry{id: id, containerID: c.ID})
		known[id] = true
	}
	// An entry interrupted before its container was made left only its
	// directory (and its mounts).
	dirs, err := os.ReadDir(filepath.Join(e.stateDir, "sessions"))
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if !d.IsDir() || known[d.Name()] || !validID(d.Name()) {
			continue
		}
		e.log.Info("removing the directory of a warm container an earlier engine left", "session", d.Name())
		if err := (&overlay.Workspace{Dir: e.sessionDir(d.Name())}).Unmount(); err != nil {
			e.log.Warn("unmount a warm container's workspace", "session", d.Name(), "err", err)
		}
		if err := e.meter.Remove(ctx, d.Name()); err != nil {
			e.log.Warn("remove a warm container's cgroups", "session", d.Name(), "err", err)
		}
	}
	return nil
}

func (w *warmEntry) String() string { return fmt.Sprintf("warm %s", w.id) }
