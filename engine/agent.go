package engine

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
	"github.com/docker/docker/api/types/container"
)

// AgentsLabel lists, on an image, the agent CLIs installed in it
// (name@version, comma separated).
const AgentsLabel = images.AgentsLabel

// DefaultAgentsImage is the image agent sessions use unless told
// otherwise: the default image plus agent CLIs.
const DefaultAgentsImage = images.AgentsName

// AgentDefaults are an agent's settings from the engine's config.
type AgentDefaults struct {
	Model   string
	BaseURL string
}

// Agent runs one agent turn in a session: it builds the agent's command
// line from the harness, runs it as the session's user, turns its output
// into events (stored, and passed to sink as they come) and returns how
// the turn ended. If ctx ends the turn goes on and is recorded; sink is
// no longer called.
func (e *Engine) Agent(ctx context.Context, id string, req api.AgentRequest, sink func(api.Event)) (api.Turn, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Turn{}, err
	}
	if rec.State != api.StateRunning {
		return api.Turn{}, errdefs.Conflictf("session %s is %s: %s", rec.ID, rec.State, orNone(rec.Error))
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return api.Turn{}, errdefs.Invalidf("no prompt given: say what the agent should do, e.g. --prompt \"fix the failing test\"")
	}
	turns, err := e.store.Turns(ctx, rec.ID)
	if err != nil {
		return api.Turn{}, err
	}
	name := req.Agent
	if name == "" {
		if len(turns) == 0 {
			return api.Turn{}, errdefs.Invalidf("session %s has no agent yet: name one with --agent (%s)", rec.ID, strings.Join(harness.Names(), ", "))
		}
		name = turns[len(turns)-1].Agent
	}
	ag, err := harness.Lookup(name)
	if err != nil {
		return api.Turn{}, errdefs.Invalidf("%v", err)
	}
	def := e.defs().Agents[ag.Name]
	t := harness.Turn{Prompt: req.Prompt, Model: firstOf(req.Model, def.Model, ag.DefaultModel), BaseURL: firstOf(req.BaseURL, def.BaseURL), Cmd: req.Cmd, Events: req.Events}
	if ag.Continues && !req.New {
		for i := len(turns) - 1; i >= 0; i-- {
			if turns[i].Agent == ag.Name && turns[i].AgentSession != "" {
				t.Resume = turns[i].AgentSession
				break
			}
		}
	}
	// What the conversation cost before, for CLIs that report its total.
	var costBefore float64
	if ag.CumulativeCost && t.Resume != "" {
		for _, tr := range turns {
			if tr.Agent == ag.Name && tr.AgentSession == t.Resume {
				costBefore += tr.Usage.CostUSD
			}
		}
	}
	var schema *harness.Schema
	if len(req.Schema) > 0 {
		if schema, err = harness.CompileSchema(req.Schema); err != nil {
			return api.Turn{}, errdefs.Invalidf("--schema: %v: give a JSON Schema document", err)
		}
		t.Prompt += schema.Instructions()
	}
	if ag.KeyEnv != "" && req.APIKey == "" {
		if _, err = e.secret(ctx, rec.ID, ag.KeyEnv); err != nil {
			if errdefs.IsNotFound(err) {
				return api.Turn{}, errdefs.Invalidf("no API key for %s: set %s in the environment of the airlock command, or store it with `airlock secret set %s`", ag.Title, ag.KeyEnv, ag.KeyEnv)
			}
			return api.Turn{}, err
		}
	}
	if _, err := ag.Command(t); err != nil {
		return api.Turn{}, errdefs.Invalidf("%v", err)
	}
	if err := e.checkInstalled(ctx, rec.ContainerID, rec.Image, ag); err != nil {
		return api.Turn{}, err
	}
	ep, err := parseEndpoint(firstOf(t.BaseURL, ag.DefaultBaseURL))
	if err != nil {
		return api.Turn{}, err
	}
	if err := e.canInject(rec.ID, ag, ep); err != nil {
		return api.Turn{}, err
	}
	if err := checkReachable(ep); err != nil {
		return api.Turn{}, err
	}
	// The session may reach the endpoint, and the key travels host-side:
	// the session's proxy sets it on the endpoint's requests, and the CLI
	// only has a placeholder.
	if err := e.bindEndpoint(ctx, rec.ID, ag, ep, req.APIKey); err != nil {
		return api.Turn{}, err
	}
	turn, err := e.store.StartTurn(ctx, api.Turn{Session: rec.ID, Agent: ag.Name, Prompt: req.Prompt, Model: t.Model, AgentSession: t.Resume, Started: time.Now()})
	if err != nil {
		return api.Turn{}, err
	}
	out := &eventSink{f: sink}
	done := make(chan api.Turn, 1)
	_, finished, err := e.working(ctx, rec.ID)
	if err != nil {
		return api.Turn{}, err
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer finished()
		done <- e.runTurn(context.WithoutCancel(ctx), rec.ID, rec.Limits.Memory, ag, t, schema, turn, costBefore, out.emit)
	}()
	select {
	case turn := <-done:
		return turn, nil
	case <-ctx.Done():
		out.detach()
		return api.Turn{}, ctx.Err()
	}
}

// runTurn runs the agent, once more if its answer does not match the
// schema, and records the turn's end. The agent's key variable holds a
// placeholder: the real key never enters the session (canInject).
func (e *Engine) runTurn(ctx context.Context, id string, memory int64, ag *harness.Agent, t harness.Turn, schema *harness.Schema, turn api.Turn, costBefore float64, sink func(api.Event)) api.Turn {
	var usage harness.Usage
	emit := func(ev harness.Event) {
		ev.Turn = turn.N
		if ev.Time.IsZero() {
			ev.Time = time.Now()
		}
		switch ev.Type {
		case harness.EventUsage:
			if ev.Usage != nil {
				if ag.CumulativeCost {
					u := *ev.Usage
					u.CostUSD = max(0, u.CostUSD-costBefore)
					costBefore += u.CostUSD
					ev.Usage = &u
				}
				usage.Add(*ev.Usage)
			}
		case harness.EventSession:
			if ev.Session != "" && ev.Session != turn.AgentSession && ag.Continues {
				turn.AgentSession = ev.Session
				e.store.SetAgentSession(ctx, id, turn.N, ev.Session)
			}
		}
		if err := e.store.AddEvent(ctx, id, ev); err != nil {
			e.log.Warn("store an agent event", "session", id, "err", err)
		}
		sink(wireEvent(ev))
	}
	attempt := func(t harness.Turn) (int, string, error) {
		inv, err := ag.Command(t)
		if err != nil {
			return -1, "", err
		}
		env := inv.Env
		if ag.KeyEnv != "" {
			env = append(append([]string(nil), env...), ag.KeyEnv+"="+keyPlaceholder)
		}
		p := ag.NewParser(t)
		lines := &lineWriter{fn: func(line []byte) {
			for _, ev := range p.Line(line) {
				emit(ev)
			}
		}}
		stderr := &tailBuffer{max: 8 << 10}
		code, err := e.Exec(ctx, id, api.ExecRequest{Argv: inv.Argv, Env: env}, ExecIO{Stdout: lines, Stderr: stderr})
		lines.flush()
		for _, ev := range p.End() {
			emit(ev)
		}
		if err == nil && code != 0 {
			err = fmt.Errorf("%s exited with code %d%s", ag.Title, code, lastLines(stderr.String(), 5))
			switch code {
			case 127:
				err = fmt.Errorf("%s is not installed in this session's image (exit 127): build one with `airlock image build --agents %s`", ag.Title, ag.Name)
			case 137:
				err = fmt.Errorf("%s was killed (exit 137), most often by the session's memory cap of %d MiB: start the session with a larger --memory%s",
					ag.Title, memory>>20, lastLines(stderr.String(), 3))
			}
		}
		return code, p.Final(), err
	}

	cpuStart := e.sessionCPU(id)
	code, final, err := attempt(t)
	if err == nil && schema != nil {
		result, verr := schema.Check(final)
		if verr != nil {
			emit(harness.Event{Type: harness.EventError, Text: "the final answer does not match the schema (" + verr.Error() + "): asking the agent once more"})
			retry := t
			if ag.Continues && turn.AgentSession != "" {
				retry.Prompt, retry.Resume = schema.Retry(verr), turn.AgentSession
			} else {
				retry.Prompt = t.Prompt + "\n\n" + schema.Retry(verr)
			}
			code, final, err = attempt(retry)
			if err == nil {
				result, verr = schema.Check(final)
			}
		}
		if err == nil && verr != nil {
			err = fmt.Errorf("the agent's final answer does not match the schema after one retry: %v (its raw answer is kept: `airlock events %s --turn %d`)", verr, id, turn.N)
		}
		turn.Result = result
	}
	turn.CPUSeconds = float64(max(0, e.sessionCPU(id)-cpuStart)) / 1e9
	turn.ExitCode = &code
	turn.Final = final
	turn.Usage = api.Usage(usage)
	turn.State = "done"
	if err != nil {
		turn.State, turn.Error = "failed", err.Error()
		emit(harness.Event{Type: harness.EventError, Text: err.Error()})
	}
	now := time.Now()
	turn.Ended = &now
	emit(harness.Event{Type: harness.EventTurnDone, Text: final, ExitCode: &code, Usage: &usage, Session: turn.AgentSession, Result: turn.Result})
	if err := e.store.FinishTurn(ctx, turn); err != nil {
		e.log.Warn("record a turn's end", "session", id, "err", err)
	}
	return turn
}

// checkInstalled tells whether the agent's CLI is in the session: from
// the image's label when it has one, else by looking for it.
func (e *Engine) checkInstalled(ctx context.Context, containerID, image string, ag *harness.Agent) error {
	if ag.Bin == "" {
		return nil
	}
	missing := errdefs.NotFoundf("%s (%s) is not installed in image %s: build an image with it, `airlock image build --agents %s`, and run with --image %s",
		ag.Title, ag.Bin, image, ag.Name, DefaultAgentsImage)
	if ins, err := e.docker.ImageInspect(ctx, image); err == nil && ins.Config != nil {
		if l, ok := ins.Config.Labels[AgentsLabel]; ok {
			for _, a := range strings.Split(l, ",") {
				if strings.SplitN(a, "@", 2)[0] == ag.Name {
					return nil
				}
			}
			return missing
		}
	}
	code, err := e.probe(ctx, containerID, []string{"/bin/sh", "-c", "command -v " + ag.Bin})
	if err != nil {
		return err
	}
	if code != 0 {
		return missing
	}
	return nil
}

// probe runs a short unrecorded command and returns its exit code.
func (e *Engine) probe(ctx context.Context, containerID string, argv []string) (int, error) {
	created, err := e.docker.ContainerExecCreate(ctx, containerID, container.ExecOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, dockerError("look into the session", err)
	}
	hj, err := e.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, dockerError("look into the session", err)
	}
	var sink bytes.Buffer
	sink.ReadFrom(hj.Reader)
	hj.Close()
	code, _ := e.execExit(created.ID)
	if code == nil {
		return -1, errdefs.Unavailablef("could not read a probe's exit code from Docker")
	}
	return *code, nil
}

// endpoint is an agent's model endpoint, as the policy sees it.
type endpoint struct {
	raw        string
	scheme     string
	host, port string
	portN      int
}

// hostPort is host:port, with IPv6 in brackets.
func (ep endpoint) hostPort() string { return net.JoinHostPort(ep.host, ep.port) }

// keyPlaceholder is what an agent CLI has for its API key when the real
// one is injected in transit.
const keyPlaceholder = "airlock-injects-the-key-in-transit"

// canInject says why the agent's key cannot be injected into its
// requests in transit, if it cannot. Then the turn does not run: the key
// is never handed to the session instead.
func (e *Engine) canInject(id string, ag *harness.Agent, ep endpoint) error {
	if ag.KeyEnv == "" {
		return nil // no key
	}
	never := "and Airlock never puts an API key into the session"
	switch {
	case ag.KeyHeader == "":
		return errdefs.Invalidf("Airlock does not know which header carries %s's key, so it cannot add the key in transit, %s", ag.Title, never)
	case ep.raw == "":
		return errdefs.Invalidf("%s has no model endpoint for Airlock to add its key to, %s: give one with --base-url", ag.Title, never)
	case ep.scheme != "https":
		return errdefs.Invalidf("the model endpoint %s is plain HTTP: Airlock adds %s's API key to requests in transit only over TLS, where the certificate proves the host (over plain HTTP anyone on the way reads it), %s: give an https:// endpoint (for a private CA, set the engine's ca_bundle)",
			ep.raw, ag.Title, never)
	}
	if l := e.liveSession(id); l == nil || l.net == nil {
		return errdefs.Unavailablef("session %s has no egress proxy running (it did not come back when the engine restarted; the engine's log says why), so %s's API key cannot be added in transit, %s: start a new session, or restart the engine",
			id, ag.Title, never)
	}
	return nil
}

// bindEndpoint puts the agent's endpoint into the session's policy, in one
// change: an allow rule for its host and port unless the policy allows
// them already (the user named it, so an endpoint at a private address,
// a local model or gateway, is let through as that one host and port:
// private:HOST:PORT, not private access for the session), and an
// injection of the agent's key into its requests (a key from the caller
// is kept in memory for the session, a stored one is read when a request
// goes out). canInject has said the injection can be set up.
func (e *Engine) bindEndpoint(ctx context.Context, id string, ag *harness.Agent, ep endpoint, given string) error {
	l := e.liveSession(id)
	if ep.raw == "" || l == nil || l.net == nil {
		return nil
	}
	var ch api.PolicyChange
	if allowed, private := e.endpointAllowed(ctx, l.net.Gateway.proxy.Policy(), ep); !allowed {
		rule := ep.hostPort()
		if private {
			rule = "private:" + rule
		}
		ch.Allow = []string{rule}
	}
	if ag.KeyEnv != "" {
		if given != "" {
			e.setSessionSecret(id, ag.KeyEnv, given)
		}
		ch.Inject = []string{ep.hostPort() + ":" + ag.KeyHeader + "=" + fmt.Sprintf(ag.KeyValue, ag.KeyEnv)}
	}
	_, err := e.Policy(ctx, id, ch)
	return err
}

// endpointAllowed tells whether the policy lets the session reach ep (by
// address, or by name and every address the name has), and whether ep is
// at a private address.
func (e *Engine) endpointAllowed(ctx context.Context, pol *egress.Policy, ep endpoint) (allowed, private bool) {
	addrs := []netip.Addr{}
	byName := false
	if a, err := netip.ParseAddr(ep.host); err == nil {
		addrs = append(addrs, a)
	} else {
		byName = true
		addrs, _ = net.DefaultResolver.LookupNetIP(ctx, "ip", ep.host)
	}
	allowed = len(addrs) > 0 && (!byName || pol.Name(ep.host, ep.portN).Allowed)
	for _, a := range addrs {
		private = private || egress.Special(a) != ""
		if byName {
			allowed = allowed && pol.Resolved(ep.host, a, ep.portN).Allowed
		} else {
			allowed = allowed && pol.Addr(a, ep.portN).Allowed
		}
	}
	return allowed, private
}

// endpointOK caches endpoints found reachable, so that a conversation
// does not pay a connect per turn.
var endpointOK sync.Map // host:port -> time.Time

// parseEndpoint reads the model endpoint. An empty one is the CLI's own
// default.
func parseEndpoint(raw string) (endpoint, error) {
	if raw == "" {
		return endpoint{}, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return endpoint{}, errdefs.Invalidf("endpoint %q is not an http(s) URL: give it like https://gateway.example.com/v1", raw)
	}
	ep := endpoint{raw: raw, scheme: u.Scheme, host: u.Hostname(), port: u.Port()}
	if ep.port == "" {
		ep.port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	ep.portN, _ = strconv.Atoi(ep.port)
	if h, err := egress.ParseHost(ep.host); err == nil && (h.Name == "localhost" || strings.HasSuffix(h.Name, ".localhost") ||
		h.IsAddr() && (egress.Special(h.Addr) == "loopback" || egress.Special(h.Addr) == "unspecified")) {
		return ep, errdefs.Invalidf("endpoint %s points at localhost, which inside a session is the session itself: use an address of the host the session can reach (e.g. the Docker bridge, 172.17.0.1)", raw)
	}
	return ep, nil
}

// checkReachable fails fast, with a clear message, when the endpoint
// cannot be reached, instead of letting a CLI retry for minutes.
func checkReachable(ep endpoint) error {
	if ep.raw == "" {
		return nil
	}
	if t, ok := endpointOK.Load(ep.hostPort()); ok && time.Since(t.(time.Time)) < time.Minute {
		return nil
	}
	c, err := net.DialTimeout("tcp", ep.hostPort(), 3*time.Second)
	if err != nil {
		return errdefs.Unavailablef("the model endpoint %s is unreachable (%v): check the URL (--base-url or the config file) and that the server runs", ep.raw, err)
	}
	c.Close()
	endpointOK.Store(ep.hostPort(), time.Now())
	return nil
}

// Turns lists a session's agent turns.
func (e *Engine) Turns(ctx context.Context, id string) ([]api.Turn, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.store.Turns(ctx, rec.ID)
}

// Events lists a session's agent events, of one turn if turn > 0.
func (e *Engine) Events(ctx context.Context, id string, turn int) ([]api.Event, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	evs, err := e.store.Events(ctx, rec.ID, turn)
	return wireEvents(evs), err
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
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

// lineWriter calls fn with each line written to it (without the newline).
// A line longer than 4 MiB is passed on in pieces.
type lineWriter struct {
	fn  func([]byte)
	buf []byte
}

const maxLine = 4 << 20

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) >= maxLine {
				w.fn(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.fn(bytes.TrimRight(w.buf[:i], "\r"))
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.fn(w.buf)
		w.buf = nil
	}
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// lastLines is ": " and the last n non-empty lines of s, or "".
func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.TrimSpace(l) != "" {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	if len(keep) == 0 {
		return ""
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return ": " + strings.Join(keep, " | ")
}
