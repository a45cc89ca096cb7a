package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/ci"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/harness/mockmodel"
	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

func readVerdict(t *testing.T, out string) ci.Verdict {
	t.Helper()
	var v ci.Verdict
	b, err := os.ReadFile(filepath.Join(out, "verdict.json"))
	if err != nil {
		t.Fatalf("no verdict: %v", err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("verdict.json: %v", err)
	}
	if v.Schema != ci.SchemaVersion {
		t.Errorf("verdict schema %q", v.Schema)
	}
	return v
}

func gitProject(t *testing.T) string {
	t.Helper()
	p := sampleProject(t)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=ci@example.com", "-c", "user.name=ci", "commit", "-qm", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", p}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return p
}

// noLeftovers checks that ci runs left no workspace mounted.
func noLeftovers(t *testing.T, before int) {
	t.Helper()
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if n := strings.Count(string(mounts), "airlock-ci-"); n != before {
		t.Errorf("%d workspace mounts of ci runs are left", n-before)
	}
}

func TestCICommand(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	c.stopEngine() // ci needs no daemon: prove it
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	before := strings.Count(string(mounts), "airlock-ci-")
	p := gitProject(t)
	out := filepath.Join(t.TempDir(), "out")

	// A command whose changes need no human: applied, exit 0.
	code, _, errs := c.run("ci", "--project", p, "--image", enginetest.Image, "--out", out, "--apply", "--", "sh", "-c", "echo fixed > fix.txt")
	v := readVerdict(t, out)
	if code != 0 || v.Outcome != ci.Success || len(v.Applied) != 1 || v.Applied[0] != "fix.txt" {
		t.Fatalf("apply run: exit %d %+v\n%s", code, v, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "fix.txt")); string(b) != "fixed\n" {
		t.Errorf("--apply did not write the checkout: %q", b)
	}
	if patch, _ := os.ReadFile(filepath.Join(out, "changes.patch")); !strings.Contains(string(patch), "+fixed") {
		t.Errorf("changes.patch: %q", patch)
	}
	if md, _ := os.ReadFile(filepath.Join(out, "summary.md")); !strings.Contains(string(md), "Airlock: done") || !strings.Contains(string(md), "`fix.txt`") {
		t.Errorf("summary.md:\n%s", md)
	}
	if _, err := client.New(c.socket).Ping(context.Background()); err == nil {
		t.Error("airlock ci left an engine daemon running")
	}
	noLeftovers(t, before)

	// The checkout now has an uncommitted file: the run starts from it.
	// A held file and a finding; the step summary goes to the named file.
	policy := filepath.Join(t.TempDir(), "ci.yaml")
	os.WriteFile(policy, []byte("hold: [\"docs/**\"]\n"), 0o644)
	summary := filepath.Join(t.TempDir(), "step-summary.md")
	cmd := exec.Command(c.bin, "ci", "--project", p, "--image", enginetest.Image, "--out", out, "--policy", policy, "--apply", "--",
		"sh", "-c", "mkdir -p docs && echo guide > docs/guide.md && echo stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF > creds.ini && echo more >> fix.txt")
	cmd.Env = append(c.env, "GITHUB_STEP_SUMMARY="+summary)
	err := cmd.Run()
	v = readVerdict(t, out)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || v.Outcome != ci.Violation {
		t.Errorf("a finding: %v, outcome %s, want exit 3", err, v.Outcome)
	}
	if !v.Project.Dirty || len(v.Held) != 1 || v.Held[0].Path != "docs/guide.md" || len(v.Findings) == 0 || v.Findings[0].Path != "creds.ini" {
		t.Errorf("verdict: dirty %v held %+v findings %+v", v.Project.Dirty, v.Held, v.Findings)
	}
	for _, bad := range []string{"docs/guide.md", "creds.ini"} {
		if _, err := os.Stat(filepath.Join(p, bad)); err == nil {
			t.Errorf("%s reached the checkout though it needs a human", bad)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(p, "fix.txt")); string(b) != "fixed\nmore\n" {
		t.Errorf("the clean change was not applied: %q", b)
	}
	if md, _ := os.ReadFile(summary); !strings.Contains(string(md), "policy violation") {
		t.Errorf("GITHUB_STEP_SUMMARY:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(out, "summary.md")); err != nil {
		t.Error("the earlier summary.md went missing")
	}

	// The command fails: exit 1.
	if code, _, _ := c.run("ci", "--project", p, "--image", enginetest.Image, "--out", out, "--", "sh", "-c", "exit 7"); code != 1 || readVerdict(t, out).Command.ExitCode != 7 {
		t.Errorf("a failing command: exit %d", code)
	}
	// Bad input: documented codes, a sentence, a verdict where possible.
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--agent", "claude", "--prompt-file", "/nonexistent/task.md"}, 64, "prompt-file"},
		{[]string{"--policy", "/nonexistent/policy.yaml", "--", "true"}, 64, "policy"},
		{[]string{"--require-clean", "--", "true"}, 64, "uncommitted changes"},
		{[]string{}, 64, "nothing to run"},
		{[]string{"--agent", "nosuch", "--prompt", "x"}, 64, "nosuch"},
	} {
		code, _, errs := c.run(append([]string{"ci", "--project", p, "--image", enginetest.Image, "--out", out}, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("ci %v: exit %d, %q; want %d mentioning %q", tc.args, code, errs, tc.code, tc.says)
		}
		if v := readVerdict(t, out); v.ExitCode != tc.code {
			t.Errorf("ci %v: verdict exit %d", tc.args, v.ExitCode)
		}
	}

	// Disk full in out/: exit 73, and the session is still cleaned up.
	full := filepath.Join(t.TempDir(), "full")
	os.Mkdir(full, 0o755)
	if err := unix.Mount("tmpfs", full, "tmpfs", 0, "size=16k"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	defer unix.Unmount(full, 0)
	code, _, errs = c.run("ci", "--project", p, "--image", enginetest.Image, "--out", full, "--", "sh", "-c", "head -c 200000 /dev/urandom | od > big.txt")
	if code != 73 || !strings.Contains(errs, "no space left") || !strings.Contains(errs, "--out") {
		t.Errorf("out/ full: exit %d %q", code, errs)
	}
	noLeftovers(t, before)
}

// TestCIConcurrent runs airlock ci many times at once: each run has an
// engine of its own, and all must come out right.
func TestCIConcurrent(t *testing.T) {
	n := 20
	if testing.Short() {
		n = 4
	}
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	var wg sync.WaitGroup
	errs := make([]string, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := filepath.Join(t.TempDir(), "p")
			os.Mkdir(p, 0o755)
			os.WriteFile(filepath.Join(p, "n.txt"), []byte("0\n"), 0o644)
			out := filepath.Join(t.TempDir(), "out")
			cmd := exec.Command(c.bin, "ci", "--project", p, "--image", enginetest.Image, "--out", out, "--apply", "--", "sh", "-c", fmt.Sprintf("echo %d > n.txt", i))
			cmd.Env = c.env
			b, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Sprintf("run %d: %v\n%s", i, err, b)
				return
			}
			if got, _ := os.ReadFile(filepath.Join(p, "n.txt")); string(got) != fmt.Sprintf("%d\n", i) {
				errs[i] = fmt.Sprintf("run %d wrote %q", i, got)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
	t.Logf("%d concurrent runs in %v", n, time.Since(start).Round(time.Millisecond))
}

// ghWorkflow is the part of a GitHub Actions workflow the test runs.
type ghWorkflow struct {
	Jobs map[string]struct {
		Steps []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// TestCIExamples runs the steps of docs/ci's GitHub Actions and GitLab CI
// examples here, as those runners would (the `uses:` steps aside): build
// Airlock, the agents image, the real Claude Code CLI against the mock
// model, the verdict and the summary.
func TestCIExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Airlock and runs an agent twice")
	}
	c := newCLI(t)
	c.env = append(c.env, "AIRLOCK_CONFIG="+enginetest.ModelConfig(t)) // trust the mock model's TLS
	d := enginetest.Require(t)
	enginetest.AgentsImage(t, d)
	reply := []mockmodel.Reply{
		{Tool: "Bash", Input: map[string]any{"command": "echo fixed > fix.txt"}},
		{Text: "Fixed."},
	}
	_, base := enginetest.Model(t, d, append(reply, reply...)...)
	repo, _ := filepath.Abs("../..")
	shims := t.TempDir()
	// No sudo here (root already): a shim that drops its options.
	os.WriteFile(filepath.Join(shims, "sudo"), []byte("#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n"), 0o755)
	env := append(c.env, "PATH="+shims+":"+os.Getenv("PATH"), "ANTHROPIC_BASE_URL="+base)

	expr := regexp.MustCompile(`\$\{\{\s*([^}]+?)\s*\}\}`)
	// GitHub Actions.
	{
		p := gitProject(t)
		os.MkdirAll(filepath.Join(p, ".airlock"), 0o755)
		os.WriteFile(filepath.Join(p, ".airlock/ci.yaml"), []byte("hold: [\"docs/**\"]\n"), 0o644)
		var wf ghWorkflow
		b, _ := os.ReadFile("../../docs/ci/github-actions.yml")
		if err := yaml.Unmarshal(b, &wf); err != nil {
			t.Fatal(err)
		}
		tmp := t.TempDir()
		ghPath, summary := filepath.Join(tmp, "path"), filepath.Join(tmp, "summary.md")
		os.WriteFile(ghPath, nil, 0o644)
		values := map[string]string{"github.workspace": p, "inputs.task": "make the test pass", "secrets.ANTHROPIC_API_KEY": "sk-ci-test"}
		ran := 0
		for _, step := range wf.Jobs["agent"].Steps {
			if step.Uses != "" {
				continue
			}
			stepEnv := append([]string{}, env...)
			stepEnv = append(stepEnv, "GITHUB_PATH="+ghPath, "GITHUB_STEP_SUMMARY="+summary, "RUNNER_TEMP="+tmp, "GITHUB_WORKSPACE="+p)
			for k, v := range step.Env {
				stepEnv = append(stepEnv, k+"="+expr.ReplaceAllStringFunc(v, func(m string) string { return values[expr.FindStringSubmatch(m)[1]] }))
			}
			stepEnv = append(stepEnv, "AIRLOCK_SRC="+repo) // where this test's Airlock is
			if paths, _ := os.ReadFile(ghPath); len(paths) > 0 {
				stepEnv = append(stepEnv, "PATH="+strings.ReplaceAll(strings.TrimSpace(string(paths)), "\n", ":")+":"+shims+":"+os.Getenv("PATH"))
			}
			cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", step.Run)
			cmd.Dir, cmd.Env = p, stepEnv
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GitHub step %q: %v\n%s", step.Name, err, out)
			}
			ran++
		}
		if ran != 3 {
			t.Errorf("ran %d GitHub steps, want 3", ran)
		}
		v := readVerdict(t, filepath.Join(p, "out"))
		if v.Outcome != ci.Success || v.Agent == nil || v.Agent.Agent != "claude" || len(v.Changes) != 1 || v.Changes[0].Path != "fix.txt" {
			t.Errorf("GitHub run: %+v", v)
		}
		if md, _ := os.ReadFile(summary); !strings.Contains(string(md), "Airlock: done") || !strings.Contains(string(md), "Fixed.") {
			t.Errorf("GitHub step summary:\n%s", md)
		}
	}
	// GitLab CI.
	{
		p := gitProject(t)
		os.MkdirAll(filepath.Join(p, ".airlock"), 0o755)
		os.WriteFile(filepath.Join(p, ".airlock/ci.yaml"), []byte("{}\n"), 0o644)
		var jobs map[string]struct {
			Script []string `yaml:"script"`
		}
		b, _ := os.ReadFile("../../docs/ci/gitlab-ci.yml")
		if err := yaml.Unmarshal(b, &jobs); err != nil {
			t.Fatal(err)
		}
		script := jobs["airlock-agent"].Script
		if len(script) == 0 {
			t.Fatal("the GitLab example has no airlock-agent job")
		}
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", strings.Join(script, "\n"))
		cmd.Dir = p
		cmd.Env = append(env, "CI_PROJECT_DIR="+p, "AIRLOCK_TASK=make the test pass", "AIRLOCK_SRC="+repo, "ANTHROPIC_API_KEY=sk-ci-test")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("GitLab script: %v\n%s", err, out)
		}
		v := readVerdict(t, filepath.Join(p, "out"))
		if v.Outcome != ci.Success || len(v.Changes) != 1 {
			t.Errorf("GitLab run: %+v", v)
		}
		if md, _ := os.ReadFile(filepath.Join(p, "out", "summary.md")); !strings.Contains(string(md), "fix.txt") {
			t.Errorf("GitLab summary.md:\n%s", md)
		}
	}
}

// TestEngineCrashDuringAgentTurn kills the daemon with -9 while an agent
// works; after the restart the session, its workspace, the turn's events,
// the command log and the metering are intact and reviewable.
func TestEngineCrashDuringAgentTurn(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	p := sampleProject(t)
	agent := `echo '{"type":"file_edit","path":"first.txt"}'; echo one > first.txt; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 3; echo two > second.txt; echo '{"type":"message","text":"done"}' #{prompt}`
	run := exec.Command(c.bin, "run", "--project", p, "--image", enginetest.Image, "--agent", "custom", "--events", "jsonl", "--cmd", agent, "--prompt", "work", "--json")
	run.Env = c.env
	must(t, run.Start())
	var id string
	for i := 0; i < 100 && id == ""; i++ {
		time.Sleep(100 * time.Millisecond)
		if ids := strings.Fields(c.ok("ls", "-q")); len(ids) > 0 {
			id = ids[0]
		}
	}
	if id == "" {
		t.Fatal("no session appeared")
	}
	for i := 0; i < 100; i++ { // the agent is at work
		if strings.Contains(c.ok("events", id), "first.txt") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	v, err := client.New(c.socket).Ping(context.Background())
	must(t, err)
	syscall.Kill(v.PID, syscall.SIGKILL)
	run.Wait()
	for i := 0; i < 100 && syscall.Kill(v.PID, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}

	// The next command starts an engine, which re-adopts the session.
	if out := c.ok("ls"); !strings.Contains(out, id) || !strings.Contains(out, "running") {
		t.Fatalf("after kill -9:\n%s", out)
	}
	// The agent's process outlived the engine: its second write lands.
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(c.ok("diff", id, "--stat"), "second.txt") && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	stat := c.ok("diff", id, "--stat")
	if !strings.Contains(stat, "first.txt") || !strings.Contains(stat, "second.txt") {
		t.Errorf("the workspace after the crash:\n%s", stat)
	}
	if ev := c.ok("events", id); !strings.Contains(ev, "first.txt") {
		t.Errorf("the turn's events were lost:\n%s", ev)
	}
	turns, err := client.New(c.socket).Turns(context.Background(), id)
	if err != nil || len(turns) != 1 || turns[0].State != "interrupted" {
		t.Errorf("the turn cut by the crash: %+v %v; want one, interrupted", turns, err)
	}
	if logs := c.ok("logs", id); !strings.Contains(logs, "first.txt") {
		t.Errorf("the command log lost the agent's command:\n%s", logs)
	}
	var m struct {
		CPUSeconds float64 `json:"cpu_seconds"`
	}
	json.Unmarshal([]byte(c.ok("meter", id, "--json")), &m)
	if m.CPUSeconds <= 0.05 {
		t.Errorf("metering after the crash: %v s of CPU, the agent's busy loop alone used more", m.CPUSeconds)
	}
	c.ok("accept", id, "first.txt")
	if b, _ := os.ReadFile(filepath.Join(p, "first.txt")); string(b) != "one\n" {
		t.Errorf("accept after the crash wrote %q", b)
	}
}

// TestRestartAdoptsMany makes many sessions, kills the daemon, and starts
// it again: every session is back, running, its workspace intact.
func TestRestartAdoptsMany(t *testing.T) {
	n := 50
	if testing.Short() {
		n = 8
	}
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	p := sampleProject(t)
	var ids []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", fmt.Sprintf("echo %d > mine.txt", i))
			if m := sessionLine.FindStringSubmatch(errs); m != nil {
				mu.Lock()
				ids = append(ids, m[1])
				mu.Unlock()
			} else {
				t.Errorf("run %d: %s", i, errs)
			}
		}()
	}
	wg.Wait()
	if len(ids) != n {
		t.Fatalf("%d sessions made, want %d", len(ids), n)
	}
	v, err := client.New(c.socket).Ping(context.Background())
	must(t, err)
	syscall.Kill(v.PID, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(v.PID, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	out := c.ok("ls")
	t.Logf("restart and list of %d sessions: %v", n, time.Since(start).Round(time.Millisecond))
	if got := strings.Count(out, "running"); got != n {
		t.Errorf("%d of %d sessions running after the restart:\n%s", got, n, out)
	}
	for _, id := range []string{ids[0], ids[n/2], ids[n-1]} {
		if out := c.ok("exec", id, "--", "cat", "mine.txt"); strings.TrimSpace(out) == "" {
			t.Errorf("session %s lost its workspace", id)
		}
	}
}
