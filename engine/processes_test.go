package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/testenv"
)

// Where the host cannot checkpoint processes (here: Docker not started
// with --experimental), keeping them is refused and the session goes on
// as it was.
func TestKeepProcessesRefused(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	if info, err := e.Docker.Info(ctx); err != nil || info.ExperimentalBuild {
		t.Skipf("the daemon is experimental (or did not answer: %v): nothing to refuse", err)
	}
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	_, err = e.Hibernate(ctx, s.ID, api.HibernateRequest{KeepProcesses: true})
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), `"experimental": true`) {
		t.Fatalf("keep processes on a daemon that is not experimental: %v, want refused saying how to enable it", err)
	}
	if st := state(t, e, s.ID); st != api.StateRunning {
		t.Errorf("a refused hibernation left the session %s", st)
	}
}

// A process survives hibernate and wake: a counter goes on from where
// it was, in memory, in a new container; the home comes back with it
// (CRIU's copy of the tmpfs) and commands run through the restored init.
// A process checkpoint that cannot be restored wakes the session without
// its processes, saying so. Needs CRIU 4.1 or newer in PATH (Debian 12's
// 3.17 cannot run on kernels from 6.13 on; see docs/ARCHITECTURE.md,
// "Processes and CRIU"): skipped without one.
func TestHibernateKeepProcesses(t *testing.T) {
	requireCRIU(t)
	e := experimentalEngine(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	count := startCounter(t, e, s.ID)

	t0 := time.Now()
	h, err := e.Hibernate(ctx, s.ID, api.HibernateRequest{KeepProcesses: true})
	must(t, err)
	t.Logf("hibernate keeping processes: %v, %d bytes on disk", time.Since(t0), h.Hibernation.DiskBytes)
	if h.State != api.StateHibernated || h.Hibernation == nil || !h.Hibernation.Processes {
		t.Fatalf("hibernated keeping processes: %+v %+v", h, h.Hibernation)
	}
	if containerExists(t, e, s.ID) {
		t.Error("a hibernated session still has its container")
	}
	t0 = time.Now()
	before := count() // wakes it
	t.Logf("wake restoring processes, to the first command's answer: %v", time.Since(t0))
	time.Sleep(2500 * time.Millisecond)
	after := count()
	if after <= before {
		t.Errorf("the counter stopped: %d, then %d 2.5 s later", before, after)
	}
	_, out := run(t, e, s.ID, "sh", "-c", "cat /home/airlock/h; ps -o args | grep -c '^sh -c i=0'; ip -o -4 addr show eth0 | grep -c inet")
	if out != "home\n1\n1\n" {
		t.Errorf("after the wake (home, counters, eth0 addresses):\n%s", out)
	}
	life, err := e.Lifecycle(ctx, s.ID)
	must(t, err)
	if last := life[len(life)-1]; last.Kind != "woken" || !strings.Contains(last.Reason, "processes restored") {
		t.Errorf("lifecycle after the wake: %+v", last)
	}

	// The same without processes, for comparison.
	t0 = time.Now()
	h, err = e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	t.Logf("hibernate: %v, %d bytes on disk", time.Since(t0), h.Hibernation.DiskBytes)
	t0 = time.Now()
	run(t, e, s.ID, "true")
	t.Logf("wake, to the first command's answer: %v", time.Since(t0))
	startCounter(t, e, s.ID)

	// A damaged process checkpoint: the session wakes without its
	// processes and says why.
	h, err = e.Hibernate(ctx, s.ID, api.HibernateRequest{KeepProcesses: true})
	must(t, err)
	images, err := filepath.Glob(filepath.Join(e.StateDir, "sessions", s.ID, "processes", "*", "pstree.img"))
	if err != nil || len(images) != 1 {
		t.Fatalf("the process checkpoint's tree: %v, %v", images, err)
	}
	must(t, os.WriteFile(images[0], []byte("not a process tree"), 0o600))
	_, out = run(t, e, s.ID, "sh", "-c", "cat /home/airlock/h; ps -o args | grep -c '^sh -c i=0'")
	if out != "home\n0\n" {
		t.Errorf("after a failed restore (home, counters):\n%s", out)
	}
	life, err = e.Lifecycle(ctx, s.ID)
	must(t, err)
	if last := life[len(life)-1]; last.Kind != "woken" || !strings.Contains(last.Reason, "processes not restored") {
		t.Errorf("lifecycle after a failed restore: %+v", last)
	}
}

// An idle session hibernates with its processes under the engine's
// setting.
func TestIdleHibernateKeepsProcesses(t *testing.T) {
	requireCRIU(t)
	e := experimentalEngine(t, func(o *engine.Options) {
		o.IdleCheck = 200 * time.Millisecond
		o.Defaults.HibernateAfter = 3 * time.Second
		o.Defaults.HibernateKeepProcesses = true
	})
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	count := startCounter(t, e, s.ID)
	deadline := time.Now().Add(30 * time.Second)
	for state(t, e, s.ID) != api.StateHibernated && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	got, err := e.Get(ctx, s.ID)
	must(t, err)
	if got.State != api.StateHibernated || got.Hibernation == nil || !got.Hibernation.Processes || !strings.HasPrefix(got.Hibernation.Reason, "idle for") {
		t.Fatalf("an idle session: %s %+v", got.State, got.Hibernation)
	}
	before := count()
	time.Sleep(2500 * time.Millisecond)
	if after := count(); after <= before {
		t.Errorf("the counter stopped: %d, then %d 2.5 s later", before, after)
	}
}

// requireCRIU skips the test without a working CRIU in PATH.
func requireCRIU(t *testing.T) {
	t.Helper()
	enginetest.Require(t)
	criu, err := exec.LookPath("criu")
	if err != nil {
		t.Skip("no criu in PATH: process checkpoints need CRIU 4.1 or newer")
	}
	// `criu check` of an older CRIU takes ~10 s here to fail: ask its
	// version first.
	out, _ := exec.Command(criu, "--version").Output()
	var major, minor int
	if _, err := fmt.Sscanf(string(out), "Version: %d.%d", &major, &minor); err != nil || major < 4 || major == 4 && minor < 1 {
		t.Skipf("criu is %q: process checkpoints need CRIU 4.1 or newer", strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command(criu, "check").CombinedOutput(); err != nil {
		t.Skipf("`criu check` fails here (CRIU 4.1 or newer is needed): %s", strings.TrimSpace(string(out)))
	}
}

// startCounter starts in session id a shell counting seconds in its
// memory and writing the count to /tmp/n (a background process of a
// command that ended), and returns what reads the count; it returns once
// the count reached 3.
func startCounter(t *testing.T, e *enginetest.Engine, id string) func() int {
	t.Helper()
	run(t, e, id, "sh", "-c", "echo home > /home/airlock/h; (sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 1; done' >/dev/null 2>&1 &); true")
	read := func() (int, string) {
		_, out := run(t, e, id, "cat", "/tmp/n")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			return -1, out
		}
		return n, out
	}
	deadline := time.Now().Add(20 * time.Second)
	for n, _ := read(); n < 3 && time.Now().Before(deadline); n, _ = read() {
		time.Sleep(500 * time.Millisecond)
	}
	return func() int {
		t.Helper()
		// The shell truncates the file before it writes: a read can land
		// between the two.
		for range 3 {
			if n, _ := read(); n >= 0 {
				return n
			}
			time.Sleep(100 * time.Millisecond)
		}
		n, out := read()
		if n < 0 {
			t.Fatalf("the counter's file: %q", out)
		}
		return n
	}
}

// experimentalEngine is an engine over a Docker daemon of the test's own,
// started with --experimental (its checkpoint API) in its own mount and
// network namespaces. Its init is the host's docker-init resolved, not
// Debian's symlink to it (see canKeepProcesses). The engine's state
// directory is a shared mount, so that the workspaces mounted there
// reach the daemon's namespace.
func experimentalEngine(t *testing.T, opts ...func(*engine.Options)) *enginetest.Engine {
	t.Helper()
	bin, err := exec.LookPath("dockerd")
	if err != nil {
		testenv.Missing(t, "no dockerd to start an experimental daemon with")
	}
	init, err := exec.LookPath("docker-init")
	if err == nil {
		init, err = filepath.EvalSymlinks(init)
	}
	if err != nil {
		t.Skipf("no docker-init: %v", err)
	}
	dir, err := os.MkdirTemp("", "airlock-criu-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // last: after the daemon and the mount
	state := filepath.Join(dir, "state")
	must(t, os.Mkdir(state, 0o700))
	must(t, syscall.Mount(state, state, "", syscall.MS_BIND, ""))
	t.Cleanup(func() { syscall.Unmount(state, syscall.MNT_DETACH) })
	must(t, syscall.Mount("", state, "", syscall.MS_SHARED, ""))
	sock := filepath.Join(dir, "docker.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	d, err := engine.NewDocker()
	must(t, err)
	cmd := exec.Command("unshare", "--mount", "--net", "--propagation", "slave", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, bin,
		"--experimental", "--init-path", init,
		"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "pid"), "-H", "unix://"+sock,
		"--bridge=none", "--iptables=false", "--ip6tables=false")
	enginetest.Serve(t, "the experimental dockerd", cmd, d)
	enginetest.TinyImage(t, d)
	e := enginetest.Reopen(t, d, state, opts...)
	t.Cleanup(func() { enginetest.RemoveAll(t, e) })
	return e
}
