package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
	"github.com/airlock/airlock/harness/mockmodel"
)

const testKey = "sk-airlock-test-key"

// agentLimits fit the agent CLIs (OpenCode's runtime alone wants more
// than the tests' default 256 MiB).
var agentLimits = api.Limits{Memory: 2 << 30, WorkspaceSize: 256 << 20}

// ownedProject is a project owned by an ordinary user, as on a laptop:
// the agent then runs as that user, not root.
func ownedProject(t *testing.T) string {
	t.Helper()
	p := project(t)
	must(t, filepath.Walk(p, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, 1000, 1000)
	}))
	return p
}

// turn runs one agent turn and collects its events.
func turn(t *testing.T, e *enginetest.Engine, id string, req api.AgentRequest) (api.Turn, []api.Event) {
	t.Helper()
	var evs []api.Event
	got, err := e.Agent(context.Background(), id, req, func(ev api.Event) { evs = append(evs, ev) })
	must(t, err)
	return got, evs
}

func has(evs []api.Event, typ string, ok func(api.Event) bool) bool {
	for _, ev := range evs {
		if ev.Type == typ && (ok == nil || ok(ev)) {
			return true
		}
	}
	return false
}

// The real Claude Code, Codex and OpenCode CLIs run in the session against
// the mock model: their edits land in the session's diff and not on the
// host, their events map to Airlock's, a second turn continues the same
// conversation, and everything is stored with the session.
func TestAgentsRealCLIs(t *testing.T) {
	e := enginetest.Start(t)
	image := enginetest.AgentsImage(t, e.Docker)
	notes := "*** Begin Patch\n*** Add File: notes.md\n+# notes\n*** End Patch\n"
	for _, tc := range []struct {
		agent  string
		suffix string // of the base URL
		script []mockmodel.Reply
	}{
		{"claude", "", []mockmodel.Reply{
			{Tool: "Bash", Input: map[string]any{"command": "id -u > hi.txt"}},
			{Tool: "Write", Input: map[string]any{"file_path": "/workspace/notes.md", "content": "# notes\n"}},
			{Text: "Turn one is done."},
		}},
		{"codex", "/v1", []mockmodel.Reply{
			{Tool: "exec_command", Input: map[string]any{"cmd": "id -u > hi.txt"}},
			{Tool: "apply_patch", Custom: true, Input: notes},
			{Text: "Turn one is done."},
		}},
		{"opencode", "/v1", []mockmodel.Reply{
			{Tool: "bash", Input: map[string]any{"command": "id -u > hi.txt", "description": "write hi.txt"}},
			{Tool: "apply_patch", Input: map[string]any{"patchText": notes}},
			{Text: "Turn one is done."},
		}},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			ctx := context.Background()
			p := ownedProject(t)
			model, base := enginetest.Model(t, e.Docker, tc.script...)
			s, err := e.Create(ctx, api.CreateRequest{Project: p, Image: image, Limits: agentLimits})
			must(t, err)
			req := api.AgentRequest{Agent: tc.agent, Prompt: "first prompt: make hi.txt and notes.md", BaseURL: base + tc.suffix, APIKey: testKey}
			t1, evs := turn(t, e, s.ID, req)
			if t1.State != "done" || t1.N != 1 || t1.AgentSession == "" || t1.Final != "Turn one is done." {
				t.Fatalf("turn 1: %+v", t1)
			}
			for _, want := range []struct {
				typ string
				ok  func(api.Event) bool
			}{
				{harness.EventSession, func(ev api.Event) bool { return ev.Session == t1.AgentSession }},
				{harness.EventToolCall, nil},
				{harness.EventCommand, func(ev api.Event) bool {
					return strings.Contains(ev.Command, "id -u > hi.txt") && ev.ExitCode != nil && *ev.ExitCode == 0
				}},
				{harness.EventFileEdit, func(ev api.Event) bool { return ev.Path == "notes.md" }},
				{harness.EventUsage, func(ev api.Event) bool { return ev.Usage.InputTokens > 0 }},
				{harness.EventMessage, func(ev api.Event) bool { return ev.Text == "Turn one is done." }},
				{harness.EventTurnDone, func(ev api.Event) bool { return *ev.ExitCode == 0 && ev.Usage.OutputTokens > 0 }},
			} {
				if !has(evs, want.typ, want.ok) {
					t.Errorf("no %s event as expected in %s", want.typ, mustJSON(evs))
				}
			}
			// The edits are in the session, owned by the project's user.
			d, err := e.Diff(ctx, s.ID, nil)
			must(t, err)
			added := map[string]string{}
			for _, f := range d.Files {
				added[f.Path] = string(f.Kind)
			}
			if added["hi.txt"] != "added" || added["notes.md"] != "added" {
				t.Fatalf("diff %v: want hi.txt and notes.md added", added)
			}
			if _, out := run(t, e, s.ID, "cat", "hi.txt"); out != "1000\n" {
				t.Errorf("the agent ran as uid %q, want the project owner's 1000", out)
			}
			for _, f := range []string{"hi.txt", "notes.md"} {
				if _, err := os.Stat(filepath.Join(p, f)); err == nil {
					t.Errorf("%s reached the host project before any accept", f)
				}
			}
			for _, r := range model.Requests() {
				if r.Scripted && r.APIKey != testKey {
					t.Errorf("the model got key %q, want the one given on the host (injected in transit)", r.APIKey)
				}
			}
			// The key never entered the session: not in any process's
			// environment or command line, not in a file it can read.
			// (The pattern is put together from halves into a file in
			// /dev/shm, so that no command line holds it.)
			half := len(testKey) / 2
			code, found := run(t, e, s.ID, "sh", "-c", "printf '%s%s' '"+testKey[:half]+"' '"+testKey[half:]+"' > /dev/shm/pat; "+
				"cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -F -f /dev/shm/pat; "+
				"grep -rsF -f /dev/shm/pat /home /workspace /tmp /etc 2>/dev/null; true")
			if code != 0 || strings.Contains(found, testKey) {
				t.Errorf("the API key is visible inside the session: %q", found)
			}

			// Turn two continues the conversation.
			model.Push(mockmodel.Reply{Text: "Turn two is done."})
			before := len(model.Requests())
			t2, _ := turn(t, e, s.ID, api.AgentRequest{Prompt: "second prompt", BaseURL: base + tc.suffix, APIKey: testKey})
			if t2.State != "done" || t2.N != 2 || t2.Agent != tc.agent || t2.Final != "Turn two is done." {
				t.Fatalf("turn 2: %+v", t2)
			}
			if tc.agent == "claude" && !(t2.Usage.CostUSD > 0 && t2.Usage.CostUSD < t1.Usage.CostUSD) {
				// Claude Code reports the conversation's total; a turn shows its own.
				t.Errorf("turn costs %v then %v: turn 2 (one model call) should cost less than turn 1 (three)", t1.Usage.CostUSD, t2.Usage.CostUSD)
			}
			if t2.AgentSession != t1.AgentSession {
				t.Errorf("turn 2 ran in conversation %q, turn 1 in %q", t2.AgentSession, t1.AgentSession)
			}
			continued := false
			for _, r := range model.Requests()[before:] {
				if r.Scripted && strings.Contains(r.Body, "first prompt") && strings.Contains(r.Body, "second prompt") {
					continued = true
				}
			}
			if !continued {
				t.Errorf("turn 2's model request does not carry turn 1's conversation")
			}
			stored, err := e.Events(ctx, s.ID, 0)
			must(t, err)
			if len(stored) < len(evs)+2 || stored[0].Turn != 1 || stored[len(stored)-1].Turn != 2 || stored[len(stored)-1].Type != harness.EventTurnDone {
				t.Errorf("stored events: %d (turn 1 streamed %d)", len(stored), len(evs))
			}
		})
	}

	t.Run("unreachable endpoint", func(t *testing.T) {
		s, err := e.Create(context.Background(), api.CreateRequest{Project: ownedProject(t), Image: image, Limits: agentLimits})
		must(t, err)
		_, base := enginetest.Model(t, e.Docker)
		closed := base[:strings.LastIndex(base, ":")] + ":1"
		_, err = e.Agent(context.Background(), s.ID, api.AgentRequest{Agent: "claude", Prompt: "hi", BaseURL: closed, APIKey: testKey}, nil)
		if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("err %v: want a clear unreachable error", err)
		}
	})
}

// --schema: an answer that does not match gets one retry turn in the same
// conversation; a second miss is an error that keeps the raw answer.
func TestAgentSchema(t *testing.T) {
	e := enginetest.Start(t)
	image := enginetest.AgentsImage(t, e.Docker)
	schema := json.RawMessage(`{"type":"object","properties":{"fixed":{"type":"boolean"}},"required":["fixed"]}`)
	model, base := enginetest.Model(t, e.Docker,
		mockmodel.Reply{Text: "I fixed it, trust me."},
		mockmodel.Reply{Text: "```json\n{\"fixed\": true}\n```"},
		mockmodel.Reply{Text: "nope"},
		mockmodel.Reply{Text: "still {\"fixed\": \"maybe\"}"},
	)
	s, err := e.Create(context.Background(), api.CreateRequest{Project: ownedProject(t), Image: image, Limits: agentLimits})
	must(t, err)
	req := api.AgentRequest{Agent: "claude", Prompt: "fix it", BaseURL: base, APIKey: testKey, Schema: schema}
	t1, evs := turn(t, e, s.ID, req)
	if t1.State != "done" || string(t1.Result) != `{"fixed":true}` {
		t.Fatalf("turn %+v: want the retry's answer as the result", t1)
	}
	if !has(evs, harness.EventError, func(ev api.Event) bool { return strings.Contains(ev.Text, "schema") }) {
		t.Errorf("the retry was not announced")
	}
	if !strings.Contains(model.Requests()[len(model.Requests())-1].Body, "did not match") {
		t.Errorf("the retry prompt does not say what was wrong")
	}
	t2, _ := turn(t, e, s.ID, req)
	if t2.State != "failed" || !strings.Contains(t2.Error, "schema") || !strings.Contains(t2.Final, "maybe") || len(t2.Result) != 0 {
		t.Fatalf("turn %+v: want a schema failure with the raw answer kept", t2)
	}
}

// Bad input gets a clear error, and the session and its changes stay.
func TestAgentBadInput(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo kept > kept.txt")
	for _, tc := range []struct {
		name  string
		req   api.AgentRequest
		class func(error) bool
		says  string
	}{
		{"unknown agent", api.AgentRequest{Agent: "gpt-engineer", Prompt: "x"}, errdefs.IsInvalid, "claude"},
		{"no prompt", api.AgentRequest{Agent: "claude", Prompt: "  "}, errdefs.IsInvalid, "prompt"},
		{"no agent yet", api.AgentRequest{Prompt: "x"}, errdefs.IsInvalid, "--agent"},
		{"missing key", api.AgentRequest{Agent: "claude", Prompt: "x"}, errdefs.IsInvalid, "airlock secret set ANTHROPIC_API_KEY"},
		{"not installed", api.AgentRequest{Agent: "codex", Prompt: "x", APIKey: testKey}, errdefs.IsNotFound, "airlock image build --agents codex"},
		{"schema does not parse", api.AgentRequest{Agent: "claude", Prompt: "x", APIKey: testKey, Schema: json.RawMessage(`{"type": 12}`)}, errdefs.IsInvalid, "--schema"},
		{"custom without placeholder", api.AgentRequest{Agent: "custom", Prompt: "x", Cmd: "tool --yes"}, errdefs.IsInvalid, "{prompt}"},
		{"localhost endpoint", api.AgentRequest{Agent: "custom", Prompt: "x", Cmd: "echo {prompt}", BaseURL: "http://localhost:8080"}, errdefs.IsInvalid, "localhost"},
	} {
		_, err := e.Agent(ctx, s.ID, tc.req, nil)
		if err == nil || !tc.class(err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v (class %s): want a %q error", tc.name, err, errdefs.ClassOf(err), tc.says)
		}
	}
	// A stored key is used when none is given.
	must(t, e.SetSecret(ctx, "ANTHROPIC_API_KEY", testKey))
	if _, err := e.Agent(ctx, s.ID, api.AgentRequest{Agent: "claude", Prompt: "x"}, nil); !errdefs.IsNotFound(err) {
		t.Errorf("with a stored key the next problem is the missing CLI, got %v", err)
	}

	// A CLI that crashes mid-turn: what it said is kept, malformed lines
	// included, the turn fails with its exit code, the session goes on.
	tr, evs := turn(t, e, s.ID, api.AgentRequest{Agent: "custom", Events: "jsonl", Prompt: "go",
		Cmd: `echo partial > partial.txt; echo '{"type":"message","text":"half way"}'; echo '{"broken'; echo {prompt} >/dev/null; kill -KILL $$`})
	if tr.State != "failed" || tr.ExitCode == nil || *tr.ExitCode != 137 || !strings.Contains(tr.Error, "137") {
		t.Fatalf("crashed turn %+v", tr)
	}
	if !has(evs, harness.EventMessage, func(ev api.Event) bool { return ev.Text == "half way" }) ||
		!has(evs, harness.EventMessage, func(ev api.Event) bool { return ev.Text == `{"broken` }) {
		t.Errorf("events %s: what the CLI printed before crashing is lost", mustJSON(evs))
	}
	got, err := e.Get(ctx, s.ID)
	must(t, err)
	if got.State != api.StateRunning || got.Changed != 2 {
		t.Errorf("after the crash: state %s, %d changes; want running with kept.txt and partial.txt", got.State, got.Changed)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
