package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/meter"
	"github.com/airlock/airlock/errdefs"
)

// Airlock over Podman's Docker-compatible service (README, "Docker
// hosts"): what works is run here; what cannot work is skipped with the
// reason the README gives.
func TestPodman(t *testing.T) {
	e := enginetest.Podman(t)
	ctx := context.Background()
	v, err := e.Docker.ServerVersion(ctx)
	must(t, err)
	t.Logf("%s %s, API %s", v.Platform.Name, v.Version, v.APIVersion)
	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p, Egress: &api.EgressPolicy{Mode: "custom", Allow: []string{"allowed.invalid"}}})
	must(t, err)

	t.Run("exec and review", func(t *testing.T) {
		code, out := run(t, e, s.ID, "sh", "-c", "cat README.md; echo hi > hello.txt; echo '// edit' >> src/main.c; pwd; exit 3")
		if code != 3 || out != "# demo\n/workspace\n" {
			t.Fatalf("exit %d, output %q: want 3 and the project's README in /workspace", code, out)
		}
		if got := diffSummary(t, e, s.ID); got != "added hello.txt\nmodified src/main.c" {
			t.Fatalf("diff:\n%s", got)
		}
		acc, err := e.Accept(ctx, s.ID, api.Selection{Paths: []string{"hello.txt"}})
		must(t, err)
		if len(acc.Outcomes) != 1 || !acc.Outcomes[0].Applied {
			t.Fatalf("accept: %+v", acc.Outcomes)
		}
		if b, _ := os.ReadFile(filepath.Join(p, "hello.txt")); string(b) != "hi\n" {
			t.Errorf("accepted hello.txt = %q", b)
		}
		_, err = e.Discard(ctx, s.ID, api.Selection{Paths: []string{"src/main.c"}})
		must(t, err)
		if got := diffSummary(t, e, s.ID); got != "" {
			t.Errorf("left after accept and discard:\n%s", got)
		}
	})

	t.Run("cgroup and meter", func(t *testing.T) {
		_, out := run(t, e, s.ID, "sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; grep cpuacct /proc/self/cgroup")
		if !strings.Contains(out, ":/airlock/"+s.ID+"/") {
			t.Errorf("the session's processes are in %q: want below /airlock/%s", out, s.ID)
		}
		use, err := e.Usage(ctx)
		must(t, err)
		for _, u := range use {
			if u.ID == s.ID && (u.CPU <= 0 || u.Memory.Peak <= 0) {
				t.Errorf("the session used CPU %v, memory %+v: want both counted", u.CPU, u.Memory)
			}
		}
	})

	t.Run("egress", func(t *testing.T) {
		code, out := run(t, e, s.ID, "wget", "-q", "-O-", "http://blocked.invalid/")
		if code == 0 || !strings.Contains(out, "403") {
			t.Fatalf("a blocked request: exit %d, %q", code, out)
		}
		log, err := e.EgressLog(ctx, s.ID, true, 0)
		must(t, err)
		if len(log) == 0 || log[len(log)-1].Host != "blocked.invalid" || log[len(log)-1].Allowed {
			t.Fatalf("the session's log: %+v", log)
		}
		if code, out := run(t, e, s.ID, "sh", "-c", "ip -o addr show eth0; ip route"); code != 0 || !strings.Contains(out, "default via") {
			t.Errorf("the session's network: %d %q", code, out)
		}
	})

	t.Run("pause and restart", func(t *testing.T) {
		run(t, e, s.ID, "sh", "-c", "echo kept > kept.txt")
		must(t, e.Pause(ctx, s.ID))
		if st := state(t, e, s.ID); st != api.StatePaused {
			t.Fatalf("state %s after pause", st)
		}
		// A second engine over the same state, as after kill -9 and
		// restart: it finds the container by its label.
		e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
		if st := state(t, e2, s.ID); st != api.StatePaused {
			t.Fatalf("state %s after an engine restart", st)
		}
		if _, out := run(t, e2, s.ID, "cat", "kept.txt"); out != "kept\n" {
			t.Fatalf("the re-adopted session sees %q", out)
		}
		if st := state(t, e2, s.ID); st != api.StateRunning {
			t.Fatalf("state %s after new work", st)
		}
	})

	t.Run("snapshot and restore", func(t *testing.T) {
		prepare(t, e, s.ID)
		snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{Name: "on-podman"})
		must(t, err)
		if len(snap.Layers) != 2 || snap.Layers[0].Files < 2 {
			t.Fatalf("layers %+v", snap.Layers)
		}
		r, err := e.Restore(ctx, snap.ID, api.RestoreRequest{})
		must(t, err)
		if len(r.Sessions) != 1 {
			t.Fatalf("restored %+v", r)
		}
		// What carried checks, but /etc/group: deleted in the snapshot,
		// it comes back as the one line Podman writes for the user's
		// group when the image has no entry for it.
		code, out := run(t, e, r.Sessions[0].ID, "cat", "/opt/tool/VERSION", "/home/airlock/.state", "README.md", "src/new.c", "/etc/group")
		if want := "v1\nconversation\n# demo\nchanged\nnew\n0:x:0:0\n"; code != 0 || out != want {
			t.Errorf("the restored session holds:\n%s\nwant:\n%s", out, want)
		}
		must(t, e.Remove(ctx, r.Sessions[0].ID))
	})

	t.Run("first command", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		var sess api.Session
		code, err := e.Run(ctx, api.CreateRequest{Project: p}, api.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}},
			engine.ExecIO{Stdout: &stdout, Stderr: &stderr}, func(s api.Session) { sess = s })
		must(t, err)
		if code != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
		}
		must(t, e.Remove(ctx, sess.ID))
	})

	t.Run("limits", func(t *testing.T) {
		// The workspace is the engine's own tmpfs: it grows without Podman.
		got, err := e.SetLimits(ctx, s.ID, api.Limits{WorkspaceSize: 128 << 20})
		must(t, err)
		if code, out := run(t, e, s.ID, "sh", "-c", "dd if=/dev/zero of=big bs=1M count=80 2>&1 && rm big"); got.Limits.WorkspaceSize != 128<<20 || code != 0 {
			t.Fatalf("limits %+v; 80 MiB in the grown workspace: %d %q", got.Limits, code, out)
		}
		got, err = e.SetLimits(ctx, s.ID, api.Limits{CPUs: 0.5, Pids: 64})
		if errdefs.IsNotFound(err) && v.Platform.Name != "" && strings.HasPrefix(v.Version, "4.") {
			t.Skipf("Podman %s has no /containers/{id}/update: a session keeps the CPU, memory and pids limits it was made with (%v)", v.Version, err)
		}
		must(t, err)
		if got.Limits.CPUs != 0.5 || got.Limits.Pids != 64 {
			t.Fatalf("limits %+v", got.Limits)
		}
	})

	t.Run("remove", func(t *testing.T) {
		must(t, e.Remove(ctx, s.ID))
		if _, err := e.Docker.ContainerInspect(ctx, s.ContainerID); err == nil {
			t.Errorf("container left after rm")
		}
		if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), s.ID) {
			t.Errorf("mounts left after rm")
		}
		for _, c := range []string{"cpuacct", "memory", "pids"} {
			dir := filepath.Join(meter.DefaultRoot, c, "airlock", s.ID)
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s is left after rm: %v", dir, err)
			}
		}
	})
}
