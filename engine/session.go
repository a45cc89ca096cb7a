package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/meter"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"
)

// Container labels by which the engine finds its containers again.
const (
	labelSession = "dev.airlock.session"
	labelEngine  = "dev.airlock.engine"
	labelFirst   = "dev.airlock.first" // the main process runs the first command
)

// Where things are inside a session's container.
const (
	workspacePath = "/workspace"
	homePath      = "/home/airlock"
	caPath        = "/etc/airlock/ca-bundle.pem"
	caFile        = "ca-bundle.pem" // in the session's directory
)

// keepAlive is the container's main process: it idles until stopped, so
// that commands run as execs and the container outlives each of them.
var keepAlive = []string{"/bin/sh", "-c", idleScript}

const idleScript = "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"

// containerSpec is the container of a session: cmd as its main process,
// the merged workspace at /workspace, hardened and limited. A session's
// container can be made again from its record alone.
func (e *Engine) containerSpec(rec store.Session, cmd []string, merged string, gw netip.Addr) (*container.Config, *container.HostConfig) {
	env := append([]string{"HOME=" + homePath, "AIRLOCK_SESSION=" + rec.ID}, rec.Env...)
	mounts := []mount.Mount{{Type: mount.TypeBind, Source: merged, Target: workspacePath}}
	netMode := container.NetworkMode("")
	var sysctls map[string]string
	if rec.Network != "" {
		// The session's own network; its tools use the engine's proxy
		// and DNS, and it has no IPv6.
		// Docker gives it no network; the engine plugs it into the
		// session's (see network.Net) once it runs.
		netMode = container.NetworkMode("none")
		env = append(env, proxyEnv(gw)...)
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(rec.Dir, "resolv.conf"), Target: "/etc/resolv.conf", ReadOnly: true},
			// apt reads no environment under sudo: tell it in its config.
			mount.Mount{Type: mount.TypeBind, Source: filepath.Join(rec.Dir, "apt-proxy.conf"), Target: "/etc/apt/apt.conf.d/99airlock-proxy", ReadOnly: true})
		sysctls = map[string]string{"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
	}
	if rec.CABundle != "" || rec.Network != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(rec.Dir, caFile), Target: caPath, ReadOnly: true})
		env = append(env, caEnv()...)
	}
	init := true
	pids := rec.Limits.Pids
	return &container.Config{
			Image:      rec.Image,
			Cmd:        cmd,
			Entrypoint: []string{},
			WorkingDir: workspacePath,
			User:       rec.User,
			Env:        env,
			Labels:     map[string]string{labelSession: rec.ID, labelEngine: e.stateDir},
			Hostname:   "airlock-" + rec.ID[:8],
		}, &container.HostConfig{
			NetworkMode: netMode,
			Sysctls:     sysctls,
			Mounts:      mounts,
			Init:        &init,
			CapDrop:     []string{"ALL"},
			CapAdd:      capAdd,
			SecurityOpt: []string{"no-new-privileges"},
			Tmpfs:       map[string]string{homePath: "mode=1777,size=512m"},
			Resources: container.Resources{
				NanoCPUs:   int64(rec.Limits.CPUs * 1e9),
				Memory:     rec.Limits.Memory,
				MemorySwap: rec.Limits.Memory, // no swap: the cap is real
				PidsLimit:  &pids,
			},
		}
}

// capAdd is what sessions keep of Docker's default capabilities: enough to
// install packages and change file owners as root, without raw sockets,
// device nodes, chroot, file capabilities or audit writes.
var capAdd = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP", "NET_BIND_SERVICE"}

// Create makes a session: it mounts the workspace over the project, then
// creates and starts the container with the merged view at /workspace.
// On error nothing is left behind.
func (e *Engine) Create(ctx context.Context, req api.CreateRequest) (api.Session, error) {
	return e.create(ctx, req, nil, nil)
}

// create makes a session; first, when not nil, is run by the container's
// main process as it starts; from, when not nil, fills the workspace and
// the container from a snapshot before they are used.
func (e *Engine) create(ctx context.Context, req api.CreateRequest, first *firstRun, from *restoreSource) (api.Session, error) {
	t0 := time.Now()
	project, err := checkProject(req.Project)
	if err != nil {
		return api.Session{}, err
	}
	if err := overlay.Check(); err != nil {
		return api.Session{}, err
	}
	image := req.Image
	if image == "" {
		image = e.defs().Image
	}
	limits := mergeLimits(req.Limits, e.defs().Limits)
	if err := checkLimits(limits); err != nil {
		return api.Session{}, err
	}
	if _, err := e.docker.ImageInspect(ctx, image); err != nil {
		err = dockerError("image "+image, err)
		if errdefs.IsNotFound(err) {
			hint := "build it with `airlock image build`"
			if image != DefaultImage {
				hint = "build or pull it first, or leave out --image to use " + DefaultImage
			}
			return api.Session{}, errdefs.NotFoundf("image %s is not available locally: %s", image, hint)
		}
		return api.Session{}, err
	}
	caBundle := req.CABundle
	if caBundle == "" {
		caBundle = e.defs().CABundle
	}
	user := req.User
	if user == "" {
		st, _ := os.Stat(project)
		sys := st.Sys().(*syscall.Stat_t)
		user = fmt.Sprintf("%d:%d", sys.Uid, sys.Gid)
	}

	if req.CPUBudget < 0 || req.CostBudget < 0 {
		return api.Session{}, errdefs.Invalidf("budgets must be positive")
	}
	pol, err := e.policyOf(req.Egress)
	if err != nil {
		return api.Session{}, err
	}
	if err := e.checkSecrets(ctx, "", pol); err != nil {
		return api.Session{}, err
	}
	if err := e.nets.Available(); err != nil {
		return api.Session{}, errdefs.Unavailablef("sessions need the host firewall for their network policy: %v", err)
	}

	id := newID()
	rec := store.Session{
		ID: id, Project: project, Image: image, State: api.StateCreating, Created: time.Now(),
		Dir: e.sessionDir(id), User: user, Limits: limits, Env: req.Env, CABundle: caBundle,
		Egress: specJSON(pol), IdleTimeout: req.IdleTimeout, CPUBudget: req.CPUBudget, CostBudget: req.CostBudget,
	}
	// Recorded first, so that a crash mid-create is cleaned up on restart.
	if err := e.store.PutSession(ctx, rec); err != nil {
		return api.Session{}, err
	}
	ok := false
	defer func() {
		if !ok {
			e.teardown(context.WithoutCancel(ctx), rec)
			e.store.DeleteSession(context.WithoutCancel(ctx), id)
		}
	}()
	// The session's network and its egress come up while the workspace
	// is mounted.
	type netDone struct {
		n   *sessionNet
		err error
	}
	netc := make(chan netDone, 1)
	go func() {
		n, err := e.nets.Take(id, pol)
		netc <- netDone{n, err}
	}()
	var netUp *sessionNet
	defer func() {
		if !ok {
			if netUp == nil {
				netUp = (<-netc).n
			}
			e.dropNetwork(netUp)
		}
	}()
	tMount := time.Now()
	var fill func(string) error
	upperForBase := ""
	if from != nil {
		fill = from.fillWorkspace
	}
	ws, err := overlay.MountFilled(project, rec.Dir, limits.WorkspaceSize, fill)
	if err != nil {
		return api.Session{}, err
	}
	if from == nil {
		upperForBase = ws.Upper()
	}
	// The base is captured while Docker creates and starts the container,
	// and is complete before the first command runs.
	type captured struct {
		base *review.Base
		err  error
	}
	baseDone := make(chan captured, 1)
	containerStarted := make(chan struct{})
	var startedOnce sync.Once
	markStarted := func() { startedOnce.Do(func() { close(containerStarted) }) }
	defer markStarted()
	go func() {
		// A restored workspace's files are the snapshot's, not writes
		// racing the capture: the base is the project alone.
		b, err := review.CaptureBase(project, baseDir(rec.Dir), upperForBase, containerStarted)
		baseDone <- captured{b, err}
	}()
	defer func() {
		if !ok {
			<-baseDone
		}
	}()
	if _, err := writeCABundle(rec.Dir, caBundle, e.ca.PEM); err != nil {
		return api.Session{}, err
	}
	cmd := keepAlive
	if first != nil {
		cmd = first.cmd()
	}
	nd := <-netc
	if nd.err != nil {
		netc <- nd // for the deferred cleanup
		return api.Session{}, nd.err
	}
	netUp = nd.n
	gw := netUp.GW
	rec.Network = network.Name(netUp.Key)
	if err := e.store.PutSession(ctx, rec); err != nil {
		return api.Session{}, err
	}
	if _, err := writeNetConfig(rec.Dir, gw); err != nil {
		return api.Session{}, err
	}
	tCreate := time.Now()
	cfg, hostCfg := e.containerSpec(rec, cmd, ws.Merged(), gw)
	if hostCfg.CgroupParent, err = e.meter.CgroupParent(ctx, rec.ID); err != nil {
		return api.Session{}, dockerError("ask Docker how it manages cgroups", err)
	}
	if first != nil {
		cfg.Labels[labelFirst] = "1"
		// The first command's output goes to its caller, not to a log.
		hostCfg.LogConfig = container.LogConfig{Type: "none"}
	}
	created, err := e.docker.ContainerCreate(ctx, cfg, hostCfg, nil, nil, "airlock-"+id)
	if err != nil {
		return api.Session{}, dockerError("create the session's container", err)
	}
	rec.ContainerID = created.ID
	if err := e.store.PutSession(ctx, rec); err != nil {
		return api.Session{}, err
	}
	if from != nil {
		info, err := e.docker.ContainerInspect(ctx, created.ID)
		if err != nil {
			return api.Session{}, dockerError("inspect the session's container", err)
		}
		if !overlayDriver(info.GraphDriver.Name) {
			return api.Session{}, errdefs.Unavailablef("Docker stores containers with the %q storage driver; restoring a snapshot needs overlay2 (the default)", info.GraphDriver.Name)
		}
		if err := from.fillContainer(info.GraphDriver.Data["UpperDir"]); err != nil {
			return api.Session{}, err
		}
	}
	if first != nil {
		// Attached before the start, as `docker run` does, so that no
		// output is missed.
		first.attach, err = e.docker.ContainerAttach(ctx, created.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
		if err != nil {
			return api.Session{}, dockerError("attach to the session's container", err)
		}
		defer func() {
			if !ok {
				first.attach.Close()
			}
		}()
	}
	tStart := time.Now()
	if first != nil {
		first.started = tStart
	}
	err = e.docker.ContainerStart(ctx, created.ID, container.StartOptions{})
	markStarted()
	if err != nil {
		return api.Session{}, e.startFailed(ctx, rec, first, dockerError("start the session's container", err))
	}
	if err := e.attach(ctx, rec, created.ID); err != nil {
		return api.Session{}, e.startFailed(ctx, rec, first, err)
	}
	if from != nil {
		info, err := e.docker.ContainerInspect(ctx, created.ID)
		if err != nil {
			return api.Session{}, dockerError("inspect the session's container", err)
		}
		if info.State == nil || info.State.Pid == 0 {
			return api.Session{}, fmt.Errorf("the restored session's container stopped as it started")
		}
		if err := from.fillHome(info.State.Pid); err != nil {
			return api.Session{}, err
		}
	}
	tBase := time.Now()
	cb := <-baseDone
	baseDone <- cb // for the deferred cleanup
	if cb.err != nil {
		return api.Session{}, fmt.Errorf("record the project's state at start: %w", cb.err)
	}
	rec.State = api.StateRunning
	if err := e.store.PutSession(ctx, rec); err != nil {
		return api.Session{}, err
	}
	// Start contents the git index does not give, while cheap.
	cctx, cancel := context.WithCancel(context.Background())
	captureDone := make(chan struct{})
	e.mu.Lock()
	e.sessions[id] = &live{ws: ws, base: cb.base, cache: review.NewCache(), stopCapture: func() { cancel(); <-captureDone }, net: netUp}
	e.mu.Unlock()
	ok = true
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer close(captureDone)
		if err := cb.base.CaptureContent(cctx, baseMaxFile, baseBudget); err != nil && cctx.Err() == nil {
			e.log.Warn("base content capture", "session", id, "err", err)
		}
	}()
	e.log.Info("session created", "session", id, "project", project, "image", image)
	e.log.Debug("create timing", "session", id, "checks", tMount.Sub(t0), "mount", tCreate.Sub(tMount),
		"container_create", tStart.Sub(tCreate), "container_start", tBase.Sub(tStart), "base_wait", time.Since(tBase), "total", time.Since(t0))
	return e.view(ctx, rec, false), nil
}

// startFailed explains a session's container that did not start, or
// stopped as it started (an image whose /bin/sh is broken: its init says
// "exec /bin/sh failed: ..." and exits): what the container printed last,
// Docker's own error, and what to do. err is what the engine saw; it
// stands when the container runs after all.
func (e *Engine) startFailed(ctx context.Context, rec store.Session, first *firstRun, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ins, ierr := e.docker.ContainerInspect(ctx, rec.ContainerID)
	// A container whose init failed may still show as running for a few
	// milliseconds after the step that noticed it (its network namespace
	// already gone): look again for a moment before blaming the step.
	for i := 0; i < 20 && ierr == nil && ins.State != nil && ins.State.Running; i++ {
		time.Sleep(50 * time.Millisecond)
		ins, ierr = e.docker.ContainerInspect(ctx, rec.ContainerID)
	}
	if ierr != nil || ins.State == nil || ins.State.Running {
		return err
	}
	if ins.State.OOMKilled {
		return errdefs.Invalidf("the session's container ran out of memory as it started: give it more with --memory (now %d MiB)", rec.Limits.Memory>>20)
	}
	var said []string
	if out := e.startOutput(ctx, rec.ContainerID, first); out != "" {
		said = append(said, out)
	}
	if ins.State.Error != "" && !strings.Contains(err.Error(), ins.State.Error) {
		said = append(said, ins.State.Error)
	}
	what := err.Error()
	if ins.State.Status == "exited" {
		what = fmt.Sprintf("the session's container stopped as it started (exit code %d)", ins.State.ExitCode)
	}
	if len(said) > 0 {
		what += ": " + strings.Join(said, "; ")
	}
	return errdefs.Invalidf("%s. The image %s cannot run a session: rebuild or fix it (`airlock image ls` lists the images), or choose another with --image", what, rec.Image)
}

// startOutput is the last of what a stopped container printed: from the
// first command's attach stream (its logs are off), else from its logs.
func (e *Engine) startOutput(ctx context.Context, containerID string, first *firstRun) string {
	hj := types.HijackedResponse{}
	if first != nil && first.attach.Conn != nil {
		hj = first.attach
	} else {
		var err error
		hj, err = e.docker.ContainerAttach(ctx, containerID, container.AttachOptions{Logs: true, Stdout: true, Stderr: true})
		if err != nil {
			return ""
		}
		defer hj.Close()
	}
	// The container has stopped: the stream ends at once, or never.
	hj.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	out := &tailBuffer{max: 2 << 10}
	stdcopy.StdCopy(out, out, hj.Reader)
	lines := strings.Split(strings.TrimSpace(strings.ToValidUTF8(out.String(), "?")), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

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

// writeCABundle writes the session's trust store: the host's system CAs,
// the extra bundle if any, and the engine's CA (for hosts whose TLS the
// proxy terminates to inject secrets), so tools that take one file
// (SSL_CERT_FILE) keep trusting public CAs too.
func writeCABundle(dir, extra string, engineCA []byte) (string, error) {
	var b []byte
	if extra != "" {
		var err error
		if b, err = os.ReadFile(extra); err != nil {
			return "", errdefs.Invalidf("CA bundle %s: %v: give a readable PEM file to --ca-bundle", extra, err)
		}
		if !strings.Contains(string(b), "-----BEGIN CERTIFICATE-----") {
			return "", errdefs.Invalidf("CA bundle %s holds no PEM certificate", extra)
		}
	}
	b = append(append(b, '\n'), engineCA...)
	var all []byte
	for _, sys := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"} {
		if s, err := os.ReadFile(sys); err == nil && sys != extra {
			all = append(s, '\n')
			break
		}
	}
	all = append(all, b...)
	p := filepath.Join(dir, caFile)
	return p, os.WriteFile(p, all, 0o644)
}

// caEnv points the usual tools at the session's trust store.
func caEnv() []string {
	return []string{
		"SSL_CERT_FILE=" + caPath,
		"REQUESTS_CA_BUNDLE=" + caPath,
		"CURL_CA_BUNDLE=" + caPath,
		"NODE_EXTRA_CA_CERTS=" + caPath,
		"GIT_SSL_CAINFO=" + caPath,
		"PIP_CERT=" + caPath,
		"NPM_CONFIG_CAFILE=" + caPath,
	}
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
		ws := &overlay.Workspace{Dir: rec.Dir, Lower: rec.Project}
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
	if l := e.liveSession(rec.ID); l != nil {
		if l.stopCapture != nil {
			l.stopCapture()
		}
		l.mu.Lock() // no review or accept may be using the base
		l.base.Close()
		l.mu.Unlock()
		e.nets.Stop(l.net)
	}
	if err := e.teardown(ctx, rec); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.sessions, rec.ID)
	e.mu.Unlock()
	e.secrets.Forget(rec.ID)
	e.ports.Forget(rec.ID)
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
			if n, err := review.CountChanges(ctx, review.Layers{Upper: l.ws.Upper(), Project: r.Project}, e.reviewers); err == nil {
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

// adopt reconciles stored sessions with the system after a (re)start.
func (e *Engine) adopt(ctx context.Context) error {
	recs, err := e.store.Sessions(ctx)
	if err != nil {
		return err
	}
	// One list call instead of an inspect per session keeps re-adoption
	// fast with many sessions.
	states := map[string]string{}
	firsts := map[string]bool{}
	if len(recs) > 0 {
		list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", labelSession))})
		if err != nil {
			return dockerError("list session containers", err)
		}
		for _, c := range list {
			states[c.Labels[labelSession]] = c.State
			firsts[c.Labels[labelSession]] = c.Labels[labelFirst] != ""
		}
	}
	var installed map[string]bool // the firewall rules still in place, listed once
	for _, r := range recs {
		if r.State == api.StateCreating {
			e.log.Warn("cleaning up a session whose creation was interrupted", "session", r.ID)
			e.teardown(ctx, r)
			e.store.DeleteSession(ctx, r.ID)
			continue
		}
		ws, err := overlay.Find(r.Project, r.Dir)
		if err != nil {
			if r.State != api.StateFailed {
				msg := "the session's workspace is gone (its tmpfs did not survive, e.g. a host reboot): its changes are lost; remove it with `airlock rm " + r.ID + "`"
				e.log.Warn("session workspace lost", "session", r.ID, "err", err)
				e.store.SetSessionState(ctx, r.ID, api.StateFailed, msg)
			}
			continue
		}
		if err := review.Recover(e.journalPath(r.ID)); err != nil {
			e.log.Error("recover an interrupted accept", "session", r.ID, "err", err)
		}
		l := &live{ws: ws, base: review.OpenBase(r.Project, baseDir(r.Dir)), cache: review.NewCache()}
		e.sessions[r.ID] = l
		state, found := states[r.ID]
		if found && r.Network != "" {
			// The proxy, DNS and firewall rules went with the previous
			// engine; until they are back the session has no way out.
			if installed == nil {
				installed = e.nets.Installed()
			}
			if err := e.restartEgress(ctx, r, l, installed[network.KeyOf(r.Network)]); err != nil {
				e.log.Error("restart a session's egress", "session", r.ID, "err", err)
			}
		}
		switch {
		case !found:
			e.store.SetSessionState(ctx, r.ID, api.StateStopped, "the session's container is gone; its workspace is intact and can still be reviewed")
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
			if firsts[r.ID] {
				err = e.recreate(ctx, &r, ws.Merged())
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
	if err := e.store.InterruptTurns(ctx); err != nil {
		return err
	}
	used := map[string]bool{}
	if recs, err := e.store.Sessions(ctx); err == nil {
		for _, r := range recs {
			used[network.KeyOf(r.Network)] = true
		}
		if err := e.nets.RemoveUnused(used); err != nil {
			e.log.Warn("clean up networks", "err", err)
		}
	}
	return e.settleCommands(ctx)
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
