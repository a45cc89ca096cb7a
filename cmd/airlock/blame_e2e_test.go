package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/harness/mockmodel"
	"github.com/chromedp/chromedp"
)

// TestBlameNamesTheToolCall: a real Claude Code turn against the mock
// model writes one file and edits another twice (its first and last
// lines, two hunks); then a command of the user's writes a third. Each
// hunk of `airlock diff --blame` (text, --json, and the review in
// headless Chromium) names the turn and the very tool call that made it
// — the two Edits of one file told apart by their text — or the
// command by its line.
func TestBlameNamesTheToolCall(t *testing.T) {
	c := newCLI(t)
	c.env = append(c.env, "AIRLOCK_CONFIG="+enginetest.ModelConfig(t)) // trust the mock model's TLS
	d := enginetest.Require(t)
	image := enginetest.AgentsImage(t, d)
	long := "line 1\n" + strings.Repeat("middle\n", 15) + "line 17\n"
	_, base := enginetest.Model(t, d,
		mockmodel.Reply{Tool: "Write", Input: map[string]any{"file_path": "/workspace/notes.md", "content": "# notes\nwritten by the Write call\n"}},
		mockmodel.Reply{Tool: "Read", Input: map[string]any{"file_path": "/workspace/long.txt"}},
		mockmodel.Reply{Tool: "Edit", Input: map[string]any{"file_path": "/workspace/long.txt", "old_string": "line 1\n", "new_string": "first line, by the first Edit\n"}},
		mockmodel.Reply{Tool: "Edit", Input: map[string]any{"file_path": "/workspace/long.txt", "old_string": "line 17\n", "new_string": "last line, by the second Edit\n"}},
		mockmodel.Reply{Text: "Done."},
	)
	c.env = append(c.env, "ANTHROPIC_BASE_URL="+base)
	set := exec.Command(c.bin, "secret", "set", "ANTHROPIC_API_KEY")
	set.Env, set.Stdin = c.env, strings.NewReader("sk-blame-test\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secret set: %v: %s", err, out)
	}
	p := sampleProject(t)
	if err := os.WriteFile(filepath.Join(p, "long.txt"), []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}

	// The tool calls as the CLI reported them: their ids.
	ids := map[string][]string{} // tool -> ids, in order
	for _, line := range strings.Split(strings.TrimSpace(c.ok("run", "--project", p, "--image", image, "--agent", "claude", "--prompt", "notes and long.txt", "--json")), "\n") {
		var ev api.Event
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == api.EventToolCall {
			ids[ev.Tool] = append(ids[ev.Tool], ev.ID)
		}
	}
	if len(ids["Write"]) != 1 || len(ids["Edit"]) != 2 || ids["Edit"][0] == "" || ids["Edit"][0] == ids["Edit"][1] {
		t.Fatalf("the CLI's tool calls: %v", ids)
	}
	id := strings.Fields(c.ok("ls", "-q"))[0]
	c.ok("exec", id, "--", "sh", "-c", "echo by hand > hand.txt")

	var b api.Blame
	if err := json.Unmarshal([]byte(c.ok("diff", id, "--blame", "--json")), &b); err != nil {
		t.Fatal(err)
	}
	type want struct {
		turn       int
		tool, call string
		command    string
	}
	wants := map[string]want{ // by path and first added line
		"notes.md # notes":                       {turn: 1, tool: "Write", call: ids["Write"][0]},
		"long.txt first line, by the first Edit": {turn: 1, tool: "Edit", call: ids["Edit"][0]},
		"long.txt last line, by the second Edit": {turn: 1, tool: "Edit", call: ids["Edit"][1]},
		"hand.txt by hand":                       {command: "sh -c echo by hand > hand.txt"},
	}
	seen := 0
	for _, f := range b.Diff.Files {
		for _, h := range f.Hunks {
			added := ""
			for _, l := range h.Lines {
				if strings.HasPrefix(l, "+") {
					added = strings.TrimSpace(l[1:])
					break
				}
			}
			key := f.Path + " " + added
			w, ok := wants[key]
			if !ok {
				t.Errorf("an unexpected hunk %s: %q", key, h.Lines)
				continue
			}
			seen++
			var hb api.HunkBlame
			for _, x := range b.Hunks {
				if x.Path == f.Path && x.Hunk == h.ID {
					hb = x
				}
			}
			if w.command != "" {
				if hb.Kind != api.CheckpointCommand || hb.CommandLine != w.command || hb.Call != nil {
					t.Errorf("%s: %+v, want the command %q", key, hb, w.command)
				}
				continue
			}
			if hb.Turn != w.turn || hb.Call == nil || hb.Call.Tool != w.tool || hb.Call.ID != w.call || hb.Call.Match != api.BlameMatchText ||
				!strings.HasSuffix(hb.Call.Input, f.Path) || hb.Call.Time.IsZero() {
				t.Errorf("%s: %+v call %+v, want turn %d's %s call %s, matched by its text", key, hb, hb.Call, w.turn, w.tool, w.call)
			}
		}
	}
	if seen != len(wants) {
		t.Errorf("%d of the %d hunks seen: %+v", seen, len(wants), b.Diff.Files)
	}

	text := c.ok("diff", id, "--blame")
	t.Logf("diff --blame:\n%s", text)
	for _, re := range []string{
		`(?m)^@@ .* @@.*\[turn 1, checkpoint \d+; Write /workspace/notes.md, call ` + ids["Write"][0] + ` at \d\d:\d\d:\d\d\]$`,
		`(?m)^@@ .* @@.*\[turn 1, checkpoint \d+; Edit /workspace/long.txt, call ` + ids["Edit"][0] + ` at \d\d:\d\d:\d\d\]$`,
		`(?m)^@@ .* @@.*\[turn 1, checkpoint \d+; Edit /workspace/long.txt, call ` + ids["Edit"][1] + ` at \d\d:\d\d:\d\d\]$`,
		"(?m)^@@ .* @@.*\\[command \\d+ `sh -c echo by hand > hand.txt`, checkpoint \\d+\\]$",
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("diff --blame lacks %s", re)
		}
	}

	// The review in the browser: each hunk of long.txt marked with its
	// Edit call.
	ctx := browser(t)
	u := strings.TrimSpace(c.ok("ui", "--no-open"))
	var marks, calls []string
	step(t, ctx, "the review's blame of long.txt",
		chromedp.Navigate(u+"#/s/"+id+"/review/long.txt"),
		chromedp.WaitVisible(`.hunk .blame[data-call]`),
		chromedp.Evaluate(`[...document.querySelectorAll(".hunk .blame")].map((b) => b.textContent)`, &marks),
		chromedp.Evaluate(`[...document.querySelectorAll(".hunk .blame")].map((b) => b.dataset.call)`, &calls),
		screenshot(t, "blame"),
	)
	if strings.Join(calls, ",") != ids["Edit"][0]+","+ids["Edit"][1] || len(marks) != 2 || marks[0] != "turn 1 · Edit /workspace/long.txt · "+ids["Edit"][0] {
		t.Errorf("long.txt's hunks are marked %q with calls %q, want the two Edits %v", marks, calls, ids["Edit"])
	}
}
