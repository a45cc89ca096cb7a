package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/agent"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
)

// run is what the fake session prints for one exec: stdout, as an agent
// CLI printed it (a file of harness/testdata, or lines written here),
// stderr and the exit code. wait, when set, is waited for after the
// first line of stdout.
type run struct {
	stdout, stderr string
	code           int
	wait           chan struct{}
}

// recorded is a CLI's recorded output from harness/testdata.
func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../harness/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exec is one command the fake session ran.
type exec struct {
	argv, env []string
}

// fakeSessions is the session core with one session, whose commands
// replay scripted runs.
type fakeSessions struct {
	mu      sync.Mutex
	sess    agent.Session
	agents  []string // what its image says it holds; nil: it says nothing
	probe   int      // the exit code of `command -v`
	runs    []run
	execs   []exec
	busy    int
	cpu     time.Duration
	cpuEach time.Duration // used by every exec
}

func (f *fakeSessions) Session(_ context.Context, id string) (agent.Session, error) {
	if id == "" || !strings.HasPrefix(f.sess.ID, id) {
		return agent.Session{}, errdefs.NotFoundf("no session %s", id)
	}
	return f.sess, nil
}

func (f *fakeSessions) Working(context.Context, string) (func(), error) {
	f.mu.Lock()
	f.busy++
	f.mu.Unlock()
	return func() { f.mu.Lock(); f.busy--; f.mu.Unlock() }, nil
}

func (f *fakeSessions) Exec(_ context.Context, _ string, argv, env []string, stdout, stderr io.Writer) (int, error) {
	f.mu.Lock()
	f.execs = append(f.execs, exec{argv, env})
	if len(f.runs) == 0 {
		f.mu.Unlock()
		return -1, errors.New("the test scripted no more runs")
	}
	r := f.runs[0]
	f.runs = f.runs[1:]
	f.cpu += f.cpuEach
	f.mu.Unlock()
	out := r.stdout
	if r.wait != nil {
		first, rest, _ := strings.Cut(out, "\n")
		io.WriteString(stdout, first+"\n")
		<-r.wait
		out = rest
	}
	// In odd pieces, as a stream arrives.
	for len(out) > 0 {
		n := min(len(out), 7)
		io.WriteString(stdout, out[:n])
		out = out[n:]
	}
	io.WriteString(stderr, r.stderr)
	return r.code, nil
}

func (f *fakeSessions) Probe(context.Context, string, []string) (int, error) { return f.probe, nil }

func (f *fakeSessions) InstalledAgents(context.Context, string) ([]string, bool) {
	return f.agents, f.agents != nil
}

func (f *fakeSessions) CPU(string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cpu
}

// fakeEgress is a session's proxy: its policy, and the changes asked.
type fakeEgress struct {
	policy  *egress.Policy // nil: no proxy runs
	changes []api.PolicyChange
}

func (f *fakeEgress) Policy(string) *egress.Policy { return f.policy }

func (f *fakeEgress) ChangePolicy(_ context.Context, _ string, ch api.PolicyChange) error {
	f.changes = append(f.changes, ch)
	return nil
}

// fakeSecrets holds stored secrets and the ones given for the session.
type fakeSecrets struct {
	stored, given map[string]string
}

func (f *fakeSecrets) Secret(_ context.Context, _, name string) (string, error) {
	if v, ok := f.given[name]; ok {
		return v, nil
	}
	if v, ok := f.stored[name]; ok {
		return v, nil
	}
	return "", errdefs.NotFoundf("no secret %s", name)
}

func (f *fakeSecrets) SetSessionSecret(_, name, value string) { f.given[name] = value }

// fakeStore keeps turns and events in memory.
type fakeStore struct {
	mu     sync.Mutex
	turns  []api.Turn
	events []harness.Event
}

func (f *fakeStore) StartTurn(_ context.Context, t api.Turn) (api.Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t.N, t.State = len(f.turns)+1, "running"
	f.turns = append(f.turns, t)
	return t, nil
}

func (f *fakeStore) SetAgentSession(_ context.Context, _ string, n int, agentSession string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.turns[n-1].AgentSession = agentSession
	return nil
}

func (f *fakeStore) FinishTurn(_ context.Context, t api.Turn) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.turns[t.N-1] = t
	return nil
}

func (f *fakeStore) Turns(context.Context, string) ([]api.Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.Turn(nil), f.turns...), nil
}

func (f *fakeStore) AddEvent(_ context.Context, _ string, e harness.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	return nil
}

func (f *fakeStore) Events(_ context.Context, _ string, turn int) ([]harness.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []harness.Event
	for _, e := range f.events {
		if turn == 0 || e.Turn == turn {
			out = append(out, e)
		}
	}
	return out, nil
}

// fixture is a runner over fakes: one running session whose image holds
// every agent, with an egress proxy allowing nothing, and model
// endpoints that all answer.
type fixture struct {
	*agent.Runner
	sessions *fakeSessions
	egress   *fakeEgress
	secrets  *fakeSecrets
	store    *fakeStore
	dials    []string
	dialErr  error
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pol, err := egress.Compile(egress.Spec{Mode: egress.Custom})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		sessions: &fakeSessions{sess: agent.Session{ID: "abc123", State: api.StateRunning, Image: "airlock/agents", Memory: 2 << 30},
			agents: harness.Installable(), cpuEach: 1500 * time.Millisecond},
		egress:  &fakeEgress{policy: pol},
		secrets: &fakeSecrets{stored: map[string]string{}, given: map[string]string{}},
		store:   &fakeStore{},
	}
	f.Runner = agent.New(f.sessions, f.egress, f.secrets, f.store, agent.Options{
		AgentsImage: "airlock/agents",
		Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
			f.dials = append(f.dials, addr)
			if f.dialErr != nil {
				return nil, f.dialErr
			}
			a, b := net.Pipe()
			b.Close()
			return a, nil
		},
	})
	t.Cleanup(f.Wait)
	return f
}

// turn runs one turn that must start, and collects what it streamed.
func (f *fixture) turn(t *testing.T, req api.AgentRequest, out ...run) (api.Turn, []api.Event) {
	t.Helper()
	f.sessions.runs = append(f.sessions.runs, out...)
	var evs []api.Event
	tr, err := f.Run(context.Background(), "abc", req, func(ev api.Event) { evs = append(evs, ev) })
	if err != nil {
		t.Fatalf("turn: %v", err)
	}
	return tr, evs
}
