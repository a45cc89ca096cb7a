package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/container"
)

func project(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(filepath.Join(p, "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(p, "README.md"), []byte("# demo\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(p, "src/main.c"), []byte("int main(void) { return 0; }\n"), 0o644))
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// run executes argv in a session and returns exit code and output.
func run(t *testing.T, e *enginetest.Engine, id string, argv ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code, err := e.Exec(context.Background(), id, api.ExecRequest{Argv: argv}, engine.ExecIO{Stdout: &out, Stderr: &out})
	must(t, err)
	return code, out.String()
}

func TestSessionLifecycle(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	if s.State != api.StateRunning {
		t.Fatalf("state %s", s.State)
	}
	code, out := run(t, e, s.ID, "sh", "-c", "echo hi > hello.txt; rm README.md; echo '// edit' >> src/main.c; pwd; exit 3")
	if code != 3 || !strings.Contains(out, "/workspace") {
		t.Fatalf("exit %d, output %q: want 3 and the workdir /workspace", code, out)
	}
	// The host project is untouched.
	if _, err := os.Stat(filepath.Join(p, "README.md")); err != nil {
		t.Fatalf("host README.md gone before any accept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p, "hello.txt")); err == nil {
		t.Fatalf("hello.txt reached the host before any accept")
	}
	d, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	kinds := map[string]string{}
	for _, f := range d.Files {
		kinds[f.Path] = string(f.Kind)
	}
	want := map[string]string{"hello.txt": "added", "README.md": "deleted", "src/main.c": "modified"}
	for k, v := range want {
		if kinds[k] != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, kinds[k], v, kinds)
		}
	}
	// The same workspace across commands.
	if _, out := run(t, e, s.ID, "cat", "hello.txt"); out != "hi\n" {
		t.Errorf("second command sees %q", out)
	}
	// Accept one path, discard another.
	acc, err := e.Accept(ctx, s.ID, api.Selection{Paths: []string{"hello.txt"}})
	must(t, err)
	res := acc.Outcomes
	if len(res) != 1 || !res[0].Applied {
		t.Fatalf("accept: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "hello.txt")); string(b) != "hi\n" {
		t.Errorf("accepted hello.txt = %q", b)
	}
	_, err = e.Discard(ctx, s.ID, api.Selection{Paths: []string{"README.md"}})
	must(t, err)
	if _, out := run(t, e, s.ID, "cat", "README.md"); out != "# demo\n" {
		t.Errorf("after discard the session sees README.md = %q", out)
	}
	d, err = e.Diff(ctx, s.ID, nil)
	must(t, err)
	if len(d.Files) != 1 || d.Files[0].Path != "src/main.c" {
		t.Errorf("left after accept+discard: %+v", d.Stats)
	}
	cmds, err := e.Commands(ctx, s.ID, true)
	must(t, err)
	if len(cmds) < 3 || cmds[0].ExitCode == nil || *cmds[0].ExitCode != 3 || !strings.Contains(cmds[0].Output, "/workspace") {
		t.Errorf("first command record: %+v", cmds[0])
	}
	// Removal unmounts and removes the container.
	must(t, e.Remove(ctx, s.ID))
	if _, err := os.Stat(filepath.Join(e.StateDir, "sessions", s.ID)); err == nil {
		t.Errorf("workspace directory left after rm")
	}
	if _, err := e.Docker.ContainerInspect(ctx, s.ContainerID); err == nil {
		t.Errorf("container left after rm")
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), s.ID) {
		t.Errorf("mounts left after rm")
	}
}

func TestRestartReadoptsSessions(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo kept > kept.txt")
	// A second engine over the same state, as after kill -9 and restart.
	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	got, err := e2.Get(ctx, s.ID)
	must(t, err)
	if got.State != api.StateRunning || got.Changed != 1 {
		t.Fatalf("re-adopted session: state %s, changed %d", got.State, got.Changed)
	}
	if _, out := run(t, e2, s.ID, "cat", "kept.txt"); out != "kept\n" {
		t.Errorf("re-adopted workspace lost its contents: %q", out)
	}
}

func TestBadInput(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		name  string
		req   api.CreateRequest
		class errdefs.Class
		says  string
	}{
		{"missing project", api.CreateRequest{Project: "/nonexistent/proj"}, errdefs.NotFound, "does not exist"},
		{"project is a file", api.CreateRequest{Project: file}, errdefs.Invalid, "not a directory"},
		{"relative project", api.CreateRequest{Project: "proj"}, errdefs.Invalid, "absolute"},
		{"image missing", api.CreateRequest{Project: project(t), Image: "airlock/no-such-image"}, errdefs.NotFound, "not available locally"},
		{"memory below workspace", api.CreateRequest{Project: project(t), Limits: api.Limits{Memory: 32 << 20}}, errdefs.Invalid, "--memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Create(ctx, tc.req)
			if err == nil || errdefs.ClassOf(err) != tc.class || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v (class %s), want class %s mentioning %q", err, errdefs.ClassOf(err), tc.class, tc.says)
			}
		})
	}
	if _, err := e.Diff(ctx, "ffffffffffff", nil); !errdefs.IsNotFound(err) {
		t.Errorf("unknown session: %v", err)
	}
	if list, _ := e.List(ctx); len(list) != 0 {
		t.Errorf("failed creates left sessions: %+v", list)
	}
}

func TestWorkspaceFull(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Limits: api.Limits{WorkspaceSize: 4 << 20}})
	must(t, err)
	code, out := run(t, e, s.ID, "sh", "-c", "dd if=/dev/zero of=big bs=1M count=8")
	if code == 0 || !strings.Contains(out, "No space left") {
		t.Fatalf("writing past the cap: exit %d, %q; want ENOSPC", code, out)
	}
	d, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	if !d.Workspace.Full {
		t.Errorf("diff should report the workspace full: %+v", d.Workspace)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "big" {
		t.Errorf("diff of a full workspace: %+v", d.Stats)
	}
}

func TestContainerHardening(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), User: "0:0"})
	must(t, err)
	ins, err := e.Docker.ContainerInspect(ctx, s.ContainerID)
	must(t, err)
	hc := ins.HostConfig
	if hc.Privileged {
		t.Errorf("session container is privileged")
	}
	for _, c := range []string{"NET_RAW", "MKNOD", "SYS_CHROOT", "SYS_ADMIN"} {
		for _, a := range hc.CapAdd {
			if a == c {
				t.Errorf("capability %s granted", c)
			}
		}
	}
	for _, m := range ins.Mounts {
		if strings.Contains(m.Source, "docker.sock") {
			t.Errorf("Docker socket mounted into the session")
		}
	}
	if hc.Memory != 256<<20 || hc.PidsLimit == nil || *hc.PidsLimit != engine.DefaultPids || hc.NanoCPUs == 0 {
		t.Errorf("limits not applied: memory %d, pids %v, cpus %d", hc.Memory, hc.PidsLimit, hc.NanoCPUs)
	}
	// Even as root inside, the trimmed capabilities hold.
	if code, out := run(t, e, s.ID, "mknod", "/tmp/dev", "c", "1", "3"); code == 0 {
		t.Errorf("mknod succeeded as root in the session: %s", out)
	}
	if _, out := run(t, e, s.ID, "sh", "-c", "grep NoNewPrivs /proc/self/status"); !strings.Contains(out, "1") {
		t.Errorf("no_new_privs not set: %q", out)
	}
}

func TestRunsAsProjectOwner(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	for _, f := range []string{p, filepath.Join(p, "src"), filepath.Join(p, "README.md"), filepath.Join(p, "src/main.c")} {
		must(t, os.Chown(f, 1234, 2345))
	}
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	if s.User != "1234:2345" {
		t.Errorf("session user %q, want the project owner 1234:2345", s.User)
	}
	code, out := run(t, e, s.ID, "sh", "-c", "id -u; id -g; echo new > src/new.c; chmod 4755 src/new.c; echo edit >> README.md")
	if code != 0 || !strings.HasPrefix(out, "1234\n2345\n") {
		t.Fatalf("exit %d, %q", code, out)
	}
	// src/new.c is setuid, which a scanner flags: taken only when asked.
	acc, err := e.Accept(ctx, s.ID, api.Selection{IncludeFlagged: true})
	must(t, err)
	for _, o := range acc.Outcomes {
		if !o.Applied {
			t.Errorf("%s: %s", o.Path, o.Error)
		}
	}
	fi, err := os.Stat(filepath.Join(p, "src/new.c"))
	must(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1234 || st.Gid != 2345 {
		t.Errorf("accepted file owned by %d:%d, want 1234:2345", st.Uid, st.Gid)
	}
	if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("accepted mode %v: want 0755 without setuid", fi.Mode())
	}
}

func TestCommandOutlivesCaller(t *testing.T) {
	e := enginetest.Start(t)
	s, err := e.Create(context.Background(), api.CreateRequest{Project: project(t)})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		<-started
		cancel() // the client goes away
	}()
	_, err = e.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo start; sleep 0.5; echo end > done.txt; echo end; exit 4"}},
		engine.ExecIO{Stdout: &bytes.Buffer{}, Started: func(int64) { close(started) }})
	if err == nil {
		t.Fatalf("Exec should report the cancelled caller")
	}
	awaitRecord(t, e, s.ID, 4, "end")
}

// awaitRecord waits for a session's only command to be recorded as ended
// with the exit code and output.
func awaitRecord(t *testing.T, e *enginetest.Engine, id string, code int, output string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		cmds, _ := e.Commands(context.Background(), id, true)
		if len(cmds) == 1 && cmds[0].ExitCode != nil {
			if *cmds[0].ExitCode != code || !strings.Contains(cmds[0].Output, output) {
				t.Fatalf("record %+v: want exit %d with the whole output", cmds[0], code)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the command's end was never recorded")
}

func TestCABundleReachesTools(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	pem := filepath.Join(t.TempDir(), "corp.pem")
	must(t, os.WriteFile(pem, []byte("-----BEGIN CERTIFICATE-----\nTUlJQ29ycA==\n-----END CERTIFICATE-----\n"), 0o644))
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), CABundle: pem})
	must(t, err)
	code, out := run(t, e, s.ID, "sh", "-c", `echo "$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $GIT_SSL_CAINFO $REQUESTS_CA_BUNDLE $PIP_CERT $NPM_CONFIG_CAFILE"; grep -c TUlJQ29ycA== "$SSL_CERT_FILE"; echo x >> "$SSL_CERT_FILE"`)
	if code == 0 {
		t.Errorf("the CA bundle is writable inside the session")
	}
	// stdout and stderr arrive as two streams: the shell's complaint about
	// the read-only bundle may come before or after the lines checked.
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "sh: ") {
			lines = append(lines, l)
		}
	}
	first, rest, _ := strings.Cut(strings.Join(lines, "\n"), "\n")
	if strings.Count(first, "/etc/airlock/ca-bundle.pem") != 6 || !strings.HasPrefix(rest, "1\n") {
		t.Errorf("CA bundle not registered for the usual tools: %q", out)
	}
	if _, err := e.Create(ctx, api.CreateRequest{Project: project(t), CABundle: "/nonexistent.pem"}); !errdefs.IsInvalid(err) {
		t.Errorf("a missing CA bundle: %v, want an invalid-input error", err)
	}
}

// A run's first command starts with the container: its streams, exit code
// and record are those of an exec, builtins cannot end the session, and
// the session goes on to serve more commands.
func TestRunFirstCommand(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	var stdout, stderr bytes.Buffer
	var sess api.Session
	var cmdID int64
	code, err := e.Run(ctx, api.CreateRequest{Project: p},
		api.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; printf tail; echo x >> count.txt; exit 3"}},
		engine.ExecIO{Stdout: &stdout, Stderr: &stderr, Started: func(id int64) { cmdID = id }},
		func(s api.Session) { sess = s })
	must(t, err)
	if code != 3 || stdout.String() != "out\ntail" || stderr.String() != "err\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q: want 3, \"out\\ntail\", \"err\\n\"", code, stdout.String(), stderr.String())
	}
	if sess.ID == "" || sess.State != api.StateRunning || cmdID == 0 {
		t.Fatalf("session %+v, command %d: the caller must hear of both before the output", sess, cmdID)
	}
	cmds, err := e.Commands(ctx, sess.ID, true)
	must(t, err)
	if len(cmds) != 1 || cmds[0].ExitCode == nil || *cmds[0].ExitCode != 3 || !strings.Contains(cmds[0].Output, "tail") || strings.Contains(cmds[0].Output, "airlock-exit") {
		t.Fatalf("record %+v: want exit 3 and the output without the engine's mark", cmds)
	}
	if _, out := run(t, e, sess.ID, "cat", "count.txt"); out != "x\n" {
		t.Fatalf("an exec after the run sees %q", out)
	}

	for _, tc := range []struct {
		argv []string
		code int
		out  string
	}{
		{[]string{"exit", "4"}, 4, ""},                          // a builtin, not the end of the session
		{[]string{"no-such-command"}, 127, "command not found"}, // says so instead of a shell's riddle
		{[]string{"echo", "a  b", "$HOME", "*"}, 0, "a  b $HOME *\n"},
		{[]string{"ip", "route"}, 0, "default via"}, // the session's network is up before it starts
	} {
		var out bytes.Buffer
		code, err := e.Run(ctx, api.CreateRequest{Project: p}, api.ExecRequest{Argv: tc.argv}, engine.ExecIO{Stdout: &out, Stderr: &out}, func(s api.Session) { sess = s })
		must(t, err)
		if code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("%q: exit %d, output %q; want %d and %q", tc.argv, code, out.String(), tc.code, tc.out)
		}
		if got, _ := e.Get(ctx, sess.ID); got.State != api.StateRunning {
			t.Errorf("%q: session %s afterwards", tc.argv, got.State)
		}
	}
}

// A signal reaches the first command, and a container stopped under it
// (Docker restarted) comes back idle: the first command never runs twice.
func TestRunSignalsAndRestart(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	sigs := make(chan syscall.Signal, 1)
	var sess api.Session
	var out bytes.Buffer
	code, err := e.Run(ctx, api.CreateRequest{Project: project(t)},
		api.ExecRequest{Argv: []string{"sh", "-c", "echo x >> count.txt; trap 'echo got INT; exit 5' INT; echo ready; while :; do sleep 0.05; done"}},
		engine.ExecIO{Stdout: &out, Signal: sigs}, func(s api.Session) {
			sess = s
			go func() {
				time.Sleep(500 * time.Millisecond)
				sigs <- syscall.SIGINT
			}()
		})
	must(t, err)
	if code != 5 || !strings.Contains(out.String(), "got INT") {
		t.Fatalf("exit %d, output %q: the command's trap should have run", code, out.String())
	}
	timeout := 1
	must(t, e.Docker.ContainerStop(ctx, sess.ContainerID, container.StopOptions{Timeout: &timeout}))
	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	got, err := e2.Get(ctx, sess.ID)
	must(t, err)
	if got.State != api.StateRunning {
		t.Fatalf("after the container stopped and the engine restarted: %s (%s)", got.State, got.Error)
	}
	if _, out := run(t, e2, sess.ID, "cat", "count.txt"); out != "x\n" {
		t.Fatalf("count.txt %q: the first command ran again", out)
	}
}

// A run whose caller goes away keeps its command running and recorded.
func TestRunOutlivesCaller(t *testing.T) {
	e := enginetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var sess api.Session
	_, err := e.Run(ctx, api.CreateRequest{Project: project(t)},
		api.ExecRequest{Argv: []string{"sh", "-c", "echo start; sleep 0.5; echo end; exit 4"}},
		engine.ExecIO{Stdout: &bytes.Buffer{}, Started: func(int64) { cancel() }}, func(s api.Session) { sess = s })
	if err == nil {
		t.Fatalf("Run should report the cancelled caller")
	}
	awaitRecord(t, e, sess.ID, 4, "end")
}

// A diff right after a command lists every file it wrote. (Listing the
// upper layer once trusted a short getdents answer on tmpfs to be the
// end, and lost a directory now and then on Linux 6.18.)
func TestDiffRightAfterManyWrites(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	for round := 0; round < 6; round++ {
		var out bytes.Buffer
		var sess api.Session
		_, err := e.Run(ctx, api.CreateRequest{Project: t.TempDir()},
			api.ExecRequest{Argv: []string{"sh", "-c", "for d in $(seq 1 100); do mkdir d$d; for f in $(seq 1 100); do echo $d $f > d$d/f$f; done; done"}},
			engine.ExecIO{Stdout: &out, Stderr: &out}, func(s api.Session) { sess = s })
		must(t, err)
		if got, _ := e.Get(ctx, sess.ID); got.Changed != 10000 {
			t.Fatalf("round %d: the session counts %d changes, want 10000", round, got.Changed)
		}
		d, err := e.Diff(ctx, sess.ID, nil)
		must(t, err)
		if len(d.Files) != 10000 {
			t.Fatalf("round %d: the diff lists %d files, want 10000", round, len(d.Files))
		}
		must(t, e.Remove(ctx, sess.ID))
	}
}
