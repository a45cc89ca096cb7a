package fastexec_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/fastexec"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// buildInit builds the init once per test binary, into the directory
// TestMain removes at the end.
var buildInit = sync.OnceValues(func() (string, error) {
	dir := fastexec.InitTestDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "airlock-init")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (b *buildError) Error() string { return b.err.Error() + ": " + b.out }

// initEngine is an engine that binds a freshly built init into its
// sessions' containers.
func initEngine(t *testing.T, opts ...func(*engine.Options)) *enginetest.Engine {
	t.Helper()
	enginetest.Require(t)
	bin, err := buildInit()
	if err != nil {
		t.Fatalf("build the init: %v", err)
	}
	return enginetest.Start(t, append([]func(*engine.Options){func(o *engine.Options) { o.InitPath = bin }}, opts...)...)
}

func newSession(t *testing.T, e *enginetest.Engine, req api.CreateRequest) api.Session {
	t.Helper()
	if req.Project == "" {
		req.Project = t.TempDir()
	}
	s, err := e.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitServing waits for the session's init to listen, as the first
// command right after a create may still go through docker exec.
func waitServing(t *testing.T, e *enginetest.Engine, id string) {
	t.Helper()
	sock := filepath.Join(e.StateDir, "sessions", id, "ws", "fastexec", "exec.sock")
	for i := 0; i < 200; i++ {
		if st, err := os.Lstat(sock); err == nil && st.Mode()&os.ModeSocket != 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the session's init never made %s", sock)
}

// lastExecID is how the session's last command was run.
func lastExecID(t *testing.T, e *enginetest.Engine, id string) string {
	t.Helper()
	cmds, err := e.Store.Commands(context.Background(), id, false)
	if err != nil || len(cmds) == 0 {
		t.Fatalf("commands: %v (%d)", err, len(cmds))
	}
	return cmds[len(cmds)-1].ExecID
}

type result struct {
	code           int
	stdout, stderr string
}

func execIn(t *testing.T, e *enginetest.Engine, id string, req api.ExecRequest, sio engine.ExecIO) result {
	t.Helper()
	var out, errb bytes.Buffer
	sio.Stdout, sio.Stderr = &out, &errb
	code, err := e.Exec(context.Background(), id, req, sio)
	if err != nil {
		t.Fatalf("exec %v: %v", req.Argv, err)
	}
	return result{code, out.String(), errb.String()}
}

func TestFastExec(t *testing.T) {
	e := initEngine(t)
	s := newSession(t, e, api.CreateRequest{}) // the first command comes at once, as the init starts
	kill := make(chan syscall.Signal, 1)
	scenarios := []struct {
		name  string
		req   api.ExecRequest
		stdin string
		sig   chan syscall.Signal
		check func(r result) bool
	}{
		{"exit code and both streams", api.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}}, "", nil,
			func(r result) bool { return r.code == 3 && r.stdout == "out\n" && r.stderr == "err\n" }},
		{"working directory", api.ExecRequest{Argv: []string{"pwd"}}, "", nil,
			func(r result) bool { return r.code == 0 && r.stdout == "/workspace\n" }},
		{"environment added and replaced", api.ExecRequest{Argv: []string{"sh", "-c", `echo "$A $HOME $AIRLOCK_SESSION"`}, Env: []string{"A=1", "HOME=/tmp"}}, "", nil,
			func(r result) bool { return r.stdout == "1 /tmp "+s.ID+"\n" }},
		{"stdin", api.ExecRequest{Argv: []string{"sh", "-c", "wc -c; cat"}, Stdin: true}, "", nil,
			func(r result) bool { return r.code == 0 && strings.TrimSpace(r.stdout) == "0" }},
		{"stdin given", api.ExecRequest{Argv: []string{"cat"}, Stdin: true}, "hello\nworld\n", nil,
			func(r result) bool { return r.code == 0 && r.stdout == "hello\nworld\n" }},
		{"no stdin reads EOF", api.ExecRequest{Argv: []string{"cat"}}, "", nil,
			func(r result) bool { return r.code == 0 && r.stdout == "" }},
		{"large output", api.ExecRequest{Argv: []string{"sh", "-c", "head -c 50000000 /dev/zero; echo done >&2"}}, "", nil,
			func(r result) bool { return r.code == 0 && len(r.stdout) == 50000000 && r.stderr == "done\n" }},
		{"kill 0 ends only the command", api.ExecRequest{Argv: []string{"sh", "-c", "kill 0; sleep 5"}}, "", nil,
			func(r result) bool { return r.code == 143 }},
		{"not found", api.ExecRequest{Argv: []string{"no-such-command"}}, "", nil,
			func(r result) bool { return r.code == 127 && strings.Contains(r.stderr, "not found") }},
		{"killed", api.ExecRequest{Argv: []string{"sleep", "30"}}, "", kill,
			func(r result) bool { return r.code == 137 }},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			sio := engine.ExecIO{Signal: sc.sig}
			if sc.req.Stdin {
				sio.Stdin = strings.NewReader(sc.stdin)
			}
			if sc.sig != nil {
				sio.Started = func(int64) {
					go func() { time.Sleep(200 * time.Millisecond); sc.sig <- syscall.SIGKILL }()
				}
			}
			start := time.Now()
			r := execIn(t, e, s.ID, sc.req, sio)
			if !sc.check(r) {
				t.Errorf("exit %d, stdout %q, stderr %q", r.code, trim(r.stdout), trim(r.stderr))
			}
			if sc.sig != nil && time.Since(start) > 10*time.Second {
				t.Errorf("the kill took %s", time.Since(start))
			}
			if id := lastExecID(t, e, s.ID); id != "fastexec" {
				t.Errorf("ran as %q, not through the session's init", id)
			}
		})
	}
	// The record has the output and the code, as a docker exec's.
	cmds, err := e.Commands(context.Background(), s.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if c := cmds[0]; c.ExitCode == nil || *c.ExitCode != 3 || !strings.Contains(c.Output, "out\n") || !strings.Contains(c.Output, "err\n") {
		t.Errorf("first record: exit %v, output %q", c.ExitCode, c.Output)
	}
	// Orphans of commands are reaped: none is left a zombie.
	execIn(t, e, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", "for i in 1 2 3; do (sleep 0.1 >/dev/null &); done"}}, engine.ExecIO{})
	time.Sleep(500 * time.Millisecond)
	if r := execIn(t, e, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", "grep -l '^State:.Z' /proc/[0-9]*/status || true"}}, engine.ExecIO{}); r.stdout != "" {
		t.Errorf("zombies left: %s", r.stdout)
	}
	// A TTY still goes through docker exec.
	r := execIn(t, e, s.ID, api.ExecRequest{Argv: []string{"true"}, TTY: true}, engine.ExecIO{})
	if id := lastExecID(t, e, s.ID); r.code != 0 || id == "fastexec" {
		t.Errorf("TTY command: exit %d, run as %q: want a docker exec", r.code, id)
	}
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// probe is what a command can see of how it runs: identity,
// capabilities, seccomp, no-new-privileges, cgroup and its limits,
// environment, directory, rlimits.
const probe = `grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|SigBlk|SigIgn)' /proc/self/status; ` +
	`umask; cat /proc/self/oom_score_adj; readlink /proc/self/fd/0; ` +
	`cat /proc/self/cgroup; cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; ` +
	`cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; ` +
	`env | grep -v '^_=' | sort; pwd; ulimit -a; ls -l /proc/self/ns | sed 's/.*-> //' | grep -v pid_for; ` +
	`read -r pid comm state ppid pgrp sid rest < /proc/$$/stat; [ $pid = $pgrp ] && [ $pid = $sid ] && echo "leads its session"`

// TestFastExecAsDockerExec: a command run by the init sees what the
// same command run by `docker exec` sees: user, groups, capabilities,
// seccomp, no-new-privileges, cgroup and limits, environment, namespaces.
func TestFastExecAsDockerExec(t *testing.T) {
	e := initEngine(t)
	for _, user := range []string{"", "nobody"} {
		s := newSession(t, e, api.CreateRequest{User: user, Limits: api.Limits{Pids: 64}})
		waitServing(t, e, s.ID)
		fast := execIn(t, e, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", probe}}, engine.ExecIO{})
		if id := lastExecID(t, e, s.ID); id != "fastexec" {
			t.Fatalf("ran as %q, not through the session's init", id)
		}
		docker := dockerExec(t, e.Docker, s.ContainerID, s.User, "sh", "-c", probe)
		if fast != docker {
			t.Errorf("user %q: the init's command sees\n%s\n%s\ndocker exec's sees\n%s\n%s", user, fast.stdout, fast.stderr, docker.stdout, docker.stderr)
		}
		if !strings.Contains(fast.stdout, "\n64\n") || !strings.Contains(fast.stdout, "leads its session") {
			t.Errorf("pids limit not seen: %s", fast.stdout)
		}
	}
}

// dockerExec runs argv as `docker exec -u user -w /workspace` does.
func dockerExec(t *testing.T, d *client.Client, cid, user string, argv ...string) result {
	t.Helper()
	ctx := context.Background()
	x, err := d.ContainerExecCreate(ctx, cid, container.ExecOptions{User: user, WorkingDir: "/workspace", Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	hj, err := d.ContainerExecAttach(ctx, x.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hj.Close()
	var out, errb bytes.Buffer
	stdcopy.StdCopy(&out, &errb, hj.Reader)
	for {
		ins, err := d.ContainerExecInspect(ctx, x.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !ins.Running {
			return result{ins.ExitCode, out.String(), errb.String()}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFastExecPidsLimit: the session's pids limit holds for the init's
// commands as for docker exec's.
func TestFastExecPidsLimit(t *testing.T) {
	e := initEngine(t)
	s := newSession(t, e, api.CreateRequest{Limits: api.Limits{Pids: 32}})
	waitServing(t, e, s.ID)
	// A shell forks 64 sleeps until a fork fails (busybox's shell then
	// gives up); the count comes from the pids cgroup (v1 or v2), read by
	// a builtin: no fork is left.
	script := `sh -c 'for i in $(seq 64); do sleep 3 >/dev/null 2>&1 & done' 2>/dev/null; ` +
		`read n < /sys/fs/cgroup/pids.current 2>/dev/null || read n < /sys/fs/cgroup/pids/pids.current; echo $n`
	for _, how := range []string{"fast", "docker"} {
		var r result
		if how == "fast" {
			r = execIn(t, e, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", script}}, engine.ExecIO{})
			if id := lastExecID(t, e, s.ID); id != "fastexec" {
				t.Fatalf("ran as %q", id)
			}
		} else {
			r = dockerExec(t, e.Docker, s.ContainerID, s.User, "sh", "-c", script)
		}
		n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if err != nil || n > 32 || n < 16 {
			t.Errorf("%s: processes in the session while forking 64: %q (limit 32), stderr %q", how, r.stdout, trim(r.stderr))
		}
		t.Logf("%s: %d processes while forking 64 under a limit of 32", how, n)
		time.Sleep(3 * time.Second) // the sleeps end
	}
}

// TestFastExecOlderContainer: a session whose container was made without
// the init (before an upgrade) still runs commands, through docker exec;
// so does one whose engine has no init.
func TestFastExecOlderContainer(t *testing.T) {
	e := enginetest.Start(t, func(o *engine.Options) { o.InitPath = "none" })
	s := newSession(t, e, api.CreateRequest{})
	bin, err := buildInit()
	if err != nil {
		t.Fatal(err)
	}
	e2 := enginetest.Reopen(t, e.Docker, e.StateDir, func(o *engine.Options) { o.InitPath = bin })
	r := execIn(t, e2, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo hi; exit 4"}}, engine.ExecIO{})
	if r.code != 4 || r.stdout != "hi\n" {
		t.Errorf("exit %d, stdout %q", r.code, r.stdout)
	}
	if id := lastExecID(t, e2, s.ID); id == "fastexec" {
		t.Errorf("a container without the init ran the command through it")
	}
}

// TestFastExecAfterRun: a session made by `airlock run` (its first
// command the container's main process) serves later commands too.
func TestFastExecAfterRun(t *testing.T) {
	e := initEngine(t)
	var out bytes.Buffer
	var id string
	code, err := e.Run(context.Background(), api.CreateRequest{Project: t.TempDir()}, api.ExecRequest{Argv: []string{"echo", "first"}},
		engine.ExecIO{Stdout: &out, Stderr: &out}, func(s api.Session) { id = s.ID })
	if err != nil || code != 0 || out.String() != "first\n" {
		t.Fatalf("run: %d %v %q", code, err, out.String())
	}
	waitServing(t, e, id)
	r := execIn(t, e, id, api.ExecRequest{Argv: []string{"echo", "second"}}, engine.ExecIO{})
	if r.code != 0 || r.stdout != "second\n" || lastExecID(t, e, id) != "fastexec" {
		t.Errorf("exit %d, stdout %q, run as %q", r.code, r.stdout, lastExecID(t, e, id))
	}
}

// BenchmarkExec is `true` run in a session by the engine: through the
// session's init, and as a Docker exec (another user forces it), with
// p50 and p95 as metrics.
//
//	go test -run '^$' -bench Exec -benchtime 50x ./engine/fastexec/
func BenchmarkExec(b *testing.B) {
	enginetest.Require(b)
	bin, err := buildInit()
	if err != nil {
		b.Fatal(err)
	}
	e := enginetest.Start(b, func(o *engine.Options) { o.InitPath = bin })
	s, err := e.Create(context.Background(), api.CreateRequest{Project: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	other := "root"
	if s.User == "root" {
		other = "0"
	}
	for _, bc := range []struct {
		name string
		req  api.ExecRequest
	}{
		{"init", api.ExecRequest{Argv: []string{"true"}}},
		{"docker-exec", api.ExecRequest{Argv: []string{"true"}, User: other}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var took []time.Duration
			for i := 0; i < b.N; i++ {
				t := time.Now()
				code, err := e.Exec(context.Background(), s.ID, bc.req, engine.ExecIO{Stdout: io.Discard, Stderr: io.Discard})
				if err != nil || code != 0 {
					b.Fatalf("exit %d, %v", code, err)
				}
				took = append(took, time.Since(t))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[(len(took)*95)/100].Microseconds())/1000, "p95-ms")
		})
	}
}

// TestFastExecSocketIsConfined: on the host only root reaches the socket
// (the tmpfs it lives in is root's, 0700); in the session, a link put in
// its place (to the host's Docker socket) is never followed: commands go
// through docker exec and still run.
func TestFastExecSocketIsConfined(t *testing.T) {
	e := initEngine(t)
	s := newSession(t, e, api.CreateRequest{})
	waitServing(t, e, s.ID)
	ws := filepath.Join(e.StateDir, "sessions", s.ID, "ws")
	st, err := os.Stat(ws)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); st.Mode().Perm() != 0o700 || sys.Uid != 0 {
		t.Errorf("%s: mode %v, owner %d: want 0700 and root", ws, st.Mode().Perm(), sys.Uid)
	}
	r := execIn(t, e, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", "rm /.airlock/run/exec.sock && ln -s /var/run/docker.sock /.airlock/run/exec.sock"}}, engine.ExecIO{})
	if r.code != 0 {
		t.Fatalf("replace the socket: %d %q", r.code, r.stderr)
	}
	r = execIn(t, e, s.ID, api.ExecRequest{Argv: []string{"echo", "still"}}, engine.ExecIO{})
	if r.code != 0 || r.stdout != "still\n" {
		t.Errorf("after the socket was replaced: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if id := lastExecID(t, e, s.ID); id == "fastexec" {
		t.Errorf("a link in the socket's place was followed")
	}
}

// TestFastExecContainerStops: a command whose container stops under it
// ends killed (137), as a Docker exec's does, not with an unknown code.
func TestFastExecContainerStops(t *testing.T) {
	e := initEngine(t)
	s := newSession(t, e, api.CreateRequest{})
	waitServing(t, e, s.ID)
	stop := func(int64) {
		go func() {
			time.Sleep(300 * time.Millisecond)
			timeout := 0
			e.Docker.ContainerStop(context.Background(), s.ContainerID, container.StopOptions{Timeout: &timeout})
		}()
	}
	r := execIn(t, e, s.ID, api.ExecRequest{Argv: []string{"sleep", "30"}}, engine.ExecIO{Started: stop})
	if r.code != 137 {
		t.Errorf("exit %d, want 137", r.code)
	}
}
