package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/airlock/airlock/harness/mockmodel"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/creack/pty"
)

// cli runs the real airlock binary against an engine of the test's own.
type cli struct {
	t      *testing.T
	bin    string
	env    []string
	socket string
}

func newCLI(t *testing.T) *cli {
	enginetest.Require(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "airlock")
	if err := os.Link(builtCLI(t), bin); err != nil {
		b, err := os.ReadFile(builtCLI(t)) // another filesystem: a copy
		if err == nil {
			err = os.WriteFile(bin, b, 0o755)
		}
		if err != nil {
			t.Fatalf("the test's CLI: %v", err)
		}
	}
	c := &cli{t: t, bin: bin, socket: filepath.Join(dir, "engine.sock")}
	c.env = append(os.Environ(), "AIRLOCK_ENGINE="+c.socket, "AIRLOCK_STATE_DIR="+filepath.Join(dir, "state"), "NO_COLOR=1")
	t.Cleanup(c.stopEngine)
	return c
}

// The CLI is built once for the package's tests (each links it into a
// directory of its own): building it per test cost 10-20 s each.
var (
	cliOnce  sync.Once
	cliDir   string
	cliBin   string
	cliBuild error
)

func builtCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		if cliDir, cliBuild = os.MkdirTemp("", "airlock-cli-test-"); cliBuild != nil {
			return
		}
		cliBin = filepath.Join(cliDir, "airlock")
		if out, err := exec.Command("go", "build", "-o", cliBin, ".").CombinedOutput(); err != nil {
			cliBuild = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if cliBuild != nil {
		t.Fatalf("build the CLI: %v", cliBuild)
	}
	return cliBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cliDir != "" {
		os.RemoveAll(cliDir)
	}
	os.Exit(code)
}

// stopEngine removes the test's sessions and stops the daemon the CLI
// started on demand.
func (c *cli) stopEngine() { enginetest.StopDaemon(c.socket) }

// run runs airlock with args and returns exit code, stdout and stderr.
func (c *cli) run(args ...string) (int, string, string) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("airlock %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

func (c *cli) ok(args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(args...)
	if code != 0 {
		c.t.Fatalf("airlock %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func sampleProject(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "app")
	os.MkdirAll(filepath.Join(p, "src"), 0o755)
	os.WriteFile(filepath.Join(p, "README.md"), []byte("# app\n"), 0o644)
	os.WriteFile(filepath.Join(p, "src/app.py"), []byte("def greet():\n    return 'hello'\n"), 0o644)
	return p
}

var sessionLine = regexp.MustCompile(`session ([0-9a-f]{12})`)

// TestWalkthrough follows the README's five-minute walkthrough with the
// real binary, daemon and Docker.
func TestWalkthrough(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	pristine := filepath.Join(t.TempDir(), "pristine")
	if out, err := exec.Command("cp", "-a", p, pristine).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}

	c.ok("image", "build", "--tiny")

	code, out, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--",
		"sh", "-c", "echo hi > hello.txt; rm README.md; sed -i s/hello/bye/ src/app.py; echo done")
	if code != 0 || out != "done\n" {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("run did not print the session id: %q", errs)
	}
	id := m[1]
	if fi, err := os.Stat(filepath.Join(c.socket)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("engine socket mode: %v %v, want 0600", fi.Mode(), err)
	}

	// The command's exit code is airlock's.
	if code, _, _ := c.run("exec", id, "--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("exec exit code %d, want 7", code)
	}

	ls := c.ok("ls")
	if !strings.Contains(ls, id) || !strings.Contains(ls, "running") || !regexp.MustCompile(id+`.*\s3\s*$`).MatchString(strings.TrimSpace(ls)) {
		t.Errorf("ls:\n%s", ls)
	}

	stat := c.ok("diff", id, "--stat")
	for _, want := range []string{"added    hello.txt", "deleted  README.md", "modified src/app.py"} {
		if !strings.Contains(stat, want) {
			t.Errorf("diff --stat lacks %q:\n%s", want, stat)
		}
	}
	diff := c.ok("diff", id)
	if !strings.Contains(diff, "+hi") || !strings.Contains(diff, "-    return 'hello'") || !strings.Contains(diff, "+    return 'bye'") {
		t.Errorf("diff:\n%s", diff)
	}
	var d api.Diff
	if err := json.Unmarshal([]byte(c.ok("diff", id, "--json")), &d); err != nil || len(d.Files) != 3 {
		t.Errorf("diff --json: %v, %d files", err, len(d.Files))
	}
	patch := c.ok("diff", id, "--patch")
	apply := exec.Command("git", "apply", "-")
	apply.Dir = pristine
	apply.Stdin = strings.NewReader(patch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Errorf("git apply of diff --patch: %v\n%s\n%s", err, out, patch)
	}

	// Nothing reached the project yet.
	if _, err := os.Stat(filepath.Join(p, "hello.txt")); err == nil {
		t.Fatalf("hello.txt on the host before accept")
	}
	acc := c.ok("accept", id, "hello.txt", "src")
	if !strings.Contains(acc, "hello.txt") || !strings.Contains(acc, "src/app.py") {
		t.Errorf("accept output: %q", acc)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "src/app.py")); !strings.Contains(string(b), "bye") {
		t.Errorf("accepted src/app.py = %q", b)
	}
	if _, err := os.Stat(filepath.Join(p, "README.md")); err != nil {
		t.Errorf("README.md deleted on the host without being accepted")
	}
	c.ok("discard", id, "README.md")
	if out := c.ok("exec", id, "--", "cat", "README.md"); out != "# app\n" {
		t.Errorf("after discard the session has README.md = %q", out)
	}
	if _, _, errs := c.run("diff", id); !strings.Contains(errs, "no changes") {
		t.Errorf("after accept+discard: %q", errs)
	}

	logs := c.ok("logs", id)
	for _, want := range []string{"sed -i", "(exit 0", "exit 7", "(exit 7"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}

	c.ok("rm", id)
	if ls := c.ok("ls", "-q"); strings.TrimSpace(ls) != "" {
		t.Errorf("ls after rm: %q", ls)
	}
}

func TestShellHasARealTerminal(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "true")
	id := sessionLine.FindStringSubmatch(errs)[1]

	cmd := exec.Command(c.bin, "shell", id)
	cmd.Env = c.env
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var screen safeBuffer
	go io.Copy(&screen, f)
	expect := func(want string) {
		t.Helper()
		waitFor(t, &screen, want)
	}
	expect("/workspace")
	f.Write([]byte("tty; stty size; echo $((6*7))x\r"))
	expect("42x")
	expect("30 100")
	expect("/dev/pts/")
	// Ctrl-C interrupts the foreground command, not the shell.
	f.Write([]byte("sleep 30; echo slept\r"))
	time.Sleep(300 * time.Millisecond)
	f.Write([]byte{3})
	f.Write([]byte("echo after$((1+1))\r"))
	expect("after2")
	if strings.Contains(screen.String(), "\nslept\r\n") {
		t.Errorf("Ctrl-C did not interrupt sleep")
	}
	// A resize reaches the session's terminal.
	pty.Setsize(f, &pty.Winsize{Rows: 20, Cols: 70})
	time.Sleep(200 * time.Millisecond)
	f.Write([]byte("stty size\r"))
	expect("20 70")
	f.Write([]byte("exit 5\r"))
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
		t.Errorf("shell exit: %v, want status 5", err)
	}
}

func TestEngineCrashKeepsSessions(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", "echo survived > s.txt")
	id := sessionLine.FindStringSubmatch(errs)[1]
	v, err := client.New(c.socket).Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(v.PID, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(v.PID, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	// The next command starts a new engine, which re-adopts the session.
	if out := c.ok("exec", id, "--", "cat", "s.txt"); out != "survived\n" {
		t.Errorf("after engine kill -9: %q", out)
	}
	if !strings.Contains(c.ok("diff", id, "--stat"), "s.txt") {
		t.Errorf("diff lost after engine restart")
	}
}

func TestCLIErrors(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"diff", "000000000000"}, 66, "no session"},
		{[]string{"run", "--project", "/nonexistent/dir", "--image", enginetest.Image, "--", "true"}, 66, "does not exist"},
		{[]string{"run", "--project", ".", "--image", "airlock/missing", "--", "true"}, 66, "not available locally"},
		{[]string{"run", "--project", ".", "--image", enginetest.Image}, 64, "no command given"},
		{[]string{"run", "--workspace-size", "lots", "--", "true"}, 64, "not a size"},
		{[]string{"frobnicate"}, 64, "unknown command"},
	} {
		code, _, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("airlock %s: exit %d, stderr %q; want %d mentioning %q", strings.Join(tc.args, " "), code, errs, tc.code, tc.says)
		}
	}
}

// safeBuffer is a buffer a command writes into while the test reads it.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestEngineRefusesWithoutPrerequisites checks the messages a user gets
// when Docker is not running or the engine is not root.
func TestEngineRefusesWithoutPrerequisites(t *testing.T) {
	c := newCLI(t)
	noDocker := exec.Command(c.bin, "serve", "--engine", filepath.Join(t.TempDir(), "x.sock"), "--state-dir", t.TempDir())
	noDocker.Env = append(c.env, "DOCKER_HOST=unix:///nonexistent/docker.sock")
	out, err := noDocker.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 69 || !strings.Contains(string(out), "Docker is not running") || !strings.Contains(string(out), "dockerd") {
		t.Errorf("serve without Docker: %v, %q; want exit 69 saying how to start Docker", err, out)
	}

	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	// A copy of the binary that user nobody can run.
	pub, err := os.MkdirTemp("", "airlock-pub-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pub)
	os.Chmod(pub, 0o755)
	bin := filepath.Join(pub, "airlock")
	if out, err := exec.Command("cp", c.bin, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	serve := exec.Command(bin, "serve", "--engine", "/tmp/airlock-nobody.sock", "--state-dir", "/tmp/airlock-nobody")
	serve.SysProcAttr = nobody
	out, err = serve.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 77 || !strings.Contains(string(out), "root or CAP_SYS_ADMIN") {
		t.Errorf("serve as nobody: %v, %q; want exit 77 explaining root is needed", err, out)
	}
	ls := exec.Command(bin, "ls", "--engine", "/tmp/airlock-none.sock")
	ls.SysProcAttr = nobody
	out, err = ls.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 69 || !strings.Contains(string(out), "sudo airlock serve") {
		t.Errorf("ls as nobody with no engine: %v, %q; want exit 69 saying how to start one", err, out)
	}
}

// TestReviewWorkflow drives per-hunk accept and a conflict through the CLI:
// the host changes files while the session works on them.
func TestReviewWorkflow(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	p := filepath.Join(t.TempDir(), "proj")
	os.MkdirAll(p, 0o755)
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, "line "+strconv.Itoa(i))
	}
	os.WriteFile(filepath.Join(p, "f.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(p, "config.yaml"), []byte("mode: slow\nlevel: 1\n"), 0o644)
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c",
		"sed -i -e 's/^line 2$/agent two/' -e 's/^line 28$/agent twenty-eight/' f.txt; sed -i 's/slow/fast/' config.yaml")
	id := sessionLine.FindStringSubmatch(errs)[1]
	// Meanwhile on the host.
	hostLines := append([]string(nil), lines...)
	hostLines[14] = "host fifteen"
	os.WriteFile(filepath.Join(p, "f.txt"), []byte(strings.Join(hostLines, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(p, "config.yaml"), []byte("mode: careful\nlevel: 1\n"), 0o644)

	var d api.Diff
	if err := json.Unmarshal([]byte(c.ok("diff", id, "--json")), &d); err != nil {
		t.Fatal(err)
	}
	files := map[string]int{}
	for i, f := range d.Files {
		files[f.Path] = i
	}
	f, cfg := d.Files[files["f.txt"]], d.Files[files["config.yaml"]]
	if !f.Merged || f.Conflict || len(f.Hunks) != 2 {
		t.Fatalf("f.txt should merge cleanly with two hunks: %+v", f)
	}
	if !cfg.Conflict || len(cfg.Conflicts) != 1 {
		t.Fatalf("config.yaml should conflict: %+v", cfg)
	}
	if stat := c.ok("diff", id, "--stat"); !strings.Contains(stat, "CONFLICT") || !strings.Contains(stat, "merged with host changes") {
		t.Errorf("diff --stat does not flag the conflict and the merge:\n%s", stat)
	}
	c.ok("accept", id, "--hunk", f.Hunks[0].ID)
	got, _ := os.ReadFile(filepath.Join(p, "f.txt"))
	if !strings.Contains(string(got), "agent two\n") || !strings.Contains(string(got), "host fifteen\n") || strings.Contains(string(got), "agent twenty-eight") {
		t.Errorf("after accepting the first hunk:\n%s", got)
	}
	code, _, errs := c.run("accept", id, "config.yaml")
	if code != 1 || !strings.Contains(errs, "--take") {
		t.Errorf("accepting a conflict without a side: exit %d, %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "config.yaml")); string(b) != "mode: careful\nlevel: 1\n" {
		t.Errorf("the conflicting file was written without a choice: %q", b)
	}
	c.ok("accept", id, "config.yaml", "--take", "agent")
	if b, _ := os.ReadFile(filepath.Join(p, "config.yaml")); string(b) != "mode: fast\nlevel: 1\n" {
		t.Errorf("after --take agent: %q", b)
	}
	stat := c.ok("diff", id, "--stat")
	if !strings.Contains(stat, "f.txt") || strings.Contains(stat, "config.yaml") {
		t.Errorf("left for review:\n%s", stat)
	}
}

// TestAgentWalkthrough runs the README's agent commands with the real
// Claude Code CLI against the mock model: a key kept by the engine, a
// first turn as JSON lines, a second turn with a schema, the events.
func TestAgentWalkthrough(t *testing.T) {
	c := newCLI(t)
	c.env = append(c.env, "AIRLOCK_CONFIG="+enginetest.ModelConfig(t)) // trust the mock model's TLS
	d := enginetest.Require(t)
	enginetest.AgentsImage(t, d)
	model, base := enginetest.Model(t, d,
		mockmodel.Reply{Tool: "Bash", Input: map[string]any{"command": "echo fixed > fix.txt"}},
		mockmodel.Reply{Text: "Fixed."},
		mockmodel.Reply{Text: "```json\n{\"files\": [\"fix.txt\"]}\n```"},
	)
	p := sampleProject(t)
	c.env = append(c.env, "ANTHROPIC_BASE_URL="+base)

	set := exec.Command(c.bin, "secret", "set", "ANTHROPIC_API_KEY")
	set.Env, set.Stdin = c.env, strings.NewReader("sk-from-the-secret-store\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secret set: %v: %s", err, out)
	}
	if out := c.ok("secret", "ls"); !strings.Contains(out, "ANTHROPIC_API_KEY") || strings.Contains(out, "sk-from") {
		t.Fatalf("secret ls shows %q: want the name and never the value", out)
	}

	out := c.ok("run", "--project", p, "--agent", "claude", "--prompt", "fix the bug", "--json")
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json printed a line that is not JSON: %q", line)
		}
		// The CLI retries a failed model request by itself and says so;
		// the proxy's log tells whether Airlock caused the failure.
		if ev.Type == "error" && strings.HasPrefix(ev.Text, "model request failed") {
			t.Logf("the agent retried: %s", ev.Text)
			continue
		}
		types = append(types, ev.Type)
	}
	id := strings.Fields(c.ok("ls", "-q"))[0]
	for _, line := range strings.Split(strings.TrimSpace(c.ok("net", "log", id, "--json")), "\n") {
		var conn struct {
			Host    string
			Allowed bool
			Reason  string
		}
		json.Unmarshal([]byte(line), &conn)
		if !conn.Allowed || strings.HasPrefix(conn.Reason, "upstream:") {
			t.Errorf("a model request failed in the proxy: %s", line)
		}
	}
	if !strings.Contains(strings.Join(types, " "), "session tool_call command message usage turn_done") {
		t.Fatalf("events %v:\n%s", types, out)
	}
	if model.Requests()[len(model.Requests())-1].APIKey != "sk-from-the-secret-store" {
		t.Errorf("the stored key did not reach the CLI")
	}
	if !strings.Contains(c.ok("diff", id, "--stat"), "fix.txt") {
		t.Errorf("the agent's file is not in the diff")
	}

	schema := filepath.Join(t.TempDir(), "result.schema.json")
	os.WriteFile(schema, []byte(`{"type":"object","required":["files"],"properties":{"files":{"type":"array"}}}`), 0o644)
	out = c.ok("agent", id, "which files did you change?", "--schema", schema)
	if strings.TrimSpace(out) != `{"files":["fix.txt"]}` {
		t.Errorf("the structured result printed %q", out)
	}
	if out := c.ok("events", id, "--turn", "2"); !strings.Contains(out, "turn 2 done") {
		t.Errorf("events --turn 2: %q", out)
	}

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"run", "--project", p, "--agent", "nosuch", "--prompt", "x"}, 64, "unknown agent"},
		{[]string{"run", "--project", p, "--agent", "claude"}, 64, "no prompt"},
		{[]string{"run", "--project", p, "--prompt", "x"}, 64, "--agent"},
		{[]string{"agent", id, "x", "--schema", "/nonexistent.json"}, 64, "--schema"},
	} {
		code, _, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("airlock %v: exit %d, %q; want %d and %q", tc.args, code, errs, tc.code, tc.says)
		}
	}
}

// TestNetworkPolicyWalkthrough runs the README's network commands: a
// blocked request is in the log, allowed from it in one command, and the
// next request goes through. The outside is a namespace of the test's.
func TestNetworkPolicyWalkthrough(t *testing.T) {
	c := newCLI(t)
	out := enginetest.NewOutside(t)
	p := sampleProject(t)
	get := "printf 'GET http://" + out.IPv4 + "/ HTTP/1.0\\r\\n\\r\\n' | nc -w 3 $(ip route | awk '/default/{print $3}') 3128"
	code, _, errs := c.run("run", "--project", p, "--image", "airlock/tiny", "--net", "custom", "--allow", "*.example.org", "--", "sh", "-c", get)
	id := sessionLine.FindStringSubmatch(errs)
	if id == nil {
		t.Fatalf("no session id in %q (exit %d)", errs, code)
	}
	log := c.ok("net", "log", id[1], "--blocked", "--json")
	var entry api.EgressEntry
	if err := json.Unmarshal([]byte(strings.SplitN(log, "\n", 2)[0]), &entry); err != nil || entry.Host != out.IPv4 || entry.Allowed {
		t.Fatalf("blocked log %q: %v", log, err)
	}
	if text := c.ok("net", "log", id[1]); !strings.Contains(text, "BLOCKED") || !strings.Contains(text, out.IPv4) {
		t.Errorf("net log: %q", text)
	}
	if text := c.ok("net", "allow", id[1], "--from-log", strconv.FormatInt(entry.ID, 10)); !strings.Contains(text, "allow "+out.IPv4+":80") {
		t.Errorf("net allow printed %q", text)
	}
	if text := c.ok("exec", id[1], "--", "sh", "-c", get); !strings.Contains(text, "the outside answers") {
		t.Errorf("after allowing from the log: %q", text)
	}
	if text := c.ok("policy", id[1]); !strings.Contains(text, "allow *.example.org") || !strings.Contains(text, "mode: custom") {
		t.Errorf("policy: %q", text)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"policy", id[1], "--allow", "10.0.0.1/8"}, "did you mean 10.0.0.0/8"},
		{[]string{"policy", id[1], "--inject", "api.example.org:x-api-key=secret:NOT_STORED"}, "airlock secret set NOT_STORED"},
		{[]string{"net", "allow", id[1], "--from-log", "999999"}, "no log entry"},
		{[]string{"run", "--project", p, "--net", "open", "--", "true"}, "allow-all, deny-all or custom"},
	} {
		if code, _, errs := c.run(tc.args...); code == 0 || !strings.Contains(errs, tc.says) {
			t.Errorf("airlock %v: exit %d, %q; want an error saying %q", tc.args, code, errs, tc.says)
		}
	}
	if s := c.ok("ls"); !strings.Contains(s, "running") {
		t.Errorf("the session should still run after the bad input: %q", s)
	}
}

// TestSnapshotWalkthrough runs the README's snapshot commands, and kills
// the engine in the middle of snapshots: nothing half-made is listed, the
// session is not left frozen, no partial file stays in the store.
func TestSnapshotWalkthrough(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--workspace-size", "900m", "--memory", "1400m", "--",
		"sh", "-c", "echo agent > agent.txt && head -c 400000000 /dev/urandom > big.bin")
	id := sessionLine.FindStringSubmatch(errs)[1]

	snapID := strings.TrimSpace(c.ok("snapshot", id, "--name", "setup"))
	if out := c.ok("snapshots"); !strings.Contains(out, "setup") || !strings.Contains(out, snapID) {
		t.Errorf("snapshots:\n%s", out)
	}
	forked := strings.Fields(c.ok("fork", "setup", "-n", "3"))
	if len(forked) != 3 {
		t.Fatalf("fork printed %q", forked)
	}
	for _, f := range forked {
		if out := c.ok("exec", f, "--", "sh", "-c", "cat agent.txt; wc -c < big.bin"); out != "agent\n400000000\n" {
			t.Errorf("fork %s: %q", f, out)
		}
		c.ok("rm", f)
	}
	tarPath := filepath.Join(t.TempDir(), "snap.tar")
	c.ok("snapshot", "export", "setup", "--no-base", "-o", tarPath)
	imported := strings.TrimSpace(c.ok("snapshot", "import", tarPath))
	restored := strings.TrimSpace(c.ok("restore", imported, "--project", p, "--image", enginetest.Image))
	if out := c.ok("exec", restored, "--", "cat", "agent.txt"); out != "agent\n" {
		t.Errorf("restore of the imported snapshot: %q", out)
	}
	c.ok("rm", restored)
	c.ok("snapshot", "rm", imported, snapID)
	if code, _, errs := c.run("restore", "setup"); code != 66 || !strings.Contains(errs, "airlock snapshots") {
		t.Errorf("restore of a removed snapshot: exit %d %q", code, errs)
	}
	if code, _, errs := c.run("snapshot", "export", "nosuch", "-o", filepath.Join(t.TempDir(), "x.tar")); code != 66 || !strings.Contains(errs, "no snapshot") {
		t.Errorf("export of a missing snapshot: exit %d %q", code, errs)
	}

	// kill -9 of the engine part-way through a snapshot of 400 MB.
	blobs := filepath.Join(filepath.Dir(c.socket), "state", "snapshots", "blobs", "sha256")
	for _, after := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond} {
		v, err := client.New(c.socket).Ping(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		snap := exec.Command(c.bin, "snapshot", id, "--name", "crash")
		snap.Env = c.env
		must(t, snap.Start())
		time.Sleep(after)
		syscall.Kill(v.PID, syscall.SIGKILL)
		snap.Wait()
		for i := 0; i < 100 && syscall.Kill(v.PID, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		// The next command starts an engine that cleans up.
		var list []api.Snapshot
		json.Unmarshal([]byte(c.ok("snapshots", "--json")), &list)
		for _, s := range list {
			r := strings.TrimSpace(c.ok("restore", s.ID))
			c.ok("rm", r)
			c.ok("snapshot", "rm", s.ID)
		}
		if out := c.ok("ls"); !strings.Contains(out, "running") {
			t.Errorf("after a crash %v into a snapshot the session is not running:\n%s", after, out)
		}
		if out := c.ok("exec", id, "--", "cat", "agent.txt"); out != "agent\n" {
			t.Errorf("after a crash %v into a snapshot: exec printed %q", after, out)
		}
		left, _ := os.ReadDir(blobs)
		if len(left) != 0 {
			var names []string
			for _, l := range left {
				names = append(names, l.Name())
			}
			t.Errorf("after a crash %v into a snapshot (%d listed then removed) the store holds %v", after, len(list), names)
		}
		t.Logf("crash %v into a snapshot: %d snapshot(s) listed after", after, len(list))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestInstallService writes the service into a packaging root and checks
// the unit; then runs an engine the way the unit does, with its socket
// shared with a group.
func TestInstallService(t *testing.T) {
	c := newCLI(t)
	root := t.TempDir()
	out := c.ok("install-service", "--root", root, "--dry-run")
	if !strings.Contains(out, "would write "+filepath.Join(root, "etc/systemd/system/airlock.service")) || !strings.Contains(out, "--socket-group airlock") {
		t.Errorf("dry run:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(root, "etc")); err == nil {
		t.Error("the dry run wrote files")
	}
	c.ok("install-service", "--root", root)
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/airlock.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/local/bin/airlock serve --engine " + c.socket, "--socket-group airlock", "After=docker.service", "KillMode=process", "WantedBy=multi-user.target"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %q:\n%s", want, unit)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "usr/local/bin/airlock")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the binary was not installed: %v", err)
	}
	if code, _, errs := c.run("install-service", "--group", "bad group"); code != 64 || !strings.Contains(errs, "not a group name") {
		t.Errorf("a bad group: exit %d %q", code, errs)
	}

	// The engine as the unit runs it: its socket is the group's. It also
	// answers on TCP, with a token.
	sock := filepath.Join(t.TempDir(), "shared.sock")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("a-token-of-this-test-0123456789\n"), 0o600)
	serve := exec.Command(c.bin, "serve", "--engine", sock, "--state-dir", t.TempDir(), "--socket-group", "daemon", "--listen", addr, "--token-file", tokenFile)
	serve.Env = c.env
	var logs bytes.Buffer
	serve.Stderr = &logs
	must(t, serve.Start())
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	var st syscall.Stat_t
	for i := 0; i < 100 && syscall.Stat(sock, &st) != nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if st.Mode&0o777 != 0o660 || st.Gid != 1 { // daemon is gid 1 on Debian
		t.Errorf("the socket is mode %o gid %d, want 660 and the group daemon\n%s", st.Mode&0o777, st.Gid, logs.String())
	}
	get := func(host, token string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/version", nil)
		if host != "" {
			req.Host = host
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := 0; i < 50 && get("", "") == 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if code := get("", "a-token-of-this-test-0123456789"); code != 200 {
		t.Errorf("TCP with the token: %d", code)
	}
	if code := get("", "wrong"); code != 403 {
		t.Errorf("TCP with a wrong token: %d", code)
	}
	if code := get("", ""); code != 403 {
		t.Errorf("TCP without a token: %d", code)
	}
	if code := get("attacker.example.com", "a-token-of-this-test-0123456789"); code != 403 {
		t.Errorf("TCP with a foreign Host (DNS rebinding): %d", code)
	}
	if code, _, errs := c.run("serve", "--engine", filepath.Join(t.TempDir(), "x.sock"), "--state-dir", t.TempDir(), "--socket-group", "no-such-group-here"); code == 0 || !strings.Contains(errs, "groupadd") {
		t.Errorf("an unknown socket group: exit %d %q", code, errs)
	}
}

// TestAcceptTakesWhatWasReviewed: the CLI accepts by the digests of a saved
// diff. A file swapped since is refused with nothing written, a file added
// since is left, and everything never takes what the scanners flagged or
// the policy holds unless named or --include-flagged.
func TestAcceptTakesWhatWasReviewed(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	p := sampleProject(t)
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c",
		"echo reviewed > main.txt; ln -s /root root-link; ln -s /etc/hostname host-link; echo x > suid; chmod 4755 suid; "+
			"echo 'stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF' > keys.txt; echo '{}' > package-lock.json; truncate -s 42949672960 disk.img")
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no session: %s", errs)
	}
	id := m[1]
	reviewed := filepath.Join(t.TempDir(), "reviewed.json")
	save := func() {
		must(t, os.WriteFile(reviewed, []byte(c.ok("diff", id, "--json")), 0o600))
	}

	// Swapped after the review: refused, the project unchanged.
	save()
	c.ok("exec", id, "--", "sh", "-c", "echo swapped > main.txt")
	code, _, errs := c.run("accept", id, "--reviewed", reviewed)
	if code != 75 || !strings.Contains(errs, "main.txt changed since you reviewed it") {
		t.Errorf("accept of a swapped file: exit %d, %q", code, errs)
	}
	if entries, _ := os.ReadDir(p); len(entries) != 2 {
		t.Fatalf("a refused accept wrote the project: %v", entries)
	}

	// Reviewed again; then the agent adds a file. Everything reviewed is
	// taken but the flagged and held changes and the new file.
	save()
	c.ok("exec", id, "--", "sh", "-c", "echo later > later.txt")
	code, out, errs := c.run("accept", id, "--reviewed", reviewed)
	if code != 1 || !regexp.MustCompile(`accepted added\s+main.txt\s+sha256:[0-9a-f]{12}`).MatchString(out) {
		t.Errorf("accept: exit %d\n%s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "main.txt")); string(b) != "swapped\n" {
		t.Errorf("main.txt = %q", b)
	}
	for path, why := range map[string]string{
		"root-link": "flagged by symlink_escape", "host-link": "flagged by symlink_escape", "suid": "setuid",
		"keys.txt": "flagged by secrets", "package-lock.json": "held by policy", "disk.img": "flagged by large_binary",
		"later.txt": "not in the diff you reviewed",
	} {
		if !regexp.MustCompile(`left in the session: ` + regexp.QuoteMeta(path) + `: .*` + regexp.QuoteMeta(why)).MatchString(errs) {
			t.Errorf("%s is not reported as left (%s):\n%s", path, why, errs)
		}
		if _, err := os.Lstat(filepath.Join(p, path)); err == nil {
			t.Errorf("%s reached the project", path)
		}
	}

	// Named, the symlink is taken, as a symlink; --include-flagged takes the rest.
	c.ok("accept", id, "root-link")
	if target, err := os.Readlink(filepath.Join(p, "root-link")); err != nil || target != "/root" {
		t.Errorf("root-link on the host: %q %v", target, err)
	}
	c.ok("accept", id, "--include-flagged")
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(p, "disk.img"), &st))
	if st.Size != 40<<30 || st.Blocks*512 > 1<<20 {
		t.Errorf("disk.img on the host: %d bytes, %d allocated (want 40 GiB, sparse)", st.Size, st.Blocks*512)
	}
	if fi, err := os.Lstat(filepath.Join(p, "host-link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("host-link on the host is not a symlink: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(p, "suid")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("suid on the host: %v %v", fi.Mode(), err)
	}
	// Now, without a listing: telling the two 40 GiB files equal reads
	// both whole (review/changes.go's sameContent).
	c.ok("rm", id)
}

// TestHibernateWalkthrough: a hibernated session shows in ls with its
// size on disk, its diff reads without waking it, it stays hibernated
// across an engine kill -9, and exec wakes it with its files.
func TestHibernateWalkthrough(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")
	if code, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--workspace", "ram", "--", "true"); code == 0 || !strings.Contains(errs, "tmpfs or disk") {
		t.Errorf("--workspace ram: exit %d, %q", code, errs)
	}
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", "echo slept > s.txt")
	id := sessionLine.FindStringSubmatch(errs)[1]
	if _, _, errs := c.run("hibernate", id); !strings.Contains(errs, "hibernated (") || !strings.Contains(errs, "on disk, no processes)") {
		t.Errorf("airlock hibernate said %q", errs)
	}
	if ls := c.ok("ls"); !strings.Contains(ls, "hibernated (") {
		t.Errorf("ls:\n%s", ls)
	}
	if !strings.Contains(c.ok("diff", id, "--stat"), "s.txt") {
		t.Errorf("no diff of the hibernated session")
	}
	v, err := client.New(c.socket).Ping(context.Background())
	must(t, err)
	syscall.Kill(v.PID, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(v.PID, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if ls := c.ok("ls"); !strings.Contains(ls, "hibernated (") {
		t.Errorf("ls after an engine restart:\n%s", ls)
	}
	if out := c.ok("exec", id, "--", "cat", "s.txt"); out != "slept\n" {
		t.Errorf("exec after the wake: %q", out)
	}
	if ls := c.ok("ls"); !strings.Contains(ls, "running") {
		t.Errorf("ls after the wake:\n%s", ls)
	}
}
