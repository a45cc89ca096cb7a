package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/agent"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
)

const key = "sk-unit-test-key"

func types(evs []api.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// Each agent's recorded output, replayed by the session, becomes a turn:
// its events are numbered, stored and streamed alike and end with
// turn_done; its final answer, conversation and usage are recorded; the
// CLI ran with a placeholder for its key, which went to the proxy with
// the endpoint let through.
func TestTurnFromRecordedOutput(t *testing.T) {
	for _, tc := range []struct {
		agent, file, final, base string
	}{
		{"claude", "claude.jsonl", "I created hi.txt and notes.md.", "https://10.9.8.7:8443"},
		{"codex", "codex.jsonl", "Done with codex.", "https://10.9.8.7:8443/v1"},
		{"opencode", "opencode.jsonl", "Done.", "https://10.9.8.7:8443/v1"},
		{"aider", "aider.txt", "The function is in place.", "https://10.9.8.7:8443/v1"},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			f := newFixture(t)
			tr, evs := f.turn(t, api.AgentRequest{Agent: tc.agent, Prompt: "make hi.txt", BaseURL: tc.base, APIKey: key},
				run{stdout: recorded(t, tc.file)})
			if tr.State != "done" || tr.N != 1 || tr.Session != "abc123" || tr.Final != tc.final || tr.ExitCode == nil || *tr.ExitCode != 0 {
				t.Fatalf("turn %+v", tr)
			}
			if tr.AgentSession == "" || f.store.turns[0].AgentSession != tr.AgentSession {
				t.Errorf("conversation %q, stored %q: a next turn could not continue it", tr.AgentSession, f.store.turns[0].AgentSession)
			}
			if tr.Usage.InputTokens == 0 || tr.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v: want the tokens the CLI reported", tr.Usage)
			}
			if tr.CPUSeconds != 1.5 {
				t.Errorf("CPU %v s, want the 1.5 s the session used during the turn", tr.CPUSeconds)
			}
			if stored := agent.APIEvents(f.store.events); !reflect.DeepEqual(evs, stored) {
				t.Errorf("streamed %q, stored %q: want the same events", types(evs), types(stored))
			}
			last := evs[len(evs)-1]
			if last.Type != harness.EventTurnDone || last.Text != tc.final || last.Session != tr.AgentSession {
				t.Errorf("last event %+v: want turn_done with the answer", last)
			}
			for _, ev := range evs {
				if ev.Turn != 1 || ev.Time.IsZero() {
					t.Fatalf("event %+v: want turn 1 and a time", ev)
				}
			}
			if f.store.turns[0].State != "done" || f.store.turns[0].Ended == nil {
				t.Errorf("stored turn %+v: want its end recorded", f.store.turns[0])
			}
			// The key: a placeholder for the CLI, the real one for the proxy.
			ex := f.sessions.execs[0]
			if strings.Contains(strings.Join(append(ex.argv, ex.env...), " "), key) {
				t.Errorf("the key reached the session: %q %q", ex.argv, ex.env)
			}
			if !slices.Contains(ex.env, "OPENAI_API_KEY=airlock-injects-the-key-in-transit") && !slices.Contains(ex.env, "ANTHROPIC_API_KEY=airlock-injects-the-key-in-transit") {
				t.Errorf("env %q: want the key variable with a placeholder", ex.env)
			}
			ag, _ := harness.Lookup(tc.agent)
			if f.secrets.given[ag.KeyEnv] != key {
				t.Errorf("the caller's key was not kept for the session's proxy: %v", f.secrets.given)
			}
			if len(f.egress.changes) != 1 {
				t.Fatalf("policy changes %+v: want one", f.egress.changes)
			}
			ch := f.egress.changes[0]
			if !reflect.DeepEqual(ch.Allow, []string{"private:10.9.8.7:8443"}) || len(ch.Inject) != 1 || !strings.HasPrefix(ch.Inject[0], "10.9.8.7:8443:") {
				t.Errorf("policy change %+v: want the endpoint allowed as that one private host and port, and the key injected there", ch)
			}
			if f.sessions.busy != 0 {
				t.Errorf("the session is still marked busy after the turn")
			}
		})
	}
}

// A second turn continues the agent's conversation, and with a CLI that
// reports the conversation's total cost, shows its own.
func TestNextTurnContinues(t *testing.T) {
	f := newFixture(t)
	out := recorded(t, "claude.jsonl")
	req := api.AgentRequest{Agent: "claude", Prompt: "one", BaseURL: "https://10.9.8.7", APIKey: key}
	t1, _ := f.turn(t, req, run{stdout: out})
	if t1.Usage.CostUSD != 0.00324 {
		t.Fatalf("turn 1 cost %v, want the recorded 0.00324", t1.Usage.CostUSD)
	}
	// Claude Code reports 0.005 for the conversation after turn 2.
	t2, _ := f.turn(t, api.AgentRequest{Prompt: "two", BaseURL: req.BaseURL, APIKey: key},
		run{stdout: strings.ReplaceAll(out, `"total_cost_usd":0.00324`, `"total_cost_usd":0.005`)})
	if t2.Agent != "claude" || t2.N != 2 || t2.AgentSession != t1.AgentSession {
		t.Fatalf("turn 2 %+v: want claude continuing %s", t2, t1.AgentSession)
	}
	if !slices.Contains(f.sessions.execs[1].argv, t1.AgentSession) || slices.Contains(f.sessions.execs[0].argv, t1.AgentSession) {
		t.Errorf("argv %q: want turn 2 only to resume the conversation", f.sessions.execs[1].argv)
	}
	if math.Abs(t2.Usage.CostUSD-0.00176) > 1e-9 {
		t.Errorf("turn 2 cost %v, want 0.005 - 0.00324", t2.Usage.CostUSD)
	}
	// --new starts afresh.
	f.turn(t, api.AgentRequest{Prompt: "three", New: true, BaseURL: req.BaseURL, APIKey: key}, run{stdout: out})
	if slices.Contains(f.sessions.execs[2].argv, t1.AgentSession) {
		t.Errorf("argv %q: --new resumed the conversation", f.sessions.execs[2].argv)
	}
}

// jsonl is a custom agent's output: messages in Airlock's vocabulary.
func jsonl(msgs ...string) string {
	var b strings.Builder
	for _, m := range msgs {
		line, _ := json.Marshal(harness.Event{Type: harness.EventMessage, Text: m})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// --schema: a mismatching answer gets one retry that says what was wrong;
// a second miss fails the turn with the raw answer kept.
func TestSchemaRetry(t *testing.T) {
	f := newFixture(t)
	req := api.AgentRequest{Agent: "custom", Events: "jsonl", Cmd: "tool {prompt}", Prompt: "fix it",
		Schema: json.RawMessage(`{"type":"object","properties":{"fixed":{"type":"boolean"}},"required":["fixed"]}`)}
	tr, evs := f.turn(t, req, run{stdout: jsonl("I fixed it, trust me.")}, run{stdout: jsonl("```json\n{\"fixed\": true}\n```")})
	if tr.State != "done" || string(tr.Result) != `{"fixed":true}` {
		t.Fatalf("turn %+v: want the retry's answer as the result", tr)
	}
	if len(f.sessions.execs) != 2 || !strings.Contains(f.sessions.execs[1].argv[4], "did not match") || !strings.Contains(f.sessions.execs[1].argv[4], "fix it") {
		t.Errorf("execs %q: want a retry whose prompt says what was wrong", f.sessions.execs)
	}
	if !slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Type == harness.EventError && strings.Contains(ev.Text, "schema") }) {
		t.Errorf("events %q: the retry was not announced", types(evs))
	}
	tr, _ = f.turn(t, req, run{stdout: jsonl("nope")}, run{stdout: jsonl(`still {"fixed": "maybe"}`)})
	if tr.State != "failed" || !strings.Contains(tr.Error, "schema") || !strings.Contains(tr.Error, "airlock events abc123 --turn 2") ||
		!strings.Contains(tr.Final, "maybe") || len(tr.Result) != 0 {
		t.Fatalf("turn %+v: want a schema failure with the raw answer kept", tr)
	}
}

// A CLI that fails: what it said is kept, the turn fails with its exit
// code and an error that says what to do, with the end of its stderr.
func TestFailedCLI(t *testing.T) {
	for _, tc := range []struct {
		name   string
		run    run
		says   []string
		absent string
	}{
		{"killed", run{code: 137, stderr: "a\nb\n\nc\nd\n"}, []string{"exit 137", "memory cap of 2048 MiB", "--memory: b | c | d"}, "a |"},
		{"missing", run{code: 127, stderr: "sh: tool: not found\n"}, []string{"not installed", "airlock image build --agents custom"}, ""},
		{"exit code", run{code: 3, stderr: "1\n2\n3\n4\n5\n6\n"}, []string{"exited with code 3: 2 | 3 | 4 | 5 | 6"}, "1 |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.run.stdout = jsonl("half way") + `{"broken` + "\n"
			tr, evs := f.turn(t, api.AgentRequest{Agent: "custom", Events: "jsonl", Cmd: "tool {prompt}", Prompt: "go"}, tc.run)
			if tr.State != "failed" || tr.ExitCode == nil || *tr.ExitCode != tc.run.code {
				t.Fatalf("turn %+v", tr)
			}
			for _, s := range tc.says {
				if !strings.Contains(tr.Error, s) {
					t.Errorf("error %q does not say %q", tr.Error, s)
				}
			}
			if tc.absent != "" && strings.Contains(tr.Error, tc.absent) {
				t.Errorf("error %q keeps more than the last lines", tr.Error)
			}
			want := []string{harness.EventMessage, harness.EventMessage, harness.EventError, harness.EventTurnDone}
			if !reflect.DeepEqual(types(evs), want) || evs[1].Text != `{"broken` {
				t.Errorf("events %q: want what the CLI printed, malformed lines included, then the error", types(evs))
			}
		})
	}
}

// A caller that goes away ends the stream, not the turn: it is still run
// to its end and recorded.
func TestTurnOutlivesCaller(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	f.sessions.runs = []run{{stdout: jsonl("one", "two", "three"), wait: release}}
	ctx, cancel := context.WithCancel(context.Background())
	var got []string
	_, err := f.Run(ctx, "abc", api.AgentRequest{Agent: "custom", Events: "jsonl", Cmd: "tool {prompt}", Prompt: "go"}, func(ev api.Event) {
		got = append(got, ev.Text)
		cancel() // the caller leaves after the first event
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v: want the caller's context error", err)
	}
	close(release)
	f.Wait()
	if !reflect.DeepEqual(got, []string{"one"}) {
		t.Errorf("the caller got %q after it left", got)
	}
	tr := f.store.turns[0]
	if tr.State != "done" || tr.Final != "three" || len(f.store.events) != 4 {
		t.Errorf("turn %+v with %d events: want it run to its end and recorded", tr, len(f.store.events))
	}
	if f.sessions.busy != 0 {
		t.Errorf("the session is still marked busy after the turn")
	}
}

// Bad input, and what would fail slowly, is refused before anything runs
// or is recorded, with an error of the right class that says what to do.
func TestRefusedBeforeRunning(t *testing.T) {
	custom := api.AgentRequest{Agent: "custom", Cmd: "tool {prompt}", Prompt: "x"}
	for _, tc := range []struct {
		name  string
		setup func(*fixture)
		req   api.AgentRequest
		class func(error) bool
		says  string
	}{
		{"unknown session", nil, api.AgentRequest{Agent: "custom", Prompt: "x"}, errdefs.IsNotFound, "no session"},
		{"stopped session", func(f *fixture) {
			f.sessions.sess.State, f.sessions.sess.Error = api.StateStopped, "the container exited"
		}, custom, errdefs.IsConflict, "the container exited"},
		{"no prompt", nil, api.AgentRequest{Agent: "claude", Prompt: "  "}, errdefs.IsInvalid, "prompt"},
		{"unknown agent", nil, api.AgentRequest{Agent: "gpt-engineer", Prompt: "x"}, errdefs.IsInvalid, "claude"},
		{"no agent yet", nil, api.AgentRequest{Prompt: "x"}, errdefs.IsInvalid, "--agent"},
		{"missing key", nil, api.AgentRequest{Agent: "claude", Prompt: "x"}, errdefs.IsInvalid, "airlock secret set ANTHROPIC_API_KEY"},
		{"schema does not parse", nil, api.AgentRequest{Agent: "claude", Prompt: "x", APIKey: key, Schema: json.RawMessage(`{"type": 12}`)}, errdefs.IsInvalid, "--schema"},
		{"custom without placeholder", nil, api.AgentRequest{Agent: "custom", Prompt: "x", Cmd: "tool --yes"}, errdefs.IsInvalid, "{prompt}"},
		{"not in the image", func(f *fixture) { f.sessions.agents = []string{"claude"} }, api.AgentRequest{Agent: "codex", Prompt: "x", APIKey: key}, errdefs.IsNotFound, "airlock image build --agents codex"},
		{"not found by probe", func(f *fixture) { f.sessions.agents, f.sessions.probe = nil, 1 }, api.AgentRequest{Agent: "codex", Prompt: "x", APIKey: key}, errdefs.IsNotFound, "--image airlock/agents"},
		{"not a URL", nil, api.AgentRequest{Agent: "custom", Prompt: "x", Cmd: "t {prompt}", BaseURL: "gateway:8080"}, errdefs.IsInvalid, "http(s) URL"},
		{"localhost endpoint", nil, api.AgentRequest{Agent: "custom", Prompt: "x", Cmd: "t {prompt}", BaseURL: "http://localhost:8080"}, errdefs.IsInvalid, "localhost"},
		{"loopback endpoint", nil, api.AgentRequest{Agent: "custom", Prompt: "x", Cmd: "t {prompt}", BaseURL: "http://127.0.0.2:8080"}, errdefs.IsInvalid, "localhost"},
		{"key over plain HTTP", nil, api.AgentRequest{Agent: "claude", Prompt: "x", APIKey: key, BaseURL: "http://10.1.1.1"}, errdefs.IsInvalid, "https://"},
		{"no proxy", func(f *fixture) { f.egress.policy = nil }, api.AgentRequest{Agent: "claude", Prompt: "x", APIKey: key}, errdefs.IsUnavailable, "no egress proxy"},
		{"unreachable", func(f *fixture) { f.dialErr = errors.New("connection refused") }, api.AgentRequest{Agent: "claude", Prompt: "x", APIKey: key}, errdefs.IsUnavailable, "unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			id := "abc"
			if tc.name == "unknown session" {
				id = "zzz"
			}
			_, err := f.Run(context.Background(), id, tc.req, nil)
			if err == nil || !tc.class(err) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v (class %s): want a %q error", err, errdefs.ClassOf(err), tc.says)
			}
			if len(f.store.turns) != 0 || len(f.sessions.execs) != 0 || len(f.egress.changes) != 0 {
				t.Errorf("refused, yet %d turns recorded, %d commands run, %d policy changes", len(f.store.turns), len(f.sessions.execs), len(f.egress.changes))
			}
		})
	}
}

// A stored key is enough; an endpoint the policy allows gets no rule of
// its own; an endpoint found reachable is not dialled again by the same
// runner, but another runner checks for itself.
func TestEndpoint(t *testing.T) {
	f := newFixture(t)
	f.secrets.stored["ANTHROPIC_API_KEY"] = key
	pol, err := egress.Compile(egress.Spec{Mode: egress.Custom, Allow: []string{"203.0.113.5:443"}})
	if err != nil {
		t.Fatal(err)
	}
	f.egress.policy = pol
	req := api.AgentRequest{Agent: "claude", Prompt: "x", BaseURL: "https://203.0.113.5"}
	out := recorded(t, "claude.jsonl")
	f.turn(t, req, run{stdout: out})
	f.turn(t, req, run{stdout: out})
	for _, ch := range f.egress.changes {
		if len(ch.Allow) != 0 || !reflect.DeepEqual(ch.Inject, []string{"203.0.113.5:443:x-api-key=secret:ANTHROPIC_API_KEY"}) {
			t.Errorf("policy change %+v: want only the key's injection", ch)
		}
	}
	if len(f.secrets.given) != 0 {
		t.Errorf("a stored key was copied into the session's secrets: %v", f.secrets.given)
	}
	if !reflect.DeepEqual(f.dials, []string{"203.0.113.5:443"}) {
		t.Errorf("dialled %q: want one connect for two turns", f.dials)
	}
	g := newFixture(t)
	g.turn(t, api.AgentRequest{Agent: "claude", Prompt: "x", BaseURL: "https://203.0.113.5", APIKey: key}, run{stdout: out})
	if len(g.dials) != 1 {
		t.Errorf("another runner dialled %q: it trusted the first one's check", g.dials)
	}
}
