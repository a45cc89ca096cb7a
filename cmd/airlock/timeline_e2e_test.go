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
)

// TestTurnsDiffUndoFork: two agent turns with the real binary and daemon;
// airlock turns lists them, diff --turn shows one, undo goes back to
// before the last (and is undone), fork --turn starts from the first.
func TestTurnsDiffUndoFork(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "true")
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("run did not print the session id: %q", errs)
	}
	id := m[1]
	c.ok("agent", id, "--agent", "custom", "--cmd", "echo one > turn.txt; echo {prompt} >/dev/null", "first")
	c.ok("agent", id, "--agent", "custom", "--cmd", "echo two >> turn.txt; rm README.md; echo {prompt} >/dev/null", "second")

	table := c.ok("turns", id)
	if !strings.Contains(table, "turn 1") || !strings.Contains(table, "turn 2") || !strings.Contains(table, "+1 -1") {
		t.Fatalf("airlock turns:\n%s", table)
	}
	var list []api.Checkpoint
	if err := json.Unmarshal([]byte(c.ok("turns", id, "--json")), &list); err != nil || len(list) != 2 {
		t.Fatalf("airlock turns --json: %v %+v", err, list)
	}
	diff := c.ok("diff", id, "--turn", "2")
	if !strings.Contains(diff, "+two") || !strings.Contains(diff, "README.md") || strings.Contains(diff, "+one") {
		t.Fatalf("airlock diff --turn 2:\n%s", diff)
	}
	if stat := c.ok("diff", id, "--from", "0", "--to", "1", "--stat"); !strings.Contains(stat, "turn.txt") || strings.Contains(stat, "README") {
		t.Fatalf("airlock diff --from 0 --to 1 --stat:\n%s", stat)
	}
	if code, _, errs := c.run("diff", id, "--turn", "7"); code != 66 || !strings.Contains(errs, "airlock turns") {
		t.Errorf("diff of a turn without a checkpoint: exit %d, %q", code, errs)
	}

	blame := c.ok("diff", id, "--blame")
	if !regexp.MustCompile(`(?m)^@@ .* @@.*\[turn 2, checkpoint \d+; no event of the turn names the file\]$`).MatchString(blame) || !strings.Contains(blame, "+two") {
		t.Fatalf("airlock diff --blame:\n%s", blame)
	}
	t.Logf("diff --blame:\n%s", blame)
	var b api.Blame
	if err := json.Unmarshal([]byte(c.ok("diff", id, "--blame", "--json")), &b); err != nil || len(b.Hunks) == 0 || len(b.Diff.Files) == 0 {
		t.Fatalf("diff --blame --json: %v %+v", err, b)
	}
	for _, h := range b.Hunks {
		if h.Path == "turn.txt" && h.Turn != 2 {
			t.Errorf("turn.txt's hunk (one, then two) was last changed by turn 2: %+v", h)
		}
	}

	undo := c.ok("undo", id)
	if !strings.Contains(undo, "turn 1") {
		t.Fatalf("airlock undo: %s", undo)
	}
	if stat := c.ok("diff", id, "--stat"); strings.Contains(stat, "README") || !strings.Contains(stat, "turn.txt") {
		t.Fatalf("the session after undo:\n%s", stat)
	}
	if out := c.ok("exec", id, "--", "cat", "turn.txt"); out != "one\n" {
		t.Fatalf("turn.txt after undo: %q", out)
	}

	forked := strings.Fields(c.ok("fork", id, "--turn", "2", "-n", "1"))
	if len(forked) != 1 {
		t.Fatalf("fork --turn 2: %v", forked)
	}
	if out := c.ok("exec", forked[0], "--", "cat", "turn.txt"); out != "one\ntwo\n" {
		t.Fatalf("turn.txt in the fork of turn 2: %q", out)
	}
	if code, _, _ := c.run("undo", id, "--bogus"); code == 0 {
		t.Error("undo took an unknown flag")
	}
}

// TestCIPatchPerTurn: airlock ci --patch-per-turn writes what each agent
// turn changed as a patch git applies to the checkout.
func TestCIPatchPerTurn(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	c.stopEngine()
	p := gitProject(t)
	out := filepath.Join(t.TempDir(), "out")
	prompt := filepath.Join(t.TempDir(), "task.md")
	os.WriteFile(prompt, []byte("add a note"), 0o644)
	code, _, errs := c.run("ci", "--project", p, "--image", enginetest.Image, "--out", out, "--patch-per-turn",
		"--agent", "custom", "--cmd", "echo note > note.txt; echo {prompt} >/dev/null", "--prompt-file", prompt)
	v := readVerdict(t, out)
	if code != 0 || len(v.TurnPatches) != 1 || v.TurnPatches[0] != "turn-1.patch" {
		t.Fatalf("ci --patch-per-turn: exit %d %+v\n%s", code, v, errs)
	}
	patch, _ := os.ReadFile(filepath.Join(out, "turn-1.patch"))
	apply := exec.Command("git", "apply", "--check", filepath.Join(out, "turn-1.patch"))
	apply.Dir = p
	if b, err := apply.CombinedOutput(); err != nil || !strings.Contains(string(patch), "+note") {
		t.Fatalf("turn-1.patch does not apply (%v %s):\n%s", err, b, patch)
	}
}
