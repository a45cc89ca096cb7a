package engine

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/docker/docker/api/types/container"
)

// Create makes a session: it mounts the workspace over the project, then
// creates and starts the container with the merged view at /workspace.
// On error nothing is left behind.
func (e *Engine) Create(ctx context.Context, req api.CreateRequest) (api.Session, error) {
	return e.create(ctx, req, idle{})
}

// create makes a session in mode, as named steps: check the request,
// record it, bring up its network, mount its workspace, create and start
// its container, and capture the project's state at start (the base).
// Each step adds its own cleanup to the creation; on error they run in
// reverse order, so nothing is left behind.
func (e *Engine) create(ctx context.Context, req api.CreateRequest, mode createMode) (s api.Session, err error) {
	t0 := time.Now()
	plan, err := e.check(ctx, req)
	if err != nil {
		return api.Session{}, err
	}
	// The pool's refill after a claim waits until this create's base is
	// captured or the create failed (made cold after all, too): the
	// makes would take the CPU the base capture needs. A git project's
	// base is walked after the create returns (review.CaptureBase).
	w, release := e.claimWarm(plan, mode)
	if w != nil {
		defer func() { go e.afterBase(s.ID, release) }() // s: the session made, warm or cold
		var retry bool
		if s, retry, err = e.createWarm(ctx, plan, mode, w); !retry {
			return s, err
		}
	}
	return e.createCold(ctx, t0, plan, mode)
}

// afterBase calls release once session id's base is recorded (at once
// when there is no such session: the create failed).
func (e *Engine) afterBase(id string, release func()) {
	if l := e.liveSession(id); l != nil {
		l.base.Ready()
	}
	release()
}

// createCold makes a session of plan with a container of its own, made
// now.
func (e *Engine) createCold(ctx context.Context, t0 time.Time, plan createPlan, mode createMode) (api.Session, error) {
	c := &creation{e: e, mode: mode}
	ok := false
	defer func() {
		if !ok {
			c.undo(context.WithoutCancel(ctx))
		}
	}()
	if err := c.record(ctx, plan); err != nil {
		return api.Session{}, err
	}
	c.network(plan.policy)
	tMount := time.Now()
	if err := c.mount(false); err != nil {
		return api.Session{}, err
	}
	c.captureBase()
	if err := c.configure(ctx, plan.caBundle); err != nil {
		return api.Session{}, err
	}
	tCreate := time.Now()
	if err := c.container(ctx); err != nil {
		return api.Session{}, err
	}
	tStart := time.Now()
	if err := c.start(ctx); err != nil {
		return api.Session{}, err
	}
	tBase := time.Now()
	if err := c.base(ctx); err != nil {
		return api.Session{}, err
	}
	ok = true
	id := c.rec.ID
	e.log.Info("session created", "session", id, "project", plan.project, "image", plan.image)
	e.log.Debug("create timing", "session", id, "checks", tMount.Sub(t0), "mount", tCreate.Sub(tMount),
		"container_create", tStart.Sub(tCreate), "container_start", tBase.Sub(tStart), "base_wait", time.Since(tBase), "total", time.Since(t0))
	return e.view(ctx, c.rec, false), nil
}

// createPlan is a checked create request with the engine's defaults
// filled in.
type createPlan struct {
	req      api.CreateRequest
	project  string // the real path
	image    string
	imageID  string // what image names now
	limits   api.Limits
	caBundle string
	user     string
	policy   *egress.Policy
	// workspace is where the workspace layer lives ("" for a tmpfs,
	// "disk"), as stored.
	workspace string
}

// check is the first step: the request is valid, the host can run it,
// and the image is there. It changes nothing.
func (e *Engine) check(ctx context.Context, req api.CreateRequest) (createPlan, error) {
	p := createPlan{req: req, image: req.Image, caBundle: req.CABundle, user: req.User}
	var err error
	if p.project, err = checkProject(req.Project); err != nil {
		return p, err
	}
	if err := overlay.Check(); err != nil {
		return p, err
	}
	if p.image == "" {
		p.image = e.defs().Image
	}
	p.limits = mergeLimits(req.Limits, e.defs().Limits)
	if err := checkLimits(p.limits); err != nil {
		return p, err
	}
	if p.imageID, err = e.checkImage(ctx, p.image); err != nil {
		return p, err
	}
	if p.caBundle == "" {
		p.caBundle = e.defs().CABundle
	}
	kind := req.Workspace
	if kind == "" {
		kind = e.defs().Workspace
	}
	if err := checkWorkspaceKind(kind); err != nil {
		return p, err
	}
	if kind == api.WorkspaceDisk {
		p.workspace = api.WorkspaceDisk
	}
	if p.user == "" {
		st, _ := os.Stat(p.project)
		sys := st.Sys().(*syscall.Stat_t)
		p.user = fmt.Sprintf("%d:%d", sys.Uid, sys.Gid)
	}
	if req.HibernateAfter > 0 && req.HibernateAfter < time.Minute {
		return p, errdefs.Invalidf("--hibernate-after %v is too short: give a minute or more (or off)", req.HibernateAfter)
	}
	if req.CPUBudget < 0 || req.CostBudget < 0 {
		return p, errdefs.Invalidf("budgets must be positive")
	}
	if p.policy, err = e.sessionPolicy(p.project, req.Egress); err != nil {
		return p, err
	}
	if err := e.checkSecrets(ctx, "", p.policy); err != nil {
		return p, err
	}
	if err := e.nets.Available(); err != nil {
		return p, errdefs.Unavailablef("sessions need the host firewall for their network policy: %v", err)
	}
	return p, nil
}

// checkWorkspaceKind refuses a workspace kind that is neither "" nor one
// of api.WorkspaceTmpfs and api.WorkspaceDisk.
func checkWorkspaceKind(kind string) error {
	switch kind {
	case "", api.WorkspaceTmpfs, api.WorkspaceDisk:
		return nil
	}
	return errdefs.Invalidf("workspace %q: give --workspace tmpfs (in memory, the default) or --workspace disk (on the state directory's disk)", kind)
}

// checkImage says, with what to do, when image is not available
// locally, and otherwise which image (by id) the name stands for.
func (e *Engine) checkImage(ctx context.Context, image string) (string, error) {
	ins, err := e.docker.ImageInspect(ctx, image)
	if err != nil {
		err = dockerError("image "+image, err)
		if errdefs.IsNotFound(err) {
			hint := "build it with `airlock image build`"
			if image != DefaultImage {
				hint = "build or pull it first, or leave out --image to use " + DefaultImage
			}
			return "", errdefs.NotFoundf("image %s is not available locally: %s", image, hint)
		}
		return "", err
	}
	return ins.ID, nil
}

// creation is a session being made: what its steps made so far, and how
// to take each back.
type creation struct {
	e    *Engine
	mode createMode
	rec  store.Session
	// cleanups take back the steps done, last first.
	cleanups []func(ctx context.Context)

	netc    chan netDone // the network step's result
	net     *sessionNet  // once received
	ws      *overlay.Workspace
	baseC   chan captured // the base step's result
	started chan struct{} // closed once the container started (or will not)
	// containerKept is set when the container could not be removed: the
	// workspace must then stay mounted under it.
	containerKept bool
}

type netDone struct {
	n   *sessionNet
	err error
}

type captured struct {
	base *review.Base
	err  error
}

func (c *creation) onFail(f func(ctx context.Context)) { c.cleanups = append(c.cleanups, f) }

func (c *creation) undo(ctx context.Context) {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i](ctx)
	}
}

// record stores the session as creating, first, so that a crash
// mid-create is cleaned up on restart (see adopt). Cleanup: the record
// is deleted.
func (c *creation) record(ctx context.Context, p createPlan) error {
	e, id := c.e, newID()
	c.rec = store.Session{
		ID: id, Project: p.project, Image: p.image, State: api.StateCreating, Created: time.Now(),
		Dir: e.sessionDir(id), User: p.user, Limits: p.limits, Env: p.req.Env, CABundle: p.caBundle,
		Egress: specJSON(p.policy), IdleTimeout: p.req.IdleTimeout, CPUBudget: p.req.CPUBudget, CostBudget: p.req.CostBudget,
		Workspace: p.workspace, HibernateAfter: p.req.HibernateAfter,
	}
	if err := e.store.PutSession(ctx, c.rec); err != nil {
		return err
	}
	c.onFail(func(ctx context.Context) { e.store.DeleteSession(ctx, id) })
	return nil
}

// network brings up the session's network and its egress in the
// background, while the workspace is mounted; configure waits for it.
// Cleanup: the network is stopped and released.
func (c *creation) network(pol *egress.Policy) {
	c.netc = make(chan netDone, 1)
	go func() {
		n, err := c.e.nets.Take(c.rec.ID, pol)
		c.netc <- netDone{n, err}
	}()
	c.onFail(func(context.Context) {
		if c.net == nil {
			c.net = (<-c.netc).n
		}
		c.e.dropNetwork(c.net)
	})
}

// mount mounts the workspace over the project, filled first as the mode
// says; prepared, in what a warm entry prepared (whose cleanup is the
// claim's). Cleanup: whatever of it is mounted is unmounted and the
// session's directory removed, unless the container could not be removed
// (never unmount under a live container). The cleanup comes first: a fill
// that fails may leave the tmpfs busy for a moment, which the mount's own
// cleanup does not wait for.
func (c *creation) mount(prepared bool) error {
	if prepared {
		ws, err := overlay.MountPrepared(c.rec.Project, c.rec.Dir, c.mode.fillWorkspace)
		if err != nil {
			return err
		}
		c.ws = ws
		return nil
	}
	c.onFail(func(context.Context) {
		if c.containerKept {
			return
		}
		ws := &overlay.Workspace{Dir: c.rec.Dir, Lower: c.rec.Project, Disk: c.rec.Workspace == api.WorkspaceDisk}
		if err := ws.Unmount(); err != nil {
			c.e.log.Warn("unmount a session that failed to start", "session", c.rec.ID, "err", err)
		}
	})
	var ws *overlay.Workspace
	var err error
	if c.rec.Workspace == api.WorkspaceDisk {
		ws, err = overlay.MountDisk(c.rec.Project, c.rec.Dir, c.mode.fillWorkspace)
	} else {
		ws, err = overlay.MountFilled(c.rec.Project, c.rec.Dir, c.rec.Limits.WorkspaceSize, c.mode.fillWorkspace)
	}
	if err != nil {
		return err
	}
	c.ws = ws
	return nil
}

// captureBase starts the base step: the project's state is captured
// while Docker creates and starts the container, and is complete before
// the first command runs (see base). Cleanup: the capture is waited for.
func (c *creation) captureBase() {
	c.baseC = make(chan captured, 1)
	c.started = make(chan struct{})
	// A restored workspace's files are the snapshot's, not writes
	// racing the capture: the base is the project alone.
	upper := ""
	if c.mode.racesBase() {
		upper = c.ws.Upper()
	}
	go func() {
		b, err := review.CaptureBase(c.rec.Project, baseDir(c.rec.Dir), upper, c.started)
		c.baseC <- captured{b, err}
	}()
	c.onFail(func(context.Context) {
		c.markStarted()
		<-c.baseC
	})
}

func (c *creation) markStarted() {
	select {
	case <-c.started:
	default:
		close(c.started)
	}
}

// configure writes what the container mounts of the session's
// directory (trust store, resolver, proxy settings) once its network is
// up, and records the network.
func (c *creation) configure(ctx context.Context, caBundle string) error {
	if _, err := writeCABundle(c.rec.Dir, caBundle, c.e.ca.PEM); err != nil {
		return err
	}
	nd := <-c.netc
	if nd.err != nil {
		c.netc <- nd // for the cleanup
		return nd.err
	}
	c.net = nd.n
	c.rec.Network = network.Name(c.net.Key)
	if err := c.e.store.PutSession(ctx, c.rec); err != nil {
		return err
	}
	_, err := writeNetConfig(c.rec.Dir, c.net.GW)
	return err
}

// container creates the session's container, as the mode wants it.
// Cleanup: the container is removed with the session's cgroups.
func (c *creation) container(ctx context.Context) error {
	e := c.e
	// Cleaned up from here: a create that failed may have left a
	// container by its name, and cgroups.
	c.onFail(c.removeContainer)
	cfg, hostCfg := e.containerSpec(c.rec, c.mode.command(), c.ws.Merged(), c.net.GW)
	var err error
	if hostCfg.CgroupParent, err = e.meter.CgroupParent(ctx, c.rec.ID); err != nil {
		return dockerError("ask Docker how it manages cgroups", err)
	}
	c.mode.configure(cfg, hostCfg)
	created, err := e.docker.ContainerCreate(ctx, cfg, hostCfg, nil, nil, "airlock-"+c.rec.ID)
	if err != nil {
		return dockerError("create the session's container", err)
	}
	c.rec.ContainerID = created.ID
	if err := e.store.PutSession(ctx, c.rec); err != nil {
		return err
	}
	return c.mode.created(ctx, c)
}

func (c *creation) removeContainer(ctx context.Context) {
	e := c.e
	name := c.rec.ContainerID
	if name == "" {
		name = "airlock-" + c.rec.ID
	}
	if err := e.docker.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil {
		if err := dockerError("remove container", err); !errdefs.IsNotFound(err) {
			e.log.Warn("remove the container of a session that failed to start", "session", c.rec.ID, "err", err)
			c.containerKept = true
			return
		}
	}
	if err := e.meter.Remove(ctx, c.rec.ID); err != nil {
		e.log.Warn("remove a session's cgroups", "session", c.rec.ID, "err", err)
	}
}

// start starts the container and plugs it into its network. A container
// that does not start is explained (startFailed).
func (c *creation) start(ctx context.Context) error {
	e, id := c.e, c.rec.ContainerID
	c.mode.starting()
	err := e.docker.ContainerStart(ctx, id, container.StartOptions{})
	c.markStarted()
	if err != nil {
		return e.startFailed(ctx, c.rec, c.mode, dockerError("start the session's container", err))
	}
	if err := e.attach(ctx, c.rec, id); err != nil {
		return e.startFailed(ctx, c.rec, c.mode, err)
	}
	return c.mode.running(ctx, c)
}

// base waits for the base, marks the session running and keeps it live;
// the start contents the git index does not give are captured in the
// background, while cheap.
func (c *creation) base(ctx context.Context) error {
	e, id := c.e, c.rec.ID
	cb := <-c.baseC
	c.baseC <- cb // for the cleanup
	if cb.err != nil {
		return fmt.Errorf("record the project's state at start: %w", cb.err)
	}
	c.rec.State = api.StateRunning
	if err := e.store.PutSession(ctx, c.rec); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(context.Background())
	captureDone := make(chan struct{})
	e.mu.Lock()
	l := &live{ws: c.ws, base: cb.base, cache: review.NewCache(), stopCapture: func() { cancel(); <-captureDone }, net: c.net, sums: e.watchWorkspace(id, c.ws)}
	e.sessions[id] = l
	e.mu.Unlock()
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer close(captureDone)
		if err := cb.base.CaptureContent(cctx, c.ws.Upper(), baseMaxFile, baseBudget); err != nil && cctx.Err() == nil {
			e.log.Warn("base content capture", "session", id, "err", err)
		}
		l.sums.captured.Store(true)
	}()
	return nil
}
