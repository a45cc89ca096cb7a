package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/enginetest"
	dockerclient "github.com/docker/docker/client"
)

// The engine's memory during a hostile scenario. The ceiling is generous on
// purpose (the benchmark has the precise figure). Above the kill line the
// test kills the engine itself, so that a runaway engine cannot take the
// machine, and the other tests on it, down with it. The ceiling is what a
// request may add; 200,000 changed files reviewed whole for an accept of
// everything (hunks, policy, scanners, digests) take about 650 MiB today,
// far from the 64 MB target, which benchmark 16 tracks.
const (
	rssCeiling = 1 << 30
	rssKill    = 3 << 30
)

// want is what a step's answer may be.
type want int

const (
	wantOK      want = iota // the request succeeds (exit 0)
	wantAnswer              // a result, or a classed error that says what to do
	wantRefusal             // a classed error that says what to do
	wantAny                 // exec: any exit code (the command's own), but an answer
)

// request is one CLI request of a scenario.
type request struct {
	name    string   // what it does, for messages (default: the command line)
	args    []string // airlock's arguments; {{var}} is expanded
	stdin   string   // a file passed as standard input
	want    want
	writes  bool     // an accept: may change the project
	only    []string // with writes: the paths it may change (and what is below them); nil: any
	timeout time.Duration
	keep    int                        // stdout bytes kept for save and check (default 1 MiB)
	save    func(h *hostile, r *reply) // records variables for later steps
	check   func(h *hostile, r *reply) // what this request must have done
}

// scenario is a hostile workspace: what the session does, then the
// requests made of the engine about it.
type scenario struct {
	name     string
	heavy    string   // when set, skipped under -short with this message
	image    string   // default enginetest.Image
	runFlags []string // flags of `airlock run`
	script   string   // the session's first command (sh -c); none when empty
	helper   bool     // copy the static helper into the session first (/tmp/hh)
	setup    func(h *hostile)
	// during are commands run in the session, in the background, while
	// the steps run; each prints "started" first and stops when
	// /tmp/hostile-stop exists.
	during   []string
	hostSize string // the host tmpfs's size (default 1g)
	steps    []request
}

// hostileSuite is what every scenario shares.
type hostileSuite struct {
	bin    string // the airlock binary
	helper string // the static helper binary
	shadow []byte // a line of the host's /etc/shadow (never printed)
}

// hostile is one scenario's run: a tmpfs standing for the host (project,
// canary, engine state), an engine of its own, and what was seen.
type hostile struct {
	t       *testing.T
	s       *hostileSuite
	sc      scenario
	root    string // the tmpfs
	project string
	canary  string // outside the project: must never change nor leak
	state   string
	socket  string
	env     []string
	secret  string
	needles []needle
	vars    map[string]string

	engine    *exec.Cmd
	pid       int
	exited    chan struct{}
	killedFor string // set when the watchdog killed the engine
	wdMu      sync.Mutex
	wdStop    chan struct{}
	idleRSS   int64
	peakRSS   int64
	peakStep  string

	projectTree fileTree
	canaryTree  fileTree
	hostTree    fileTree

	dead, stuck bool // the engine died or a request hung: later steps are pointless
	bg          []*background
	failures    []string
	reported    map[string]bool // leaks already reported (what, where)
}

type needle struct {
	name string
	data []byte
}

// hostileRequire is enginetest.Require, except that under -short the light
// scenarios still run where they can (root and Docker), so that a quick
// run keeps the engine honest about hostile input.
func hostileRequire(t *testing.T) *dockerclient.Client {
	t.Helper()
	return enginetest.Prerequisites(t)
}

// runHostile runs one scenario from a fresh host tmpfs and a fresh engine.
func runHostile(t *testing.T, s *hostileSuite, sc scenario) {
	if sc.heavy != "" && testing.Short() {
		t.Skip(sc.heavy)
	}
	h := &hostile{t: t, s: s, sc: sc, vars: map[string]string{}, reported: map[string]bool{}}
	h.mountHost()
	h.makeCanary()
	h.makeProject()
	t.Cleanup(h.cleanup)
	h.startEngine()
	h.projectTree = snapTree(h.project, nil)
	h.canaryTree = snapTree(h.canary, nil)
	h.hostTree = hostFiles()

	if sc.script != "" {
		image := sc.image
		if image == "" {
			image = enginetest.Image
		}
		args := append([]string{"run", "--project", h.project, "--image", image}, sc.runFlags...)
		args = append(args, "--", "sh", "-c", sc.script)
		timeout := 2 * time.Minute
		if sc.heavy != "" {
			timeout = 10 * time.Minute
		}
		h.do(request{name: "the session's first command", args: args, want: wantOK, timeout: timeout, save: func(h *hostile, r *reply) {
			if m := sessionLine.FindStringSubmatch(r.stderr.String()); m != nil {
				h.vars["id"] = m[1]
			}
		}})
		if h.vars["id"] == "" {
			t.Fatalf("no session: its first command did not start (see above)")
		}
	}
	if sc.helper {
		h.do(request{name: "copy the helper into the session", args: []string{"exec", "-i", "{{id}}", "--", "sh", "-c", "mkdir -p /tmp && cat > /tmp/hh && chmod 755 /tmp/hh"}, stdin: s.helper, want: wantOK})
	}
	for _, cmd := range sc.during {
		h.startBackground(cmd)
	}
	for _, st := range sc.steps {
		h.do(st)
	}
	h.stopBackground()
	if h.vars["id"] != "" {
		h.do(request{name: "remove the session", args: []string{"rm", "{{id}}"}, want: wantOK})
	}
	h.finalChecks()
}

// mountHost mounts a size-capped tmpfs that stands for the host: whatever
// the engine wrongly writes (a 40 GB file copied byte for byte, a snapshot
// of it) fills this, not the machine's disk.
func (h *hostile) mountHost() {
	t := h.t
	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "alh-")
	if err != nil {
		t.Fatal(err)
	}
	size := h.sc.hostSize
	if size == "" {
		size = "1g"
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		os.Remove(dir)
		t.Fatalf("mount a tmpfs for the scenario's host: %v", err)
	}
	h.root = dir
	t.Cleanup(func() {
		unmountBelow(t, dir)
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Logf("unmount %s: %v; detaching it", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		os.Remove(dir)
	})
	h.project = filepath.Join(dir, "project")
	h.canary = filepath.Join(dir, "canary")
	h.state = filepath.Join(dir, "state")
	h.socket = filepath.Join(dir, "engine.sock")
	h.env = append(os.Environ(), "AIRLOCK_ENGINE="+h.socket, "AIRLOCK_STATE_DIR="+h.state, "NO_COLOR=1")
	h.vars["project"], h.vars["canary"], h.vars["root"] = h.project, h.canary, dir
}

// makeCanary writes the host's things the session must never reach: a
// fake secret, files named like the session's, and a git repository whose
// commit carries the secret.
func (h *hostile) makeCanary() {
	b := make([]byte, 12)
	rand.Read(b)
	h.secret = "AIRLOCK-CANARY-" + hex.EncodeToString(b)
	h.needles = []needle{{"the canary's fake secret (a host file outside the project)", []byte(h.secret)}}
	if len(h.s.shadow) > 0 {
		h.needles = append(h.needles, needle{"a line of the host's /etc/shadow", h.s.shadow})
	}
	c := h.canary
	files := map[string]string{
		"secret.txt":     "fake secret: " + h.secret + "\n",
		"keep.txt":       "keep " + h.secret + "\n",
		"run.sh":         "echo host " + h.secret + "\n",
		"tool.sh":        "echo host tool " + h.secret + "\n",
		"dir/nested.txt": "nested " + h.secret + "\n",
		"dir/secret.txt": "dir " + h.secret + "\n",
		"sub/nested.txt": "sub " + h.secret + "\n",
	}
	for name, data := range files {
		p := filepath.Join(c, name)
		must(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(h.t, os.WriteFile(p, []byte(data), 0o644))
	}
	// Modes no session or project file has: a chmod through a symlink
	// to them changes them whatever mode it sets (and their ctime).
	must(h.t, os.Chmod(filepath.Join(c, "secret.txt"), 0o600))
	must(h.t, os.Chmod(filepath.Join(c, "run.sh"), 0o640))
	must(h.t, os.Chmod(filepath.Join(c, "tool.sh"), 0o640))
	must(h.t, os.Chmod(filepath.Join(c, "dir"), 0o750))
	repo := filepath.Join(c, "hostrepo")
	must(h.t, os.MkdirAll(repo, 0o755))
	must(h.t, os.WriteFile(filepath.Join(repo, "secret.txt"), []byte("host repo "+h.secret+"\n"), 0o644))
	h.git(repo, "init", "-q", "-b", "main")
	h.git(repo, "add", "-A")
	h.git(repo, "commit", "-qm", "host commit "+h.secret)
	h.git(repo, "branch", "host-only-branch")
	h.vars["hostcommit"] = strings.TrimSpace(h.git(repo, "rev-parse", "HEAD"))
}

// makeProject writes a small project, the scenario's own files, and
// commits them: every project is a git checkout.
func (h *hostile) makeProject() {
	p := h.project
	files := map[string]string{
		"README.md":         "# app\n",
		"src/app.txt":       "def greet():\n    return 'hello'\n",
		"run.sh":            "echo run\n",
		"tool.sh":           "echo tool\n",
		"cfg/settings.txt":  "mode: slow\n",
		"d/keep.txt":        "project keep\n",
		".gitignore":        "",
		"docs/guide/one.md": "one\n",
	}
	for name, data := range files {
		f := filepath.Join(p, name)
		must(h.t, os.MkdirAll(filepath.Dir(f), 0o755))
		must(h.t, os.WriteFile(f, []byte(data), 0o644))
	}
	if h.sc.setup != nil {
		h.sc.setup(h)
	}
	h.git(p, "init", "-q", "-b", "main")
	h.git(p, "add", "-A")
	h.git(p, "commit", "-qm", "project")
}

func (h *hostile) git(dir string, args ...string) string {
	h.t.Helper()
	c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "gc.auto=0", "-c", "commit.gpgsign=false"}, args...)...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		h.t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

// startEngine runs `airlock serve` for this scenario and starts the
// watchdog on its memory.
func (h *hostile) startEngine() {
	t := h.t
	logf, err := os.OpenFile(filepath.Join(h.root, "engine.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(h.s.bin, "serve", "--engine", h.socket)
	cmd.Env = h.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the engine: %v", err)
	}
	h.engine, h.pid, h.exited = cmd, cmd.Process.Pid, make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(h.exited)
	ctx := context.Background()
	if err := client.New(h.socket).WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatalf("the engine did not start: %v\n%s", err, h.engineLogTail())
	}
	v, err := client.New(h.socket).Ping(ctx)
	if err != nil || v.PID != h.pid {
		t.Fatalf("the engine answering is not the one started (pid %d): %+v %v", h.pid, v, err)
	}
	time.Sleep(200 * time.Millisecond)
	h.idleRSS, _ = procMem(h.pid)
	h.wdStop = make(chan struct{})
	go h.watchdog(h.pid, h.wdStop)
}

// watchdog kills the engine when its memory passes rssKill.
func (h *hostile) watchdog(pid int, stop chan struct{}) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		rss, _ := procRSS(pid)
		if rss > rssKill {
			syscall.Kill(pid, syscall.SIGKILL)
			h.wdMu.Lock()
			h.killedFor = fmt.Sprintf("its RSS reached %s (the test kills it above %s to protect the machine)", mib(rss), mib(rssKill))
			h.wdMu.Unlock()
			return
		}
	}
}

// procMem returns a process's peak RSS (VmHWM), procRSS its current one.
func procMem(pid int) (int64, error) { return procStatus(pid, "VmHWM:") }
func procRSS(pid int) (int64, error) { return procStatus(pid, "VmRSS:") }

func procStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// resetPeak sets the engine's VmHWM back to its current RSS (Linux ≥ 4.0),
// so that each step's peak is its own.
func resetPeak(pid int) {
	os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// engineError says what is wrong with the engine, or "" when the one the
// scenario started still answers.
func (h *hostile) engineError() string {
	h.wdMu.Lock()
	killed := h.killedFor
	h.wdMu.Unlock()
	if killed != "" {
		return "the engine (pid " + strconv.Itoa(h.pid) + ") was killed: " + killed
	}
	select {
	case <-h.exited:
		return fmt.Sprintf("the engine (pid %d) died: %v", h.pid, h.engine.ProcessState)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := client.New(h.socket).Ping(ctx)
	if err != nil {
		return fmt.Sprintf("the engine (pid %d) does not answer a ping: %v", h.pid, err)
	}
	if v.PID != h.pid {
		return fmt.Sprintf("another engine answers (pid %d, not %d): the first one died and the CLI started a new one", v.PID, h.pid)
	}
	return ""
}

func (h *hostile) engineLogTail() string {
	data, _ := os.ReadFile(filepath.Join(h.root, "engine.log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	// A Go crash: its first lines say why; the goroutines after do not.
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "fatal error:") || strings.HasPrefix(lines[i], "panic:") {
			return h.redact("engine log (the crash):\n  " + strings.Join(lines[max(0, i-3):min(len(lines), i+12)], "\n  "))
		}
	}
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return h.redact("engine log (last lines):\n  " + strings.Join(lines, "\n  "))
}

// redact replaces the needles in s, so that no failure message prints a
// host secret.
func (h *hostile) redact(s string) string {
	for _, n := range h.needles {
		s = strings.ReplaceAll(s, string(n.data), "<"+n.name+">")
	}
	return s
}

var varRE = regexp.MustCompile(`\{\{[a-z][a-zA-Z0-9_.:/ -]*\}\}`)

// expand fills {{var}} in args; it reports the first variable no earlier
// request has set.
func (h *hostile) expand(args []string) ([]string, string) {
	out := make([]string, len(args))
	missing := ""
	for i, a := range args {
		out[i] = varRE.ReplaceAllStringFunc(a, func(m string) string {
			k := m[2 : len(m)-2]
			v, ok := h.vars[k]
			if !ok && missing == "" {
				missing = k
			}
			return v
		})
	}
	return out, missing
}

// reply is what one request answered.
type reply struct {
	args     []string
	code     int
	timedOut bool
	dur      time.Duration
	stdout   *capture
	stderr   *capture
	peak     int64 // the engine's peak RSS during the request
	before   int64 // its RSS when the request started (the Go heap it kept from earlier ones)
}

func (r *reply) text() string { return r.stdout.String() + r.stderr.String() }

// label names a request in messages.
func (s request) label(args []string) string {
	if s.name != "" {
		return s.name
	}
	l := "airlock " + strings.Join(args, " ")
	if len(l) > 100 {
		l = l[:100] + "…"
	}
	return "`" + l + "`"
}

// fail records a failure of the scenario.
func (h *hostile) fail(format string, args ...any) {
	h.t.Helper()
	msg := h.redact(fmt.Sprintf(format, args...))
	h.failures = append(h.failures, strings.SplitN(msg, "\n", 2)[0])
	h.t.Error(msg)
}

// do runs a request and checks what every request must satisfy.
func (h *hostile) do(s request) *reply {
	t := h.t
	t.Helper()
	args, missing := h.expand(s.args)
	label := s.label(args)
	if missing != "" {
		t.Logf("skip %s: it needs {{%s}}, which an earlier request did not give", label, missing)
		return nil
	}
	if h.dead || h.stuck {
		t.Logf("skip %s: the engine is gone or a request hung", label)
		return nil
	}
	r := h.cli(s, args)
	what := fmt.Sprintf("exit %d in %s, %d bytes out", r.code, r.dur.Round(time.Millisecond), r.stdout.n)
	if r.timedOut {
		what = "no answer in " + r.dur.Round(time.Second).String()
	}
	t.Logf("%s: %s, engine peak %s", label, what, mib(r.peak))

	if e := h.engineError(); e != "" {
		h.dead = true
		if strings.Contains(e, "was killed") {
			h.peakRSS, h.peakStep = rssKill, label+" (killed)"
		}
		h.fail("%s: %s\n%s\nstderr: %s", label, e, h.engineLogTail(), clip(r.stderr.String()))
		return r
	}
	// The Go heap an earlier request grew stays for a while: a request
	// is blamed only for what it added.
	if r.peak > h.peakRSS && r.peak > r.before+16<<20 {
		h.peakRSS, h.peakStep = r.peak, label
	}
	if r.peak > rssCeiling && r.peak > r.before+16<<20 {
		h.fail("%s: the engine's peak RSS was %s (ceiling %s)", label, mib(r.peak), mib(rssCeiling))
	}
	if r.timedOut {
		h.stuck = true
		h.fail("%s: the request did not answer within %s", label, r.dur.Round(time.Second))
	} else if msg := classify(s.want, r); msg != "" {
		h.fail("%s: %s\nstdout: %s\nstderr: %s", label, msg, clip(r.stdout.String()), clip(r.stderr.String()))
	}
	for _, out := range []*capture{r.stdout, r.stderr} {
		for _, n := range out.found {
			h.fail("%s: its output holds %s", label, n)
		}
	}
	h.checkHost(label)
	if s.writes {
		h.checkWrites(label, s.only)
	} else if d := diffTrees(h.projectTree, snapTree(h.project, h.projectTree), false); len(d) > 0 {
		h.fail("%s changed the project, which only an accept may do:\n  %s", label, listing(d))
		h.projectTree = snapTree(h.project, h.projectTree)
	}
	if args[0] == "snapshot" {
		h.scanTree(label, filepath.Join(h.state, "snapshots"), "the snapshot store")
	}
	if s.save != nil && r.code == 0 {
		s.save(h, r)
	}
	if s.check != nil {
		s.check(h, r)
	}
	return r
}

// cli runs airlock with args under the step's timeout.
func (h *hostile) cli(s request, args []string) *reply {
	timeout := s.timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	keep := s.keep
	if keep == 0 {
		keep = 1 << 20
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.s.bin, args...)
	cmd.Env = h.env
	cmd.WaitDelay = 5 * time.Second
	r := &reply{args: args, stdout: newCapture(h.needles, keep), stderr: newCapture(h.needles, 1<<20)}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	if s.stdin != "" {
		f, err := os.Open(s.stdin)
		must(h.t, err)
		defer f.Close()
		cmd.Stdin = f
	}
	resetPeak(h.pid)
	r.before, _ = procRSS(h.pid)
	t0 := time.Now()
	err := cmd.Run()
	r.dur = time.Since(t0)
	r.peak, _ = procMem(h.pid)
	if ctx.Err() != nil {
		r.timedOut, r.code = true, -1
		return r
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("run airlock %v: %v", args, err)
	}
	return r
}

// transportRE matches what a CLI says when the engine went away rather
// than answering.
var transportRE = regexp.MustCompile(`(?i)\bEOF\b|connection reset|broken pipe|connection refused|server closed|closed network connection|no Airlock engine answers|started the engine`)

// sessionHeaderRE matches the line `run` prints first, naming the session
// it made ("session ID (project P, image I)"): not a message about what
// happened. "session ID's container stopped…" is one.
var sessionHeaderRE = regexp.MustCompile(`^session [0-9a-f]+ \(project `)

// classify says what is wrong with an answer, given what the request wants.
func classify(w want, r *reply) string {
	errs := r.stderr.String()
	if transportRE.MatchString(errs) {
		return fmt.Sprintf("the engine did not answer (exit %d): the client lost the connection", r.code)
	}
	switch {
	case w == wantAny:
		return ""
	case r.code == 0 && w == wantRefusal:
		return "succeeded, but it must be refused with a classed error"
	case r.code == 0:
		return ""
	case w == wantOK:
		return fmt.Sprintf("failed (exit %d); it must succeed", r.code)
	case r.code == 70:
		return "failed with an internal error (exit 70): not a classed error that says what to do"
	case r.code != 1 && r.code != 64 && r.code != 66 && r.code != 69 && r.code != 75 && r.code != 77:
		return fmt.Sprintf("exit %d is not one of the documented exit codes (the CLI crashed?)", r.code)
	}
	msg := ""
	for _, l := range strings.Split(errs, "\n") {
		if m, ok := strings.CutPrefix(l, "airlock: "); ok && !sessionHeaderRE.MatchString(m) {
			msg += m
		}
	}
	if len(strings.TrimSpace(msg)) < 15 {
		return fmt.Sprintf("failed (exit %d) without a message saying what happened", r.code)
	}
	return ""
}

// checkHost fails when anything outside the project changed.
func (h *hostile) checkHost(label string) {
	if d := diffTrees(h.canaryTree, snapTree(h.canary, h.canaryTree), false); len(d) > 0 {
		h.fail("%s changed the host outside the project (the canary directory):\n  %s", label, listing(d))
		h.canaryTree = snapTree(h.canary, nil)
	}
	if d := diffTrees(h.hostTree, hostFiles(), false); len(d) > 0 {
		h.fail("%s changed the host outside the project:\n  %s", label, listing(d))
		h.hostTree = hostFiles()
	}
}

// checkWrites takes the project's new state after an accept: only the
// selected paths may have changed, and no host byte may be in it.
func (h *hostile) checkWrites(label string, only []string) {
	after := snapTree(h.project, h.projectTree)
	if only != nil {
		var outside []string
		for _, d := range diffTrees(h.projectTree, after, true) {
			p := strings.SplitN(d, ":", 2)[0]
			in := false
			for _, o := range only {
				o, _ := h.expand([]string{o})
				if p == o[0] || strings.HasPrefix(p, o[0]+"/") {
					in = true
				}
			}
			if !in {
				outside = append(outside, d)
			}
		}
		if len(outside) > 0 {
			h.fail("%s changed what it was not asked to:\n  %s", label, listing(outside))
		}
	}
	h.projectTree = after
	h.scanTree(label, h.project, "the project")
}

// scanTree fails when a file below dir holds a needle.
func (h *hostile) scanTree(label, dir, what string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		c := newCapture(h.needles, 0)
		io.Copy(c, f)
		for _, n := range c.found {
			rel, _ := filepath.Rel(h.root, p)
			if key := n + "\x00" + rel; !h.reported[key] {
				h.reported[key] = true
				h.fail("%s: %s holds %s (in %s)", label, what, n, rel)
			}
		}
		return nil
	})
}

// finalChecks look at the project once more: nothing of the host in its
// files or in its git objects (an import of the session's commits must
// not bring the host's), and the canary unchanged.
func (h *hostile) finalChecks() {
	h.checkHost("the scenario")
	h.scanTree("at the end", h.project, "the project")
	if _, err := os.Stat(filepath.Join(h.project, ".git")); err == nil {
		c := exec.Command("git", "cat-file", "--batch-all-objects", "--batch")
		c.Dir = h.project
		out := newCapture(h.needles, 0)
		c.Stdout = out
		c.Run()
		for _, n := range out.found {
			h.fail("the project's git objects hold %s", n)
		}
		if err := exec.Command("git", "-C", h.project, "cat-file", "-e", h.vars["hostcommit"]).Run(); err == nil {
			h.fail("the project's repository holds the host repository's commit %s", h.vars["hostcommit"][:10])
		}
	}
	h.t.Logf("engine RSS idle %s, peak %s (during %s)", mib(h.idleRSS), mib(h.peakRSS), h.peakStep)
	if len(h.failures) > 0 {
		h.t.Logf("FAILED %s: %s", h.sc.name, strings.Join(h.failures, "; "))
	}
}

// background is a command running in the session while the steps run.
type background struct {
	cmd      *exec.Cmd
	out, err *capture
	done     chan struct{}
}

func (h *hostile) startBackground(script string) {
	args, missing := h.expand([]string{"exec", "{{id}}", "--", "sh", "-c", script})
	if missing != "" {
		return
	}
	cmd := exec.Command(h.s.bin, args...)
	cmd.Env = h.env
	b := &background{cmd: cmd, out: newCapture(h.needles, 64<<10), err: newCapture(h.needles, 64<<10), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.out, b.err
	must(h.t, cmd.Start())
	go func() { cmd.Wait(); close(b.done) }()
	h.bg = append(h.bg, b)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(b.out.String(), "started") {
		select {
		case <-b.done:
			h.fail("a background command in the session ended before it started: %s\n%s", clip(b.out.String()), clip(b.err.String()))
			return
		default:
		}
		if time.Now().After(deadline) {
			h.fail("a background command in the session did not start within 15s")
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopBackground asks the background commands to stop, then waits.
func (h *hostile) stopBackground() {
	if len(h.bg) == 0 {
		return
	}
	if !h.dead && !h.stuck {
		h.do(request{name: "stop the background commands", args: []string{"exec", "{{id}}", "--", "touch", "/tmp/hostile-stop"}, want: wantOK})
	}
	for _, b := range h.bg {
		select {
		case <-b.done:
		case <-time.After(20 * time.Second):
			b.cmd.Process.Kill()
			<-b.done
		}
		h.t.Logf("background command: %s", strings.TrimSpace(h.redact(clip(b.out.String()+b.err.String()))))
		for _, c := range []*capture{b.out, b.err} {
			for _, n := range c.found {
				h.fail("a command in the session printed %s", n)
			}
		}
	}
	h.bg = nil
}

// cleanup removes the scenario's sessions and stops its engine, starting a
// fresh one when the first died or hangs, so that no container, mount or
// network outlives the test.
func (h *hostile) cleanup() {
	t := h.t
	if h.engine == nil {
		return
	}
	for _, b := range h.bg {
		b.cmd.Process.Kill()
	}
	if h.wdStop != nil {
		close(h.wdStop)
	}
	removeAll := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		c := client.New(h.socket)
		list, err := c.Sessions(ctx)
		if err != nil {
			return err
		}
		for _, s := range list {
			if err := c.Remove(ctx, s.ID); err != nil {
				return err
			}
		}
		return nil
	}
	if h.engineError() != "" || h.stuck || removeAll() != nil {
		t.Logf("cleanup: restarting the engine to remove the sessions")
		h.stopEngine()
		h.startEngineQuietly()
		if err := removeAll(); err != nil {
			t.Errorf("cleanup: remove the sessions: %v", err)
		}
	}
	h.stopEngine()
	// Belt and braces: containers of this engine that are left.
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.airlock.engine="+h.state).Output()
	for _, id := range strings.Fields(string(out)) {
		t.Logf("cleanup: a container was left: %s", id)
		exec.Command("docker", "rm", "-f", id).Run()
	}
}

func (h *hostile) stopEngine() {
	stop := func(pid int, exited func() bool) {
		syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 300 && !exited(); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if !exited() {
			h.t.Logf("the engine (pid %d) did not stop within 15s of SIGTERM: killed", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if h.engine != nil {
		stop(h.pid, func() bool {
			select {
			case <-h.exited:
				return true
			default:
				return false
			}
		})
	}
	// An engine the CLI started on demand after the scenario's died.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if v, err := client.New(h.socket).Ping(ctx); err == nil && v.PID > 0 && v.PID != h.pid {
		stop(v.PID, func() bool { return syscall.Kill(v.PID, 0) != nil })
	}
}

func (h *hostile) startEngineQuietly() {
	cmd := exec.Command(h.s.bin, "serve", "--engine", h.socket)
	cmd.Env = h.env
	logf, _ := os.OpenFile(filepath.Join(h.root, "engine.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if logf != nil {
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		h.t.Errorf("cleanup: start an engine: %v", err)
		return
	}
	h.engine, h.pid, h.exited = cmd, cmd.Process.Pid, make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(h.exited)
	client.New(h.socket).WaitReady(context.Background(), 30*time.Second)
}

// unmountBelow unmounts what is still mounted below dir, deepest first.
func unmountBelow(t *testing.T, dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		t.Logf("cleanup: %s was still mounted", p)
		if syscall.Unmount(p, 0) != nil {
			syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
}

// capture keeps the start of a stream and looks for needles in all of it,
// across writes, without keeping it.
type capture struct {
	mu      sync.Mutex
	needles []needle
	keep    int
	buf     []byte
	n       int64
	tail    []byte
	max     int
	found   []string
}

func newCapture(needles []needle, keep int) *capture {
	c := &capture{needles: needles, keep: keep, max: 1}
	for _, n := range needles {
		c.max = max(c.max, len(n.data))
	}
	return c
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(p))
	if len(c.buf) < c.keep {
		c.buf = append(c.buf, p[:min(len(p), c.keep-len(c.buf))]...)
	}
	if len(c.tail) > 0 {
		c.look(append(append([]byte(nil), c.tail...), p[:min(len(p), c.max-1)]...))
	}
	c.look(p)
	c.tail = append(c.tail, p[max(0, len(p)-(c.max-1)):]...)
	if len(c.tail) > c.max-1 {
		c.tail = append([]byte(nil), c.tail[len(c.tail)-(c.max-1):]...)
	}
	return len(p), nil
}

func (c *capture) look(b []byte) {
	for _, n := range c.needles {
		if bytes.Contains(b, n.data) && !slices.Contains(c.found, n.name) {
			c.found = append(c.found, n.name)
		}
	}
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

func (c *capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf
}

func clip(s string) string {
	if len(s) > 1500 {
		return s[:1200] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}

// fileTree is what a directory holds, for telling whether anything changed.
type fileTree map[string]fileEntry

type fileEntry struct {
	mode         fs.FileMode
	uid, gid     uint32
	size         int64
	nlink        uint64
	ino          uint64
	mtime, ctime int64
	link         string
	sum          [32]byte
	err          string
}

// snapTree records every entry below root (symlinks not followed). A
// file's hash is taken from prev when its inode, size and times are the
// same.
func snapTree(root string, prev fileTree) fileTree {
	out := fileTree{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		if err != nil {
			out[rel] = fileEntry{err: err.Error()}
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			out[rel] = fileEntry{err: err.Error()}
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, _ := d.Info()
		e := fileEntry{uid: st.Uid, gid: st.Gid, size: st.Size, nlink: uint64(st.Nlink), ino: st.Ino,
			mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
		if fi != nil {
			e.mode = fi.Mode()
		}
		switch {
		case e.mode&fs.ModeSymlink != 0:
			e.link, _ = os.Readlink(p)
		case e.mode.IsRegular():
			if pe, ok := prev[rel]; ok && pe.ino == e.ino && pe.size == e.size && pe.mtime == e.mtime && pe.ctime == e.ctime {
				e.sum = pe.sum
			} else if f, err := os.Open(p); err == nil {
				hash := sha256.New()
				io.Copy(hash, f)
				f.Close()
				copy(e.sum[:], hash.Sum(nil))
			}
		}
		out[rel] = e
		return nil
	})
	return out
}

// hostFiles records what a session most wants to reach on the host.
func hostFiles() fileTree {
	t := fileTree{}
	for _, p := range []string{"/etc/shadow", "/etc/passwd", "/root"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			continue
		}
		e := fileEntry{mode: fs.FileMode(st.Mode & 0o7777), uid: st.Uid, gid: st.Gid}
		if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			data, _ := os.ReadFile(p)
			e.sum = sha256.Sum256(data)
			e.size = int64(len(data))
		}
		t[p] = e
	}
	return t
}

// diffTrees lists what differs, one line per path ("path: what").
// dirTimes false ignores directories' times (which any write below them
// changes).
func diffTrees(a, b fileTree, ignoreDirTimes bool) []string {
	var out []string
	for p, ea := range a {
		eb, ok := b[p]
		if !ok {
			out = append(out, p+": removed")
			continue
		}
		var what []string
		if ea.mode != eb.mode {
			what = append(what, fmt.Sprintf("mode %v -> %v", ea.mode, eb.mode))
		}
		if ea.uid != eb.uid || ea.gid != eb.gid {
			what = append(what, fmt.Sprintf("owner %d:%d -> %d:%d", ea.uid, ea.gid, eb.uid, eb.gid))
		}
		if ea.link != eb.link {
			what = append(what, fmt.Sprintf("link %q -> %q", ea.link, eb.link))
		}
		isDir := ea.mode.IsDir() && eb.mode.IsDir()
		// A directory's size follows its entries, which are compared
		// one by one.
		if !isDir && (ea.size != eb.size || ea.sum != eb.sum) {
			what = append(what, fmt.Sprintf("content changed (%d -> %d bytes)", ea.size, eb.size))
		}
		if ea.err != eb.err {
			what = append(what, fmt.Sprintf("error %q -> %q", ea.err, eb.err))
		}
		if !isDir || !ignoreDirTimes {
			if ea.ino != eb.ino {
				what = append(what, "replaced (new inode)")
			}
			if ea.mtime != eb.mtime {
				what = append(what, "modification time changed")
			}
			if ea.ctime != eb.ctime && len(what) == 0 {
				what = append(what, "metadata touched (ctime changed: a chmod, chown or link)")
			}
			if ea.nlink != eb.nlink && !isDir {
				what = append(what, fmt.Sprintf("links %d -> %d", ea.nlink, eb.nlink))
			}
		}
		if len(what) > 0 {
			out = append(out, p+": "+strings.Join(what, ", "))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p+": added")
		}
	}
	sort.Strings(out)
	return out
}

// listing shows at most 20 lines of a diffTrees list.
func listing(d []string) string {
	if len(d) > 20 {
		d = append(d[:20:20], fmt.Sprintf("… and %d more", len(d)-20))
	}
	return strings.Join(d, "\n  ")
}

// shadowLine returns a line of the host's /etc/shadow to look for in
// everything a session's requests produce, or nil when there is none.
func shadowLine() []byte {
	data, err := os.ReadFile("/etc/shadow")
	if err != nil {
		return nil
	}
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(l) >= 16 {
			return l
		}
	}
	return nil
}

// buildAirlock is the package's CLI (built once, see builtCLI).
func buildAirlock(t *testing.T) string { return builtCLI(t) }

// Checks scenarios share.

// projectFile returns what the project holds at p: its Lstat, and its
// content for a regular file of at most 1 MiB.
func (h *hostile) projectFile(p string) (fs.FileInfo, []byte) {
	fi, err := os.Lstat(filepath.Join(h.project, p))
	if err != nil {
		return nil, nil
	}
	if fi.Mode().IsRegular() && fi.Size() <= 1<<20 {
		data, _ := os.ReadFile(filepath.Join(h.project, p))
		return fi, data
	}
	return fi, nil
}

// wantAbsent fails for each path the project has.
func (h *hostile) wantAbsent(why string, paths ...string) {
	for _, p := range paths {
		if fi, _ := h.projectFile(p); fi != nil {
			h.fail("%s: the project has %s (%v)", why, p, fi.Mode())
		}
	}
}

// wantSymlink fails unless the project has p as a symlink to target.
func (h *hostile) wantSymlink(why, p, target string) {
	fi, _ := h.projectFile(p)
	if fi == nil || fi.Mode()&fs.ModeSymlink == 0 {
		h.fail("%s: the project's %s is %v, want a symlink to %s", why, p, fi, target)
		return
	}
	if l, _ := os.Readlink(filepath.Join(h.project, p)); l != target {
		h.fail("%s: the project's %s points at %q, want %q", why, p, l, target)
	}
}

// wantContent fails unless the project has p as a regular file holding data.
func (h *hostile) wantContent(why, p, data string) {
	fi, got := h.projectFile(p)
	if fi == nil || !fi.Mode().IsRegular() || string(got) != data {
		h.fail("%s: the project's %s is %v holding %q, want a file holding %q", why, p, fi, clip(string(got)), data)
	}
}

// sameAsSession fails unless the project's p has the bytes of the
// session's p (compared by SHA-256).
func (h *hostile) sameAsSession(why, p string) {
	r := h.cli(request{}, []string{"exec", h.vars["id"], "--", "sha256sum", p})
	want := strings.Fields(r.stdout.String())
	f, err := os.Open(filepath.Join(h.project, p))
	if err != nil || len(want) == 0 {
		h.fail("%s: compare %s with the session's: %v %q", why, p, err, r.stderr.String())
		return
	}
	defer f.Close()
	hash := sha256.New()
	io.Copy(hash, f)
	if got := hex.EncodeToString(hash.Sum(nil)); got != want[0] {
		h.fail("%s: the project's %s differs from the session's (sha256 %s, session %s)", why, p, got[:12], want[0][:12])
	}
}
