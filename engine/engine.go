// Package engine owns every session: it mounts the workspace, runs the
// container through the Docker Engine API, records commands in the store,
// answers review requests and re-adopts its sessions after a restart.
//
// The engine reports through return values and the callbacks it is given;
// it knows nothing of HTTP, terminals or the desktop app (engine/server
// puts it on the wire).
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/secretscan"
	"github.com/docker/docker/api/types/image"

	"github.com/airlock/airlock/engine/agent"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/meter"
	"github.com/airlock/airlock/engine/ports"
	"github.com/airlock/airlock/engine/schedule"
	"github.com/airlock/airlock/engine/secrets"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/airlock/airlock/snapshot"
)

// Defaults are the settings a session gets when its request leaves them
// out. Zero fields take the built-in defaults.
type Defaults struct {
	Image  string
	Limits api.Limits
	// CABundle is a PEM file added to every session's trusted CAs.
	CABundle string
	// Agents holds per-agent settings (model, endpoint), by agent name.
	Agents map[string]AgentDefaults
	// Egress is the network policy of sessions that ask for none
	// (default: custom, allowing DefaultAllow).
	Egress api.EgressPolicy
	// IdleTimeout pauses sessions idle that long (default
	// DefaultIdleTimeout; negative: never).
	IdleTimeout time.Duration
	// HibernateAfter hibernates sessions idle that long (default
	// DefaultHibernateAfter; negative: never). See hibernate.go.
	HibernateAfter time.Duration
	// HibernateKeepProcesses keeps the processes of sessions that
	// hibernate for being idle, where the host can (engine/criu); where
	// it cannot, they are stopped as without it.
	HibernateKeepProcesses bool
	// Workspace is where new sessions' workspaces live (api.WorkspaceTmpfs,
	// the default, or api.WorkspaceDisk).
	Workspace string
	// CostPerCoreHour prices active CPU (default 0.10).
	CostPerCoreHour float64
	// Review bounds what a review reads and renders of a session (zero
	// fields: review.DefaultMaxText and the other defaults).
	Review api.ReviewLimits
	// CheckpointEvery is how often a session's changing workspace is
	// checkpointed between turns and commands (default 60 s; negative:
	// never); CheckpointKeep and CheckpointMaxBytes bound each session's
	// checkpoints (default 200; 0: no size limit). Read when the engine
	// starts.
	CheckpointEvery    time.Duration
	CheckpointKeep     int
	CheckpointMaxBytes int64
	// WarmPool is how many warm containers (warmpool.go) the engine
	// keeps for each of the two kinds of session asked for last
	// (default DefaultWarmPool; negative: none).
	WarmPool int
}

// Built-in defaults.
const (
	DefaultImage         = "airlock/base"
	DefaultWorkspaceSize = 2 << 30
	DefaultMemory        = 4 << 30 // includes the workspace
	DefaultPids          = 1024
	DefaultWarmPool      = 2
)

func (d Defaults) withBuiltins() Defaults {
	if d.Image == "" {
		d.Image = DefaultImage
	}
	if d.IdleTimeout == 0 {
		d.IdleTimeout = DefaultIdleTimeout
	}
	if d.HibernateAfter == 0 {
		d.HibernateAfter = DefaultHibernateAfter
	}
	if d.Workspace == "" {
		d.Workspace = api.WorkspaceTmpfs
	}
	if d.CostPerCoreHour == 0 {
		d.CostPerCoreHour = 0.10
	}
	if d.Egress.Mode == "" {
		d.Egress = api.EgressPolicy{Mode: "custom", Allow: DefaultAllow}
	}
	if d.Limits.WorkspaceSize == 0 {
		d.Limits.WorkspaceSize = DefaultWorkspaceSize
	}
	if d.Limits.Memory == 0 {
		d.Limits.Memory = DefaultMemory
	}
	if d.Limits.Pids == 0 {
		d.Limits.Pids = DefaultPids
	}
	if d.WarmPool == 0 {
		d.WarmPool = DefaultWarmPool
	}
	if d.Limits.CPUs == 0 {
		d.Limits.CPUs = float64(min(runtime.NumCPU(), 2))
	}
	return d
}

// Options tune an engine.
type Options struct {
	// StateDir holds the workspaces (sessions/<id>) and image build scratch.
	StateDir string
	Defaults Defaults
	Logger   *slog.Logger // nil logs nothing
	// SpareNetworks is how many session networks to keep ready so that a
	// session's start does not wait for Docker to make one (0: none).
	SpareNetworks int
	// IdleCheck is how often idle sessions are looked for (default 10 s).
	IdleCheck time.Duration
	// PolicyFile, when set, is the accept policy of every session instead
	// of the project's .airlock/policy.yaml (`airlock ci --policy`).
	PolicyFile string
	// Resolve, when set, is how the egress proxies look names up instead
	// of the host's resolver (tests name their own servers with it).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// NeverAsk keeps sessions under the ask mode from asking anyone:
	// what no rule decides is denied (airlock ci).
	NeverAsk bool
	// InitPath is the session init (engine/fastexec/init) bound into new
	// containers to run their commands without `docker exec`; empty:
	// airlock-init beside the engine's executable, if it is there; "none":
	// no init, every command is a Docker exec.
	InitPath string
	// Secrets finds secrets in what sessions add, for reviews. Nil: the
	// airlock-scan beside the engine's executable, run as a child while
	// reviews need it (secretscan.Process), so the engine links no
	// detector; processes that link one anyway pass it here. The engine
	// asks it only about texts it has not asked about before (a cache by
	// digest), and closes it when it closes, if it is an io.Closer.
	Secrets secretscan.Finder
}

// Engine owns sessions. It is safe for concurrent use.
type Engine struct {
	snaps    *snapshot.Store      // snapshot layers, an OCI image layout
	layers   *snapshot.LayerCache // snapshots' layers, applied once for restores (restore.go)
	docker   Docker
	store    *store.Store
	stateDir string
	policy   string                   // Options.PolicyFile
	defaults atomic.Pointer[Defaults] // changed by SetSettings
	log      *slog.Logger
	// resolve is Options.Resolve.
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	asks    asks // questions of sessions under the ask mode (ask.go)
	// neverAsk is Options.NeverAsk.
	neverAsk bool
	// initPath is the session init found from Options.InitPath ("": none).
	initPath string
	// scanner is Options.Secrets, or the child process it defaults to,
	// behind a cache of answers by the texts' digests: what a review
	// scanned is not scanned again while the engine lives.
	scanner secretscan.Finder
	// reviewers bounds the goroutines doing review work (diff, patch,
	// discard) across all sessions (see review.go).
	reviewers *review.Workers

	mu       sync.Mutex
	sessions map[string]*live // adopted or created sessions, by id
	// bg tracks goroutines that outlive a request (command recorders;
	// agent turns are tracked by agents).
	bg sync.WaitGroup
	// secrets are the stored secrets and the values given for one
	// session (engine/secrets); ca is the engine's CA (see egress.CA).
	secrets *secrets.Store
	ca      *egress.CA
	// meter reads sessions' cgroups (engine/meter).
	meter Meter
	// agents runs agent turns (engine/agent).
	agents *agent.Runner
	// act is the idle watcher's view of sessions (see lifecycle.go).
	actMu     sync.Mutex
	act       map[string]*activity
	stopWatch func()
	// nets are the session networks and the spares (engine/network).
	nets *netPool
	// ports are the sessions' ports forwarded to the host (engine/ports).
	ports *ports.Forwarder
	// schedules run sessions at their times (engine/schedule).
	schedules *schedule.Scheduler
	// peeks are hibernated sessions' workspaces restored for reading
	// (hibernate.go).
	peeks peeks
	// timeline keeps the sessions' checkpoints (engine/timeline).
	timeline *timeline.Timeline
	// warm keeps containers ready for new sessions (engine/warm,
	// warmpool.go); nil until the engine adopted its sessions.
	warm *warmPool
}

// live is the in-memory side of a session.
type live struct {
	mu sync.Mutex // serializes accept and discard
	// freeze is held by a snapshot while the session is frozen; new
	// work waits for it instead of failing on a paused container.
	freeze sync.RWMutex
	ws     *overlay.Workspace
	base   *review.Base
	cache  *review.Cache
	// stopCapture ends the background base content capture and waits for
	// it; removal calls it before deleting the session's files.
	stopCapture func()
	// net is the session's egress (nil for a session without a network
	// of its own).
	net *sessionNet
	// sums is the watch on the workspace and its last summary.
	sums *summaries
	// gone is set, under mu, once the session hibernated: whoever took
	// this live before then finds its workspace unmounted.
	gone bool
}

// New starts an engine over the given Docker client and store and re-adopts
// the sessions the store knows: their mounts and containers are found
// again, commands that ran while no engine was watching are settled.
func New(ctx context.Context, docker Docker, st *store.Store, opts Options) (*Engine, error) {
	if opts.StateDir == "" {
		return nil, fmt.Errorf("engine: no state directory")
	}
	if err := os.MkdirAll(filepath.Join(opts.StateDir, "sessions"), 0o700); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		docker:    docker,
		store:     st,
		stateDir:  opts.StateDir,
		log:       log.With("component", "engine"),
		sessions:  map[string]*live{},
		policy:    opts.PolicyFile,
		resolve:   opts.Resolve,
		neverAsk:  opts.NeverAsk,
		initPath:  findInit(opts.InitPath),
		scanner:   opts.Secrets,
		reviewers: review.NewWorkers(reviewSlots()),
	}
	if e.scanner == nil {
		e.scanner = secretscan.NewProcess(secretscan.ProcessOptions{Path: besideExecutable(scanName)})
	}
	e.scanner = secretscan.NewCache(e.scanner, secretscan.CacheOptions{})
	defs := opts.Defaults
	if err := loadSettings(opts.StateDir, &defs); err != nil {
		return nil, err
	}
	defs = defs.withBuiltins()
	e.defaults.Store(&defs)
	var err error
	if e.secrets, err = secrets.Open(opts.StateDir, st); err != nil {
		return nil, err
	}
	if e.ca, err = egress.LoadCA(filepath.Join(opts.StateDir, "ca")); err != nil {
		return nil, err
	}
	if err := e.openSnapshots(ctx); err != nil {
		return nil, err
	}
	m := meter.New(docker, meter.DefaultRoot)
	if _, err := m.Layout(ctx); err != nil { // asked again at the next create
		e.log.Warn("Docker did not say how it uses cgroups: sessions are metered once it does", "err", err)
	}
	e.meter = carriedMeter{Meter: m, store: st}
	e.nets = newNetPool(opts.StateDir, opts.SpareNetworks, log, e.startGateway)
	e.agents = newAgents(e)
	e.timeline = newTimeline(e, timeline.Options{Every: defs.CheckpointEvery, Keep: defs.CheckpointKeep, MaxBytes: defs.CheckpointMaxBytes})
	if err := e.adopt(ctx); err != nil {
		return nil, err
	}
	e.nets.Fill()
	e.warm = newWarmPool(e)
	e.ports = newPorts(e)
	every := opts.IdleCheck
	if every <= 0 {
		every = 10 * time.Second
	}
	wctx, cancel := context.WithCancel(context.Background())
	e.stopWatch = cancel
	go e.watchIdle(wctx, every)
	e.schedules = newSchedules(e)
	e.schedules.Start()
	go e.timeline.Run(wctx)
	return e, nil
}

// Close waits for background work (command recorders, agent turns) to
// settle or ctx to end. Sessions keep running: they belong to Docker and
// the mounts, not to this process.
func (e *Engine) Close(ctx context.Context) {
	e.stopWatch()
	if e.schedules != nil {
		e.schedules.Stop(ctx)
	}
	e.ports.Stop()
	if e.warm != nil {
		e.warm.Close(ctx) // before the networks: its entries hold some
	}
	e.nets.Close()
	// The sessions' networks stay (the next engine adopts them), but what
	// serves on their gateways is this process's: its listeners close
	// here, not at exit, so that an engine closed in-process (ci, tests)
	// leaves no address bound that a later network of the same range needs.
	e.mu.Lock()
	var gateways []*egressState
	for _, l := range e.sessions {
		if l.net != nil {
			gateways = append(gateways, l.net.Gateway)
		}
		l.sums.close()
	}
	e.mu.Unlock()
	for _, g := range gateways {
		g.Close()
	}
	done := make(chan struct{})
	go func() { e.bg.Wait(); e.agents.Wait(); e.timeline.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	if c, ok := e.scanner.(io.Closer); ok {
		c.Close()
	}
}

// defs are the engine's defaults as they are now.
func (e *Engine) defs() Defaults { return *e.defaults.Load() }

func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (e *Engine) sessionDir(id string) string {
	return filepath.Join(e.stateDir, "sessions", id)
}

// Images lists the local images a session can use.
func (e *Engine) Images(ctx context.Context) ([]api.Image, error) {
	list, err := e.docker.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, dockerError("list images", err)
	}
	out := []api.Image{}
	for _, im := range list {
		for _, tag := range im.RepoTags {
			if tag == "<none>:<none>" {
				continue
			}
			out = append(out, api.Image{Name: tag, ID: im.ID, Size: im.Size, Created: time.Unix(im.Created, 0), Recipe: im.Labels[images.RecipeLabel]})
		}
	}
	return out, nil
}
