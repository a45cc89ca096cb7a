package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/harness/mockmodel"
)

// TestScheduleCLI: schedule add, ls, run, log and rm with the real binary,
// engine and Docker. A run now is a new session over the project whose
// change waits for review (the project is untouched), its on-done command
// runs on the host with the run's session and outcome, bad input is
// refused with what to do, and the schedule and its log survive the
// engine's restart.
func TestScheduleCLI(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")
	done := filepath.Join(t.TempDir(), "on-done")

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--cron", "0 6 * *", "--project", p, "--", "true"}, "five fields"},
		{[]string{"--cron", "@daily", "--project", filepath.Join(p, "nosuch"), "--", "true"}, "give an existing project folder"},
		{[]string{"--cron", "@daily", "--project", p}, "runs nothing"},
		{[]string{"--project", p, "--", "true"}, "no --cron"},
	} {
		args := append([]string{"schedule", "add", "bad"}, tc.args...)
		if code, _, errs := c.run(args...); code == 0 || !strings.Contains(errs, tc.says) {
			t.Errorf("airlock %s: exit %d, %q; want it to say %q", strings.Join(args, " "), code, errs, tc.says)
		}
	}

	c.ok("schedule", "add", "nightly", "--cron", "0 6 * * 1-5", "--project", p, "--image", enginetest.Image,
		"--on-done", `echo "$AIRLOCK_SCHEDULE $AIRLOCK_SESSION $AIRLOCK_OUTCOME $AIRLOCK_EXIT_CODE $AIRLOCK_CHANGED" > `+done,
		"--", "sh", "-c", "echo hi > hello.txt")
	if code, _, errs := c.run("schedule", "add", "nightly", "--cron", "@daily", "--project", p, "--", "true"); code == 0 || !strings.Contains(errs, "airlock schedule rm nightly") {
		t.Errorf("a name taken: exit %d, %q", code, errs)
	}
	var list []api.Schedule
	if err := json.Unmarshal([]byte(c.ok("schedule", "ls", "--json")), &list); err != nil || len(list) != 1 || list[0].Next == nil ||
		list[0].Next.Local().Hour() != 6 || list[0].Next.Local().Weekday() == time.Saturday || list[0].Next.Local().Weekday() == time.Sunday {
		t.Fatalf("schedule ls: %+v %v", list, err)
	}

	code, out, errs := c.run("schedule", "run", "nightly")
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 12 || !strings.Contains(errs, "1 changed path") {
		t.Fatalf("schedule run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if diff := c.ok("diff", id); !strings.Contains(diff, "hello.txt") || !strings.Contains(diff, "+hi") {
		t.Errorf("the run's session has no diff of hello.txt:\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(p, "hello.txt")); err == nil {
		t.Errorf("the run wrote into the project before any accept")
	}
	var runs []api.ScheduleRun
	if err := json.Unmarshal([]byte(c.ok("schedule", "log", "nightly", "--json")), &runs); err != nil || len(runs) != 1 {
		t.Fatalf("schedule log: %+v %v", runs, err)
	}
	if r := runs[0]; r.Session != id || r.Outcome != api.RunDone || r.Trigger != api.TriggerManual || r.Changed != 1 || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("the run logged: %+v", r)
	}
	want := "nightly " + id + " done 0 1\n"
	var got []byte
	for i := 0; i < 100 && string(got) != want; i++ { // on-done runs once the run is recorded
		time.Sleep(50 * time.Millisecond)
		got, _ = os.ReadFile(done)
	}
	if string(got) != want {
		t.Errorf("on-done wrote %q, want %q", got, want)
	}

	// Under --policy, a change the policy holds is the run's outcome.
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	os.WriteFile(policy, []byte("hold: [\"hello.txt\"]\n"), 0o644)
	c.ok("schedule", "add", "guarded", "--cron", "@daily", "--project", p, "--image", enginetest.Image, "--policy", policy,
		"--", "sh", "-c", "echo hi > hello.txt")
	if code, _, errs := c.run("schedule", "run", "guarded"); code != 1 || !strings.Contains(errs, "policy") || !strings.Contains(errs, "hello.txt: held by policy") {
		t.Errorf("a run whose change the policy holds: exit %d, %q", code, errs)
	}
	c.ok("schedule", "rm", "guarded")

	// Under --apply-policy, changes that pass are accepted into the
	// project; changes the policy holds wait for review.
	c.ok("schedule", "add", "applied", "--cron", "@daily", "--project", p, "--image", enginetest.Image, "--apply-policy",
		"--", "sh", "-c", "echo applied > applied.txt")
	c.ok("schedule", "run", "applied")
	if b, err := os.ReadFile(filepath.Join(p, "applied.txt")); err != nil || string(b) != "applied\n" {
		t.Errorf("--apply-policy: the project's applied.txt is %q, %v", b, err)
	}
	c.ok("schedule", "add", "held", "--cron", "@daily", "--project", p, "--image", enginetest.Image, "--apply-policy", "--policy", policy,
		"--", "sh", "-c", "echo hi > hello.txt")
	if code, _, errs := c.run("schedule", "run", "held"); code != 1 || !strings.Contains(errs, "held by policy") {
		t.Errorf("--apply-policy of a held change: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(p, "hello.txt")); err == nil {
		t.Errorf("--apply-policy accepted a change the policy holds")
	}
	c.ok("schedule", "rm", "applied")
	c.ok("schedule", "rm", "held")

	enginetest.StopDaemon(c.socket) // the next command starts another engine
	if log := c.ok("schedule", "log", "nightly"); !strings.Contains(log, id) || !strings.Contains(log, "done") {
		t.Errorf("after the engine's restart, schedule log:\n%s", log)
	}
	c.ok("schedule", "rm", "nightly")
	if out := c.ok("schedule", "ls", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("schedule ls after rm: %s", out)
	}
	if code, _, errs := c.run("schedule", "run", "nightly"); code == 0 || !strings.Contains(errs, "airlock schedule ls") {
		t.Errorf("run of a schedule removed: exit %d, %q", code, errs)
	}
}

// TestScheduleAgent: a scheduled agent turn (claude against the mock
// model, with the engine's stored key) runs in a new session of the
// agents image, and what the agent wrote is in that session's diff, not
// in the project.
func TestScheduleAgent(t *testing.T) {
	c := newCLI(t)
	c.env = append(c.env, "AIRLOCK_CONFIG="+enginetest.ModelConfig(t)) // trust the mock model's TLS
	d := enginetest.Require(t)
	enginetest.AgentsImage(t, d)
	model, base := enginetest.Model(t, d,
		mockmodel.Reply{Tool: "Bash", Input: map[string]any{"command": "echo reviewed > review.txt"}},
		mockmodel.Reply{Text: "Reviewed."},
	)
	p := sampleProject(t)
	set := exec.Command(c.bin, "secret", "set", "ANTHROPIC_API_KEY")
	set.Env, set.Stdin = c.env, strings.NewReader("sk-from-the-secret-store\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secret set: %v: %s", err, out)
	}
	prompt := filepath.Join(t.TempDir(), "nightly.md")
	os.WriteFile(prompt, []byte("Review yesterday's commits.\n"), 0o644)
	c.ok("schedule", "add", "nightly", "--cron", "0 6 * * 1-5", "--project", p, "--agent", "claude",
		"--prompt-file", prompt, "--base-url", base, "--cost-budget", "0.50")

	code, out, errs := c.run("schedule", "run", "nightly")
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 12 {
		t.Fatalf("schedule run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if !strings.Contains(c.ok("diff", id, "--stat"), "review.txt") {
		t.Errorf("the agent's file is not in the run's diff")
	}
	if _, err := os.Stat(filepath.Join(p, "review.txt")); err == nil {
		t.Errorf("the scheduled agent wrote into the project")
	}
	reqs := model.Requests()
	if len(reqs) == 0 || reqs[len(reqs)-1].APIKey != "sk-from-the-secret-store" {
		t.Errorf("the stored key did not reach the scheduled agent")
	}
	var list []api.Session
	if err := json.Unmarshal([]byte(c.ok("ls", "--json")), &list); err != nil || len(list) != 1 || list[0].ID != id || list[0].CostBudget != 0.5 {
		t.Errorf("the run's session (cost budget 0.50): %+v %v", list, err)
	}
	if log := c.ok("schedule", "log", "nightly"); !strings.Contains(log, id) || !strings.Contains(log, "done") {
		t.Errorf("schedule log:\n%s", log)
	}
}
