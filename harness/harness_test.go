package harness

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// parseFile runs a parser over a recorded output, as the engine does.
func parseFile(t *testing.T, a *Agent, turn Turn, path string) ([]Event, Parser) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := a.NewParser(turn)
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, p.Line(sc.Bytes())...)
	}
	return append(out, p.End()...), p
}

// kinds lists event types with their main field, for comparison.
func kinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		s := e.Type
		switch e.Type {
		case EventToolCall:
			s += ":" + e.Tool
		case EventFileEdit:
			s += ":" + e.Path
		case EventCommand:
			s += ":" + e.Command
			if e.ExitCode != nil {
				s += "=" + string(rune('0'+*e.ExitCode))
			}
		case EventMessage:
			s += ":" + e.Text
		}
		out = append(out, s)
	}
	return out
}

func find(evs []Event, typ string) *Event {
	for i := range evs {
		if evs[i].Type == typ {
			return &evs[i]
		}
	}
	return nil
}

// Outputs recorded from the real CLIs (see testdata) map to the common
// events: what the agent said, the tools it called, the files it edited,
// the commands with their exit codes, its tokens, its conversation id.
func TestRecordedOutputs(t *testing.T) {
	for _, tc := range []struct {
		agent *Agent
		file  string
		want  []string
		final string
	}{
		{Claude, "testdata/claude.jsonl", []string{
			"session", "tool_call:Bash", "command:echo hello > hi.txt; ls=0", "tool_call:Write", "file_edit:notes.md",
			"message:I created hi.txt and notes.md.", "usage"}, "I created hi.txt and notes.md."},
		{Codex, "testdata/codex.jsonl", []string{
			"session", "tool_call:exec_command", "command:/usr/bin/bash -lc 'echo hi > hi2.txt'=0", "tool_call:apply_patch", "file_edit:added.txt",
			"message:Done with codex.", "usage"}, "Done with codex."},
		{OpenCode, "testdata/opencode.jsonl", []string{
			"session", "tool_call:apply_patch", "file_edit:w.txt", "usage", "error", "usage", "message:Done.", "usage"}, "Done."},
		{Aider, "testdata/aider.txt", []string{
			"session", "message:I'll add a greeting function to hello.py.\n\nhello.py\n<<<<<<< SEARCH\n=======\ndef greet():\n    print(\"hello\")\n>>>>>>> REPLACE",
			"file_edit:hello.py", "usage", "tool_call:shell", "message:The function is in place."}, "The function is in place."},
	} {
		t.Run(tc.agent.Name, func(t *testing.T) {
			evs, p := parseFile(t, tc.agent, Turn{}, tc.file)
			if got := kinds(evs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("events\n got %q\nwant %q", got, tc.want)
			}
			if p.Final() != tc.final {
				t.Errorf("final %q, want %q", p.Final(), tc.final)
			}
			if s := find(evs, EventSession); s == nil || s.Session == "" {
				t.Errorf("no conversation id: a later turn could not continue")
			}
			u := find(evs, EventUsage)
			if u == nil || u.Usage == nil || u.Usage.InputTokens == 0 || u.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v: want tokens", u)
			}
		})
	}
}

func TestAiderUsage(t *testing.T) {
	evs := (&textParser{aider: true}).Line([]byte("Tokens: 12k sent, 1.5k cache write, 3.2k cache hit, 250 received. Cost: $0.05 message, $0.10 session."))
	u := find(evs, EventUsage)
	if u == nil || *u.Usage != (Usage{InputTokens: 12000, CacheWriteTokens: 1500, CacheReadTokens: 3200, OutputTokens: 250, CostUSD: 0.05}) {
		t.Fatalf("usage %+v", u)
	}
}

// A line that is not the CLI's JSON is kept as an error event, never
// dropped, and never stops the parse.
func TestMalformedLines(t *testing.T) {
	for _, a := range []*Agent{Claude, Codex, OpenCode} {
		p := a.NewParser(Turn{})
		for _, line := range []string{"not json at all", `{"truncated": `, `[1,2]`, ""} {
			evs := p.Line([]byte(line))
			if line == "" {
				if len(evs) != 0 {
					t.Errorf("%s: an empty line gave %v", a.Name, evs)
				}
				continue
			}
			if len(evs) != 1 || evs[0].Type != EventError || !strings.Contains(evs[0].Text, "unparsed") {
				t.Errorf("%s: %q gave %+v", a.Name, line, evs)
			}
		}
		// Valid JSON of an unknown kind is ignored.
		if evs := p.Line([]byte(`{"type":"something_new","x":1}`)); len(evs) != 0 {
			t.Errorf("%s: an unknown event type gave %+v", a.Name, evs)
		}
	}
}

func TestCommandLines(t *testing.T) {
	inv, err := Claude.Command(Turn{Prompt: "fix it", Model: "m1", Resume: "abc", BaseURL: "http://gw:8080"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"claude", "-p", "fix it", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "--model", "m1", "--resume", "abc"}
	if !reflect.DeepEqual(inv.Argv, want) || !contains(inv.Env, "ANTHROPIC_BASE_URL=http://gw:8080") {
		t.Errorf("claude: %q %q", inv.Argv, inv.Env)
	}
	inv, _ = Codex.Command(Turn{Prompt: "-rf looks like a flag", Resume: "t1", BaseURL: "http://gw/v1"})
	joined := strings.Join(inv.Argv, " ")
	if !strings.Contains(joined, `base_url="http://gw/v1"`) || !strings.Contains(joined, "resume t1 -- -rf looks like a flag") {
		t.Errorf("codex: %q", inv.Argv)
	}
	inv, _ = OpenCode.Command(Turn{Prompt: "p", Model: "qwen", Resume: "ses_1", BaseURL: "http://local:11434/v1"})
	if !strings.Contains(strings.Join(inv.Argv, " "), "--session ses_1 -- p") || !strings.Contains(inv.Env[0], `"baseURL":"http://local:11434/v1"`) || !strings.Contains(inv.Env[0], `"model":"airlock/qwen"`) {
		t.Errorf("opencode: %q %q", inv.Argv, inv.Env)
	}
	inv, _ = Aider.Command(Turn{Prompt: "p", Resume: "aider-chat-history", BaseURL: "http://gw/v1"})
	joined = strings.Join(inv.Argv, " ")
	for _, w := range []string{"--yes-always", "--restore-chat-history", "--openai-api-base http://gw/v1", "--message p", "--chat-history-file /home/airlock/"} {
		if !strings.Contains(joined, w) {
			t.Errorf("aider: %q lacks %q", joined, w)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// The custom agent gets the prompt as an argument of its own: quotes and
// shell syntax in it are never interpreted.
func TestCustomCommand(t *testing.T) {
	for _, cmd := range []string{"tool --message {prompt}", "tool --message '{prompt}'", `tool --message "{prompt}"`} {
		inv, err := Custom.Command(Turn{Cmd: cmd, Prompt: `it's "$(rm -rf /)"`})
		if err != nil {
			t.Fatal(err)
		}
		if inv.Argv[2] != `tool --message "$1"` || inv.Argv[4] != `it's "$(rm -rf /)"` {
			t.Errorf("%s → %q", cmd, inv.Argv)
		}
	}
	for _, bad := range []Turn{{}, {Cmd: "tool --yes"}, {Cmd: "t {prompt}", Events: "xml"}} {
		if _, err := Custom.Command(bad); err == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
	p := Custom.NewParser(Turn{Events: "jsonl"})
	evs := p.Line([]byte(`{"type":"file_edit","path":"a.go"}`))
	evs = append(evs, p.Line([]byte(`{"other":1}`))...)
	evs = append(evs, p.Line([]byte(`plain words`))...)
	if got := kinds(evs); !reflect.DeepEqual(got, []string{"file_edit:a.go", `message:{"other":1}`, "message:plain words"}) {
		t.Errorf("jsonl: %q", got)
	}
}

func TestLookup(t *testing.T) {
	if _, err := Lookup("gpt-engineer"); err == nil || !strings.Contains(err.Error(), "claude") {
		t.Fatalf("unknown agent: %v (the error should list the known ones)", err)
	}
	if got := Installable(); !reflect.DeepEqual(got, []string{"aider", "claude", "codex", "opencode"}) {
		t.Errorf("installable %v", got)
	}
}

func TestSchema(t *testing.T) {
	s, err := CompileSchema([]byte(`{"type":"object","properties":{"fixed":{"type":"boolean"},"files":{"type":"array","items":{"type":"string"}}},"required":["fixed"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]string{
		`{"fixed": true}`: `{"fixed":true}`,
		"I fixed it.\n\n```json\n{\"fixed\": true, \"files\": [\"a.go\"]}\n```\n": `{"fixed":true,"files":["a.go"]}`,
		"Result: {\"fixed\": false} as asked.":                                    `{"fixed":false}`,
	} {
		got, err := s.Check(answer)
		if err != nil || string(got) != want {
			t.Errorf("%q: %s, %v; want %s", answer, got, err, want)
		}
	}
	for _, answer := range []string{`{"fixed": "yes"}`, "no JSON here", `{"files": []}`} {
		if _, err := s.Check(answer); err == nil {
			t.Errorf("%q: want a mismatch", answer)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: the error should be one line: %q", answer, err)
		}
	}
	for _, bad := range []string{`{"type": 12}`, `not json`, `{"$ref": "#/nope"}`} {
		if _, err := CompileSchema([]byte(bad)); err == nil {
			t.Errorf("%s: want a compile error", bad)
		}
	}
}

// No output line, however broken, makes a parser panic or lose the line.
func FuzzParseLine(f *testing.F) {
	for _, file := range []string{"testdata/claude.jsonl", "testdata/codex.jsonl", "testdata/opencode.jsonl", "testdata/aider.txt"} {
		b, _ := os.ReadFile(file)
		for _, l := range strings.Split(string(b), "\n") {
			f.Add([]byte(l))
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, a := range []*Agent{Claude, Codex, OpenCode, Aider, Custom} {
			for _, events := range []string{"", "jsonl"} {
				p := a.NewParser(Turn{Events: events})
				for _, e := range append(p.Line(line), p.End()...) {
					if len(e.ID) > 128 || len(e.Wrote) > MaxWrote || !utf8.ValidString(e.ID) || !utf8.ValidString(e.Wrote) {
						t.Fatalf("%s kept an id of %d bytes, an edit's text of %d", a.Name, len(e.ID), len(e.Wrote))
					}
				}
				p.Final()
			}
		}
	})
}

// Each file edit in a recording names its tool call by the CLI's id,
// the same as the tool_call event's, and carries the text it wrote
// where the CLI's event has it (Codex reports paths only).
func TestRecordedEditsNameTheirCall(t *testing.T) {
	for _, tc := range []struct {
		agent       *Agent
		file        string
		id, path    string
		wrote, tool string
	}{
		{Claude, "testdata/claude.jsonl", "toolu_6", "notes.md", "# notes\n", "Write"},
		{Codex, "testdata/codex.jsonl", "item_1", "added.txt", "", "apply_patch"},
		{OpenCode, "testdata/opencode.jsonl", "call_5", "w.txt", "written\n", "apply_patch"},
	} {
		t.Run(tc.agent.Name, func(t *testing.T) {
			evs, _ := parseFile(t, tc.agent, Turn{}, tc.file)
			var call, edit *Event
			for i, e := range evs {
				switch {
				case e.Type == EventToolCall && e.ID == tc.id:
					call = &evs[i]
				case e.Type == EventFileEdit:
					edit = &evs[i]
				}
			}
			if call == nil || call.Tool != tc.tool {
				t.Fatalf("no tool call %s (%s) in %+v", tc.id, tc.tool, evs)
			}
			if edit == nil || edit.ID != tc.id || edit.Path != tc.path || edit.Wrote != tc.wrote {
				t.Errorf("the edit: %+v, want call %s on %s writing %q", edit, tc.id, tc.path, tc.wrote)
			}
		})
	}
}

// An edit's text and a call's id come from the agent's output: what is
// kept of them is bounded, whole lines, valid UTF-8, however large or
// broken the input.
func TestEditTextBounded(t *testing.T) {
	big := strings.Repeat("line of text\n", 100_000) + "\xff\xfe"
	id := strings.Repeat("i", 10_000)
	in, _ := json.Marshal(map[string]any{"file_path": "/workspace/a.txt", "old_string": "x", "new_string": big})
	line, _ := json.Marshal(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{
		map[string]any{"type": "tool_use", "id": id, "name": "Edit", "input": json.RawMessage(in)}}}})
	edit := find(Claude.NewParser(Turn{}).Line(line), EventFileEdit)
	if edit == nil {
		t.Fatal("no file edit")
	}
	if len(edit.Wrote) > MaxWrote || !strings.HasSuffix(edit.Wrote, "line of text\n") || !utf8.ValidString(edit.Wrote) {
		t.Errorf("wrote %d bytes ending %q", len(edit.Wrote), edit.Wrote[max(0, len(edit.Wrote)-20):])
	}
	if len(edit.ID) > 128 {
		t.Errorf("id of %d bytes kept", len(edit.ID))
	}
	patch := "*** Begin Patch\n*** Update File: b.txt\n@@\n-old\n+" + strings.Repeat("y", 3*MaxWrote) + "\n*** Add File: c.txt\n+c\n*** End Patch\n"
	if got := patchAdded(patch, "b.txt"); len(got) > MaxWrote {
		t.Errorf("a patch's added text of %d bytes kept", len(got))
	}
	custom := Custom.NewParser(Turn{Events: "jsonl"})
	line, _ = json.Marshal(map[string]any{"type": "file_edit", "path": "a.txt", "id": id, "wrote": big})
	if evs := custom.Line(line); len(evs) != 1 || len(evs[0].ID) > 128 || len(evs[0].Wrote) > MaxWrote {
		t.Errorf("a custom agent's edit kept %+v", evs)
	}
	if got := patchAdded(patch, "c.txt"); got != "c\n" {
		t.Errorf("c.txt's added lines %q", got)
	}
}
