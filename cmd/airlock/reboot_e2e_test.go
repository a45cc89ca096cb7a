package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/testenv"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"
)

// privateDockerd is a Docker daemon of the test's own, which the test
// may kill like a power loss and start again over the same data root:
// the suite's shared daemon is never touched. It runs in a network
// namespace of its own (with --bridge=none a dockerd deletes the docker0
// it finds, which in the host's namespace is the shared daemon's) and in
// the host's mount namespace, where the engine's workspace mounts are.
type privateDockerd struct {
	t    *testing.T
	dir  string
	sock string
	cmd  *exec.Cmd
}

func newPrivateDockerd(t *testing.T) *privateDockerd {
	t.Helper()
	if _, err := exec.LookPath("dockerd"); err != nil {
		testenv.Missing(t, "no dockerd to start a private daemon with")
	}
	dir, err := os.MkdirTemp("", "airlock-reboot-dockerd-")
	if err != nil {
		t.Fatal(err)
	}
	d := &privateDockerd{t: t, dir: dir, sock: filepath.Join(dir, "docker.sock")}
	t.Cleanup(func() { // once the daemon is stopped (cleanups run last first)
		for _, m := range slices.Backward(mountsBelow(t, dir)) {
			unix.Unmount(m, unix.MNT_DETACH)
		}
		os.RemoveAll(dir)
	})
	return d
}

// start starts the daemon and returns its client once it answers.
func (d *privateDockerd) start() *client.Client {
	d.t.Helper()
	bin, _ := exec.LookPath("dockerd")
	d.cmd = exec.Command("unshare", "--net", bin,
		"--data-root", filepath.Join(d.dir, "data"), "--exec-root", filepath.Join(d.dir, "exec"),
		"--pidfile", filepath.Join(d.dir, "pid"), "-H", "unix://"+d.sock,
		"--bridge=none", "--iptables=false", "--ip6tables=false")
	cl, err := client.NewClientWithOpts(client.WithHost("unix://"+d.sock), client.WithAPIVersionNegotiation())
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { cl.Close() })
	enginetest.Serve(d.t, "the private dockerd", d.cmd, cl)
	return cl
}

// powerOff kills the daemon and every process it started (its
// containerd) with SIGKILL, all at once, as a power loss does.
func (d *privateDockerd) powerOff() {
	d.t.Helper()
	pids := append([]int{d.cmd.Process.Pid}, descendants(d.cmd.Process.Pid)...)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		for i := 0; i < 500 && processAlive(pid); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if processAlive(pid) {
			d.t.Fatalf("process %d of the private dockerd outlived SIGKILL", pid)
		}
	}
	// A reboot empties /run, where the exec root lives: its pid files
	// would name processes that are gone (or zombies not yet reaped,
	// which dockerd takes for its containerd still running).
	exec := filepath.Join(d.dir, "exec")
	for _, m := range slices.Backward(mountsBelow(d.t, exec)) {
		unix.Unmount(m, unix.MNT_DETACH)
	}
	if err := os.RemoveAll(exec); err != nil {
		d.t.Fatal(err)
	}
}

// processAlive: pid runs and is no zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// descendants lists pid's children, their children, and so on.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		_, rest, _ := strings.Cut(string(b), ") ")
		if f := strings.Fields(rest); len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for frontier := []int{pid}; len(frontier) > 0; {
		var next []int
		for p, pp := range parent {
			if slices.Contains(frontier, pp) {
				next = append(next, p)
			}
		}
		out, frontier = append(out, next...), next
	}
	return out
}

// mountsBelow lists the mount points beneath dir, outermost first.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.HasPrefix(fs[4], dir+"/") {
			out = append(out, fs[4])
		}
	}
	return out
}

// serveEngine starts `airlock serve` over Docker at dockerSock, as its
// own process, and waits for it to answer. When the test ends the
// engine removes its sessions and stops, before that Docker does.
func serveEngine(t *testing.T, c *cli, state, dockerSock string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(c.bin, "serve", "--engine", c.socket, "--state-dir", state)
	cmd.Env = append(append([]string{}, c.env...), "DOCKER_HOST=unix://"+dockerSock)
	log, err := os.Create(filepath.Join(t.TempDir(), "engine.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("the engine's log:\n%s", b[max(0, len(b)-4000):])
		}
	})
	t.Cleanup(c.stopEngine)
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if code, _, _ := c.run("version", "--json"); code == 0 {
			if _, err := os.Stat(c.socket); err == nil {
				break
			}
		}
		if time.Since(start) > time.Minute {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("the engine did not answer in a minute:\n%s", b)
		}
	}
	return cmd
}

// TestRebootRestartsDockerd is the reboot, on a Docker daemon of
// the test's own: sessions with tmpfs and disk workspaces, with
// checkpoints after commands, one hibernated, one with none; then kill
// -9 the engine, remove every session container, unmount every session
// tmpfs and overlay, kill dockerd (SIGKILL, a power loss) and start it
// again, start the engine. Every session is listed; the tmpfs ones are
// hibernated from their newest checkpoint, their diff (read without
// waking) and their files equal to it, what was written after it lost;
// the disk one is as it was; the one without a checkpoint says its
// changes are lost; exec wakes them, accept writes the project.
func TestRebootRestartsDockerd(t *testing.T) {
	enginetest.Require(t)
	c := newCLI(t)
	ctx := context.Background()
	dockerd := newPrivateDockerd(t)
	d := dockerd.start()
	enginetest.TinyImage(t, d) // the test image, built into the private daemon
	state := filepath.Join(t.TempDir(), "state")
	engine := serveEngine(t, c, state, dockerd.sock)

	newSession := func(args ...string) string {
		t.Helper()
		_, _, errs := c.run(append([]string{"run", "--project", sampleProject(t), "--image", enginetest.Image}, args...)...)
		m := sessionLine.FindStringSubmatch(errs)
		if m == nil {
			t.Fatalf("run %v did not print the session id: %q", args, errs)
		}
		return m[1]
	}
	lastCheckpoint := func(id string) api.Checkpoint {
		t.Helper()
		var list []api.Checkpoint
		if err := json.Unmarshal([]byte(c.ok("turns", id, "--json")), &list); err != nil || len(list) == 0 {
			t.Fatalf("turns of %s: %v %+v", id, err, list)
		}
		return list[len(list)-1]
	}
	merged := func(id string) string { return filepath.Join(state, "sessions", id, "merged") }

	// tmpfs, two commands: two checkpoints, then a write no command made
	// (a process that ran on): lost with the reboot.
	two := newSession("--", "sh", "-c", "echo a > a.txt && rm README.md")
	c.ok("exec", two, "--", "sh", "-c", "echo a2 >> a.txt && mkdir -p d/e && ln -s ../../a.txt d/e/link && chmod 755 src/app.py")
	twoCP := lastCheckpoint(two)
	twoPatch := c.ok("diff", two, "--patch")
	if err := os.WriteFile(filepath.Join(merged(two), "lost.txt"), []byte("lost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// tmpfs, hibernated before the reboot.
	hib := newSession("--", "sh", "-c", "echo h > h.txt")
	c.ok("hibernate", hib)
	hibCP := lastCheckpoint(hib)
	// disk: survives as it is, the late write too.
	disk := newSession("--workspace", "disk", "--", "sh", "-c", "echo b > b.txt")
	if err := os.WriteFile(filepath.Join(merged(disk), "late.txt"), []byte("late\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	diskPatch := c.ok("diff", disk, "--patch")
	// tmpfs, no checkpoint (its command changed nothing).
	none := newSession("--", "true")
	if out := c.ok("turns", none, "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("a session whose command changed nothing has checkpoints: %s", out)
	}

	// The reboot.
	if err := engine.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for processAlive(engine.Process.Pid) {
		time.Sleep(10 * time.Millisecond)
	}
	cs, err := d.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	// Every container goes: the sessions' and the warm pool's.
	removed := map[string]bool{}
	for _, ct := range cs {
		if err := d.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		for _, n := range ct.Names {
			removed[strings.TrimPrefix(n, "/")] = true
		}
	}
	for _, id := range []string{two, disk, none} {
		if !removed["airlock-"+id] {
			t.Errorf("session %s had no container to remove: %v", id, removed)
		}
	}
	if removed["airlock-"+hib] {
		t.Errorf("the hibernated session %s had a container", hib)
	}
	ms := mountsBelow(t, filepath.Join(state, "sessions"))
	if len(ms) == 0 {
		t.Fatal("no session mounts to unmount")
	}
	for _, m := range slices.Backward(ms) {
		if err := unix.Unmount(m, 0); err != nil {
			t.Fatalf("unmount %s: %v", m, err)
		}
	}
	dockerd.powerOff()
	t0 := time.Now()
	d = dockerd.start()
	if cs, err := d.ContainerList(ctx, container.ListOptions{All: true}); err != nil || len(cs) != 0 {
		t.Fatalf("the restarted dockerd has containers %v (%v)", cs, err)
	}
	serveEngine(t, c, state, dockerd.sock)

	var list []api.Session
	if err := json.Unmarshal([]byte(c.ok("ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	t.Logf("dockerd and engine started, every session listed: %v", time.Since(t0))
	got := map[string]api.Session{}
	for _, s := range list {
		got[s.ID] = s
	}
	if len(got) != 4 {
		t.Fatalf("after the reboot %d sessions are listed: %+v", len(got), list)
	}
	for _, tc := range []struct {
		id string
		cp api.Checkpoint
	}{{two, twoCP}, {hib, hibCP}} {
		s := got[tc.id]
		if s.State != api.StateHibernated || s.Hibernation == nil || s.Hibernation.Checkpoint != uint64(tc.cp.ID) {
			t.Errorf("session %s after the reboot: %s %+v, want hibernated from checkpoint %d", tc.id, s.State, s.Hibernation, tc.cp.ID)
		}
	}
	if r := got[two].Hibernation; r != nil && !strings.Contains(r.Reason, fmt.Sprintf("restored from checkpoint %d of %s", twoCP.ID, twoCP.Time.UTC().Format(time.RFC3339))) {
		t.Errorf("the reason %q does not say what the session was restored from", r.Reason)
	}
	if s := got[disk]; s.State != api.StateHibernated {
		t.Errorf("the disk session after the reboot: %s %s", s.State, s.Error)
	}
	if s := got[none]; s.State != api.StateHibernated || s.Hibernation == nil || !strings.Contains(s.Hibernation.Reason, "before any checkpoint was made") {
		t.Errorf("the session without a checkpoint: %s %q %+v, want hibernated as it started, saying so", s.State, s.Error, s.Hibernation)
	}

	// The diffs, read without waking: the checkpoint's, the disk's as it was.
	if p := c.ok("diff", two, "--patch"); p != twoPatch {
		t.Errorf("after the reboot the diff is\n%s\nwant the checkpoint's\n%s", p, twoPatch)
	}
	if p := c.ok("diff", disk, "--patch"); p != diskPatch {
		t.Errorf("after the reboot the disk session's diff is\n%s\nwant\n%s", p, diskPatch)
	}
	sessionOf := func(id string) api.Session {
		t.Helper()
		var list []api.Session
		if err := json.Unmarshal([]byte(c.ok("ls", "--json")), &list); err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.ID == id {
				return s
			}
		}
		t.Fatalf("session %s is not listed", id)
		return api.Session{}
	}
	if s := sessionOf(two); s.State != api.StateHibernated {
		t.Errorf("reading the diff woke the session: %s", s.State)
	}

	// exec wakes each with its files.
	for _, tc := range []struct{ id, script, want string }{
		{two, "cat a.txt; readlink d/e/link; stat -c %a src/app.py; ls lost.txt README.md 2>&1 | sort",
			"a\na2\n../../a.txt\n755\nls: README.md: No such file or directory\nls: lost.txt: No such file or directory\n"},
		{hib, "cat h.txt", "h\n"},
		{disk, "cat b.txt late.txt", "b\nlate\n"},
		{none, "echo woke", "woke\n"},
	} {
		if out := c.ok("exec", tc.id, "--", "sh", "-c", tc.script); out != tc.want {
			t.Errorf("session %s after the wake:\n%s\nwant:\n%s", tc.id, out, tc.want)
		}
	}
	if p := c.ok("diff", none, "--patch"); p != "" {
		t.Errorf("the session restored as it started has changes:\n%s", p)
	}
	if p := c.ok("diff", two, "--patch"); p != twoPatch {
		t.Errorf("after the wake the diff is\n%s\nwant the checkpoint's\n%s", p, twoPatch)
	}

	// accept writes the project.
	info := sessionOf(two)
	c.ok("accept", two, "--include-flagged") // src/app.py became executable
	if b, err := os.ReadFile(filepath.Join(info.Project, "a.txt")); err != nil || string(b) != "a\na2\n" {
		t.Errorf("accepted a.txt: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(info.Project, "README.md")); !os.IsNotExist(err) {
		t.Errorf("the deletion was not accepted: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(info.Project, "d/e/link")); err != nil || l != "../../a.txt" {
		t.Errorf("accepted link: %q, %v", l, err)
	}
	if fi, err := os.Stat(filepath.Join(info.Project, "src/app.py")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("accepted mode of src/app.py: %v, %v", fi.Mode(), err)
	}
	c.ok("rm", none)
}
