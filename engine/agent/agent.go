package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/harness"
)

// Session is what a turn needs to know of a session.
type Session struct {
	ID    string // the full id (the caller may have given a prefix)
	State string // api.StateRunning and the others
	Error string // why the session is not running, if it is not
	Image string // the image its container runs
	// Memory is the session's memory cap in bytes, named when the CLI is
	// killed for want of memory.
	Memory int64
}

// Sessions is what a turn asks of the session core, declared by its
// consumer. The real one is the engine's; unit tests fake it.
type Sessions interface {
	// Session returns the session named by id (or a unique prefix of
	// it), or an errdefs NotFound error.
	Session(ctx context.Context, id string) (Session, error)
	// Working marks work running in the session until done is called,
	// so that the idle watcher leaves it alone; a paused session is
	// resumed first. It fails for a session over its budget (Conflict).
	Working(ctx context.Context, id string) (done func(), err error)
	// Exec runs argv in the session's workspace as the session's user
	// with env added, recorded like any command, writes its output to
	// stdout and stderr as it comes and returns its exit code once it
	// ends. An error means it could not run or be followed to its end.
	Exec(ctx context.Context, id string, argv, env []string, stdout, stderr io.Writer) (int, error)
	// Probe runs a short command in the session that is not recorded,
	// discards its output and returns its exit code.
	Probe(ctx context.Context, id string, argv []string) (int, error)
	// InstalledAgents lists the agents the session's image says it
	// holds (by name); known is false when the image does not say, and
	// then the caller looks into the session instead.
	InstalledAgents(ctx context.Context, id string) (names []string, known bool)
	// CPU is the CPU time the session used so far (0 when unknown).
	CPU(id string) time.Duration
}

// Egress is the session's egress proxy, as far as a turn changes it.
type Egress interface {
	// Policy is the policy in force for the session's connections, or
	// nil when no egress proxy runs for the session (one made before
	// egress policies, or whose proxy did not come back after a
	// restart).
	Policy(id string) *egress.Policy
	// ChangePolicy applies ch to the session's policy; new connections
	// follow it at once.
	ChangePolicy(ctx context.Context, id string, ch api.PolicyChange) error
}

// Secrets are the values the egress proxy injects into requests. A
// turn never reads a value into the session: it only checks that one
// exists, and hands on a key the caller gave.
type Secrets interface {
	// Secret returns the named value for the session: one given for the
	// session, else the stored one; an errdefs NotFound error when
	// there is neither.
	Secret(ctx context.Context, session, name string) (string, error)
	// SetSessionSecret keeps value as the session's secret name, in
	// memory only, for its injections.
	SetSessionSecret(session, name, value string)
}

// Store keeps turns and their events; the real one is *store.Store.
type Store interface {
	// StartTurn records a turn that starts and returns it numbered
	// within its session (N) and running.
	StartTurn(ctx context.Context, t api.Turn) (api.Turn, error)
	// SetAgentSession records the agent's conversation id for turn n.
	SetAgentSession(ctx context.Context, session string, n int, agentSession string) error
	// FinishTurn records how a turn ended (state, exit code, answer,
	// usage, error).
	FinishTurn(ctx context.Context, t api.Turn) error
	// Turns lists a session's turns in order.
	Turns(ctx context.Context, session string) ([]api.Turn, error)
	// AddEvent appends one event of the session's agent.
	AddEvent(ctx context.Context, session string, e harness.Event) error
	// Events lists the session's events in order, of one turn if turn > 0.
	Events(ctx context.Context, session string, turn int) ([]harness.Event, error)
}

// Defaults are an agent's settings from the engine's config.
type Defaults struct {
	Model   string
	BaseURL string
}

// Options tune a Runner. Zero fields take the defaults.
type Options struct {
	// Defaults returns the configured settings of the named agent, read
	// at every turn (nil: none).
	Defaults func(agent string) Defaults
	// AgentsImage is the image that error messages suggest when an
	// agent's CLI is missing.
	AgentsImage string
	Logger      *slog.Logger // nil logs nothing
	// Dial connects to a model endpoint to see that it answers (default:
	// a TCP connect that gives up after DialTimeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTimeout bounds that connect (default 3 s).
	DialTimeout time.Duration
	// Ended, when set, is called with each turn as it ended, before the
	// session is marked idle and the caller hears of the end (the
	// engine checkpoints the workspace there).
	Ended func(ctx context.Context, t api.Turn)
	// ReachableFor is how long an endpoint found reachable is trusted
	// without connecting again (default a minute), so that a
	// conversation does not pay a connect per turn.
	ReachableFor time.Duration
}

// Runner runs agent turns. It is safe for concurrent use.
type Runner struct {
	sessions Sessions
	egress   Egress
	secrets  Secrets
	store    Store
	opts     Options
	log      *slog.Logger
	reach    reachable
	// bg tracks turns, which outlive the request that started them.
	bg sync.WaitGroup
}

// New returns a runner over the session core's parts.
func New(sessions Sessions, eg Egress, secrets Secrets, st Store, opts Options) *Runner {
	if opts.Defaults == nil {
		opts.Defaults = func(string) Defaults { return Defaults{} }
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 3 * time.Second
	}
	if opts.Dial == nil {
		opts.Dial = (&net.Dialer{Timeout: opts.DialTimeout}).DialContext
	}
	if opts.ReachableFor <= 0 {
		opts.ReachableFor = time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{sessions: sessions, egress: eg, secrets: secrets, store: st, opts: opts,
		log: log.With("component", "agent"), reach: reachable{ok: map[string]time.Time{}}}
}

// Wait returns once every turn that runs has been recorded.
func (r *Runner) Wait() { r.bg.Wait() }

// Run runs one agent turn in a session: it builds the agent's command
// line from the harness, runs it as the session's user, turns its output
// into events (stored, and passed to sink as they come) and returns how
// the turn ended. If ctx ends the turn goes on and is recorded; sink is
// no longer called. sink may be nil.
func (r *Runner) Run(ctx context.Context, id string, req api.AgentRequest, sink func(api.Event)) (api.Turn, error) {
	p, err := r.prepare(ctx, id, req)
	if err != nil {
		return api.Turn{}, err
	}
	// Busy before the turn is recorded: a session that cannot take work
	// is left without a turn that never ran.
	finished, err := r.sessions.Working(ctx, p.sess.ID)
	if err != nil {
		return api.Turn{}, err
	}
	turn, err := r.store.StartTurn(ctx, api.Turn{Session: p.sess.ID, Agent: p.ag.Name, Prompt: req.Prompt, Model: p.t.Model, AgentSession: p.t.Resume, Started: time.Now()})
	if err != nil {
		finished()
		return api.Turn{}, err
	}
	out := &eventSink{f: sink}
	done := make(chan api.Turn, 1)
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		// The session is idle again before the caller hears of the end.
		done <- func() api.Turn {
			defer finished()
			t := r.runTurn(context.WithoutCancel(ctx), p, turn, out.emit)
			if r.opts.Ended != nil {
				r.opts.Ended(context.WithoutCancel(ctx), t)
			}
			return t
		}()
	}()
	select {
	case turn := <-done:
		return turn, nil
	case <-ctx.Done():
		out.detach()
		return api.Turn{}, ctx.Err()
	}
}

// Turns lists a session's agent turns.
func (r *Runner) Turns(ctx context.Context, id string) ([]api.Turn, error) {
	s, err := r.sessions.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.store.Turns(ctx, s.ID)
}

// Events lists a session's agent events, of one turn if turn > 0.
func (r *Runner) Events(ctx context.Context, id string, turn int) ([]api.Event, error) {
	s, err := r.sessions.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	evs, err := r.store.Events(ctx, s.ID, turn)
	return APIEvents(evs), err
}

// eventSink passes events to a caller until it goes away.
type eventSink struct {
	mu sync.Mutex
	f  func(api.Event)
}

func (s *eventSink) emit(ev api.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		s.f(ev)
	}
}

func (s *eventSink) detach() {
	s.mu.Lock()
	s.f = nil
	s.mu.Unlock()
}
