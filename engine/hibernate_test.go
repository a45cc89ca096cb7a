package engine_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness/mockmodel"
	"github.com/airlock/airlock/testenv"
	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"
)

// reboot does to session id of e what a host restart does: the engine
// gone, the session's container removed, its tmpfs and overlay unmounted.
func reboot(t *testing.T, e *enginetest.Engine, id string) {
	t.Helper()
	ctx := context.Background()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	e.Close(cctx)
	cancel()
	must(t, e.Docker.ContainerRemove(ctx, "airlock-"+id, container.RemoveOptions{Force: true}))
	for _, m := range slices.Backward(testenv.MountsUnder(t, filepath.Join(e.StateDir, "sessions", id))) {
		must(t, unix.Unmount(m, 0))
	}
}

func containerExists(t *testing.T, e *enginetest.Engine, id string) bool {
	t.Helper()
	_, err := e.Docker.ContainerInspect(context.Background(), "airlock-"+id)
	return err == nil
}

func acceptAll(t *testing.T, e *enginetest.Engine, id string) {
	t.Helper()
	if _, err := e.Accept(context.Background(), id, api.Selection{IncludeFlagged: true}); err != nil {
		t.Fatalf("accept: %v", err)
	}
}

// A hibernated session has no container and no mounts, shows what it
// keeps on disk, reads its diff without waking, and wakes on new work
// with its workspace, container layer and home as they were.
func TestHibernateWake(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo new > new.txt && echo changed > src/main.c && rm README.md && mkdir -p d/e && ln -s ../new.txt d/e/link && "+
		"echo layer > /etc/hib-layer && echo home > /home/airlock/hib-home")
	// A background process is not kept.
	run(t, e, s.ID, "sh", "-c", "(sleep 600 >/dev/null 2>&1 &) ; true")

	h, err := e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	if h.State != api.StateHibernated || h.Hibernation == nil || h.Hibernation.Checkpoint == 0 || h.Hibernation.DiskBytes <= 0 || h.Hibernation.Reason != "asked" {
		t.Fatalf("hibernated session: %+v %+v", h, h.Hibernation)
	}
	if containerExists(t, e, s.ID) {
		t.Error("a hibernated session still has its container")
	}
	if m := testenv.MountsUnder(t, filepath.Join(e.StateDir, "sessions", s.ID)); len(m) > 0 {
		t.Errorf("a hibernated session still has mounts: %v", m)
	}

	d, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	var paths []string
	for _, f := range d.Files {
		paths = append(paths, f.Path)
	}
	slices.Sort(paths)
	if want := []string{"README.md", "d/e/link", "new.txt", "src/main.c"}; !slices.Equal(paths, want) {
		t.Errorf("diff of a hibernated session: %v, want %v", paths, want)
	}
	var patch strings.Builder
	must(t, e.Patch(ctx, s.ID, nil, &patch))
	if !strings.Contains(patch.String(), "+changed") {
		t.Errorf("patch of a hibernated session:\n%s", patch.String())
	}
	if cmds, err := e.Commands(ctx, s.ID, true); err != nil || len(cmds) != 2 {
		t.Errorf("commands (the log) of a hibernated session: %d, %v", len(cmds), err)
	}
	if _, err := e.EgressLog(ctx, s.ID, false, 10); err != nil {
		t.Errorf("egress log of a hibernated session: %v", err)
	}
	if st := state(t, e, s.ID); st != api.StateHibernated {
		t.Fatalf("reading the diff, patch and logs woke the session: %s", st)
	}

	t0 := time.Now()
	_, out := run(t, e, s.ID, "sh", "-c", "cat new.txt src/main.c /etc/hib-layer /home/airlock/hib-home; ls README.md 2>&1; readlink d/e/link; ps -o args | grep '^sleep 600' || echo none")
	t.Logf("wake and first command: %v", time.Since(t0))
	if want := "new\nchanged\nlayer\nhome\nls: README.md: No such file or directory\n../new.txt\nnone\n"; out != want {
		t.Errorf("after a wake:\n%s\nwant:\n%s", out, want)
	}
	if st := state(t, e, s.ID); st != api.StateRunning {
		t.Fatalf("state %s after new work", st)
	}
	life, err := e.Lifecycle(ctx, s.ID)
	must(t, err)
	if n := len(life); n < 2 || life[n-2].Kind != "hibernated" || life[n-1].Kind != "woken" {
		t.Errorf("lifecycle %+v", life)
	}
	acceptAll(t, e, s.ID)
	if b, err := os.ReadFile(filepath.Join(p, "new.txt")); err != nil || string(b) != "new\n" {
		t.Errorf("accepted new.txt: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(p, "README.md")); !os.IsNotExist(err) {
		t.Errorf("the deletion was not accepted: %v", err)
	}

	// Hibernated again, and accepting wakes it.
	run(t, e, s.ID, "sh", "-c", "echo again > again.txt")
	_, err = e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	acceptAll(t, e, s.ID)
	if b, err := os.ReadFile(filepath.Join(p, "again.txt")); err != nil || string(b) != "again\n" {
		t.Errorf("accepted again.txt: %q, %v", b, err)
	}
}

// After a host reboot (engine gone, container removed, tmpfs and
// overlay unmounted) a session with a checkpoint is back, hibernated,
// saying what it was restored from; exec wakes it with the checkpoint's
// files and accept works.
func TestRebootRestoresFromCheckpoint(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo kept > kept.txt && rm README.md")
	list, err := e.Checkpoints(ctx, s.ID) // the command's checkpoint, once written
	must(t, err)
	if len(list) == 0 {
		t.Fatal("no checkpoint after a command that changed the workspace")
	}
	c := list[len(list)-1]
	// Written since the last checkpoint, as a process that ran on would:
	// lost with the reboot.
	must(t, os.WriteFile(filepath.Join(e.StateDir, "sessions", s.ID, "merged", "lost.txt"), []byte("lost\n"), 0o644))

	// The reboot.
	reboot(t, e, s.ID)

	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	got, err := e2.Get(ctx, s.ID)
	must(t, err)
	if got.State != api.StateHibernated || got.Hibernation == nil || got.Hibernation.Checkpoint != uint64(c.ID) {
		t.Fatalf("after a reboot: %s %+v", got.State, got.Hibernation)
	}
	if r := got.Hibernation.Reason; !strings.Contains(r, fmt.Sprintf("restored from checkpoint %d of %s", c.ID, c.Time.UTC().Format(time.RFC3339))) {
		t.Errorf("reason %q does not say what it was restored from", r)
	}
	_, out := run(t, e2, s.ID, "sh", "-c", "cat kept.txt; ls lost.txt README.md 2>&1 | sort")
	if want := "kept\nls: README.md: No such file or directory\nls: lost.txt: No such file or directory\n"; out != want {
		t.Errorf("after the wake:\n%s\nwant:\n%s", out, want)
	}
	acceptAll(t, e2, s.ID)
	if b, err := os.ReadFile(filepath.Join(p, "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("accepted kept.txt: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(p, "README.md")); !os.IsNotExist(err) {
		t.Errorf("the deletion was not accepted: %v", err)
	}
	must(t, e2.Remove(ctx, s.ID))
	if _, err := os.Stat(filepath.Join(e.StateDir, "checkpoints", s.ID)); !os.IsNotExist(err) {
		t.Errorf("rm left the session's checkpoints: %v", err)
	}
}

// A session on a bare imported image (busybox's /bin and /etc/passwd,
// nothing else: no /workspace, /home or /tmp, which Docker makes in the
// container's own layer when it creates it) wakes after a reboot as one on
// the tiny image does, with its container layer's files back.
func TestRebootWakesABareImage(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	img := busyboxImage(t, e.Docker, "airlock/test-bare", []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc"}, false)
	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p, Image: img})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo kept > kept.txt")
	run(t, e, s.ID, "sh", "-c", "mkdir -p /opt/tool && echo layer > /opt/tool/state")
	_, err = e.Checkpoints(ctx, s.ID)
	must(t, err)

	reboot(t, e, s.ID)

	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	got, err := e2.Get(ctx, s.ID)
	must(t, err)
	if got.State != api.StateHibernated {
		t.Fatalf("after a reboot: %s", got.State)
	}
	for i := range 3 { // each exec, not only the first
		if _, out := run(t, e2, s.ID, "sh", "-c", "cat kept.txt /opt/tool/state"); out != "kept\nlayer\n" {
			t.Errorf("exec %d after the wake: %q", i, out)
		}
	}
	// A fork from the command's checkpoint makes a new container with that
	// layer: Docker made /workspace in it too.
	list, err := e2.Checkpoints(ctx, s.ID)
	must(t, err)
	forked, err := e2.Fork(ctx, s.ID, api.ForkRequest{Checkpoint: int64(list[len(list)-1].ID)})
	must(t, err)
	if len(forked.Sessions) != 1 {
		t.Fatalf("fork: %+v", forked)
	}
	if _, out := run(t, e2, forked.Sessions[0].ID, "sh", "-c", "cat kept.txt /opt/tool/state"); out != "kept\nlayer\n" {
		t.Errorf("in the fork: %q", out)
	}
	must(t, e2.Remove(ctx, forked.Sessions[0].ID))
	must(t, e2.Remove(ctx, s.ID))
}

// A session whose container layer's checkpoint is damaged still wakes
// after a reboot: with its workspace whole and the image's files outside
// it, saying why, never an exec that fails again and again.
func TestRebootWakesWithoutADamagedLayer(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo kept > kept.txt && mkdir -p /opt/tool && echo layer > /opt/tool/state")
	_, err = e.Checkpoints(ctx, s.ID)
	must(t, err)

	reboot(t, e, s.ID)
	objects := filepath.Join(e.StateDir, "sessions", s.ID, "checkpoints", "container", "objects")
	damaged := 0
	must(t, filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			damaged++
			return os.WriteFile(p, []byte("not what was stored"), 0o644)
		}
		return err
	}))
	if damaged == 0 {
		t.Fatal("the container layer's checkpoint has no objects to damage")
	}

	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	for i := range 2 {
		if code, out := run(t, e2, s.ID, "sh", "-c", "cat kept.txt; test -e /opt/tool/state || echo no layer"); code != 0 || out != "kept\nno layer\n" {
			t.Errorf("exec %d after the wake: %d %q", i, code, out)
		}
	}
	events, err := e2.Lifecycle(ctx, s.ID)
	must(t, err)
	said := false
	for _, ev := range events {
		said = said || strings.Contains(ev.Reason, "container layer") && strings.Contains(ev.Reason, "not restored")
	}
	if !said {
		t.Errorf("the wake did not say the container layer was not restored: %+v", events)
	}
	must(t, e2.Remove(ctx, s.ID))
}

// A session whose newest workspace checkpoint is damaged cannot wake:
// each try says so and what still works (a fork from an earlier
// checkpoint, then rm), never only the checkpoint store's error.
func TestRebootWithADamagedCheckpointSaysWhatWorks(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo one > one.txt")
	run(t, e, s.ID, "sh", "-c", "echo two > two.txt")
	list, err := e.Checkpoints(ctx, s.ID)
	must(t, err)
	if len(list) < 2 {
		t.Fatalf("%d checkpoints after two commands", len(list))
	}
	newest := list[len(list)-1]

	reboot(t, e, s.ID)
	// two.txt's content, stored once: only the newest checkpoint has it.
	two := filepath.Join(e.StateDir, "checkpoints", s.ID, "objects", "sha256")
	damaged := 0
	must(t, filepath.WalkDir(two, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if b, _ := os.ReadFile(p); string(b) == "two\n" {
			damaged++
			return os.WriteFile(p, []byte("owt\n"), 0o644)
		}
		return nil
	}))
	if damaged != 1 {
		t.Fatalf("found %d objects holding two.txt", damaged)
	}

	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	for i := range 2 {
		_, err := e2.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"true"}}, engine.ExecIO{Stdout: io.Discard, Stderr: io.Discard})
		msg := fmt.Sprint(err)
		if !errdefs.IsConflict(err) || !strings.Contains(msg, fmt.Sprintf("checkpoint %d is damaged", newest.ID)) ||
			!strings.Contains(msg, fmt.Sprintf("airlock fork %s --checkpoint %d", s.ID, list[len(list)-2].ID)) {
			t.Errorf("exec %d: %v", i, err)
		}
	}
	forked, err := e2.Fork(ctx, s.ID, api.ForkRequest{Checkpoint: int64(list[len(list)-2].ID)})
	must(t, err)
	if _, out := run(t, e2, forked.Sessions[0].ID, "sh", "-c", "cat one.txt"); out != "one\n" {
		t.Errorf("the fork from the earlier checkpoint: %q", out)
	}
	must(t, e2.Remove(ctx, forked.Sessions[0].ID))
	must(t, e2.Remove(ctx, s.ID))
}

// Undo and snapshot wake a hibernated session, as exec and accept do,
// instead of refusing it (found by the soak: both exited 75).
func TestUndoAndSnapshotWakeAHibernatedSession(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo one > one.txt")
	list, err := e.Checkpoints(ctx, s.ID)
	must(t, err)
	first := list[len(list)-1].ID
	run(t, e, s.ID, "sh", "-c", "echo two > two.txt")
	_, err = e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	if _, err := e.Undo(ctx, s.ID, api.UndoRequest{Checkpoint: int64(first)}); err != nil {
		t.Fatalf("undo of a hibernated session: %v", err)
	}
	if _, out := run(t, e, s.ID, "sh", "-c", "ls one.txt two.txt 2>&1 | sort"); out != "ls: two.txt: No such file or directory\none.txt\n" {
		t.Errorf("after the undo: %q", out)
	}
	_, err = e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{Name: "after-undo"})
	if err != nil {
		t.Fatalf("snapshot of a hibernated session: %v", err)
	}
	must(t, e.RemoveSnapshot(ctx, snap.ID))
	must(t, e.Remove(ctx, s.ID))
}

// A disk workspace hibernates and survives a reboot as it is: no
// checkpoint needed.
func TestDiskWorkspaceSurvivesReboot(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Workspace: api.WorkspaceDisk})
	must(t, err)
	if s.WorkspaceKind != api.WorkspaceDisk {
		t.Fatalf("workspace kind %q", s.WorkspaceKind)
	}
	dir := filepath.Join(e.StateDir, "sessions", s.ID)
	for _, m := range testenv.MountsUnder(t, dir) {
		if strings.HasSuffix(m, "/ws") {
			t.Fatalf("a disk workspace has a tmpfs at %s", m)
		}
	}
	run(t, e, s.ID, "sh", "-c", "echo disk > disk.txt")
	h, err := e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	if h.Hibernation == nil || h.Hibernation.Checkpoint != 0 || h.Hibernation.DiskBytes <= 0 {
		t.Errorf("a hibernated disk session: %+v", h.Hibernation)
	}
	if m := testenv.MountsUnder(t, dir); len(m) > 0 {
		t.Errorf("a hibernated disk session still has mounts: %v", m)
	}
	if d, err := e.Diff(ctx, s.ID, nil); err != nil || len(d.Files) != 1 || d.Files[0].Path != "disk.txt" {
		t.Errorf("diff of a hibernated disk session: %+v, %v", d.Files, err)
	}
	if _, out := run(t, e, s.ID, "cat", "disk.txt"); out != "disk\n" {
		t.Errorf("after a wake: %q", out)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	e.Close(cctx)
	cancel()
	must(t, e.Docker.ContainerRemove(ctx, "airlock-"+s.ID, container.RemoveOptions{Force: true}))
	for _, m := range slices.Backward(testenv.MountsUnder(t, dir)) {
		must(t, unix.Unmount(m, 0))
	}
	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	if st := state(t, e2, s.ID); st != api.StateHibernated {
		g, _ := e2.Get(ctx, s.ID)
		t.Fatalf("a disk session after a reboot: %s %s", st, g.Error)
	}
	if _, out := run(t, e2, s.ID, "cat", "disk.txt"); out != "disk\n" {
		t.Errorf("after the wake: %q", out)
	}
	must(t, e2.Remove(ctx, s.ID))
}

// An idle session hibernates after HibernateAfter; one that opted out
// (--hibernate-after off) does not.
func TestIdleHibernate(t *testing.T) {
	e := enginetest.Start(t, func(o *engine.Options) {
		o.IdleCheck = 200 * time.Millisecond
		o.Defaults.HibernateAfter = time.Second
	})
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	never, err := e.Create(ctx, api.CreateRequest{Project: project(t), HibernateAfter: -1})
	must(t, err)
	if _, err := e.Create(ctx, api.CreateRequest{Project: project(t), HibernateAfter: time.Second}); !errdefs.IsInvalid(err) {
		t.Errorf("a hibernate-after of a second: %v", err)
	}
	run(t, e, s.ID, "sh", "-c", "echo idle > idle.txt")
	deadline := time.Now().Add(10 * time.Second)
	for state(t, e, s.ID) != api.StateHibernated && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	got, err := e.Get(ctx, s.ID)
	must(t, err)
	if got.State != api.StateHibernated || got.Hibernation == nil || !strings.HasPrefix(got.Hibernation.Reason, "idle for") {
		t.Fatalf("an idle session: %s %+v", got.State, got.Hibernation)
	}
	if st := state(t, e, never.ID); st != api.StateRunning {
		t.Errorf("a session that opted out is %s", st)
	}
	if _, out := run(t, e, s.ID, "cat", "idle.txt"); out != "idle\n" {
		t.Errorf("after the wake: %q", out)
	}
}

// What a session's record holds survives hibernation, an engine restart
// and a wake: its budget, its network policy (changed while it slept
// too), its snapshots, the CPU time it used (its cost and budget go on);
// rm of a hibernated session leaves nothing.
func TestHibernateKeepsRecordAndRemoves(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), CPUBudget: time.Hour})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo a > a.txt; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	busy, err := e.Get(ctx, s.ID)
	must(t, err)
	_, err = e.Policy(ctx, s.ID, api.PolicyChange{Allow: []string{"before.example.org"}})
	must(t, err)
	snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{})
	must(t, err)
	h, err := e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	if busy.CPUSeconds <= 0 || h.CPUSeconds < busy.CPUSeconds {
		t.Errorf("CPU seconds %v before hibernating, %v hibernated", busy.CPUSeconds, h.CPUSeconds)
	}
	_, err = e.Policy(ctx, s.ID, api.PolicyChange{Allow: []string{"asleep.example.org"}})
	must(t, err)
	if st := state(t, e, s.ID); st != api.StateHibernated {
		t.Fatalf("a policy change woke the session: %s", st)
	}

	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	if st := state(t, e2, s.ID); st != api.StateHibernated {
		t.Fatalf("after an engine restart: %s", st)
	}
	w, err := e2.Wake(ctx, s.ID)
	must(t, err)
	if w.State != api.StateRunning || w.CPUBudget != time.Hour || w.Egress == nil ||
		!slices.Contains(w.Egress.Allow, "before.example.org") || !slices.Contains(w.Egress.Allow, "asleep.example.org") {
		t.Fatalf("woken: %s budget %v policy %+v", w.State, w.CPUBudget, w.Egress)
	}
	if w.CPUSeconds < busy.CPUSeconds {
		t.Errorf("CPU seconds %v before hibernating, %v woken", busy.CPUSeconds, w.CPUSeconds)
	}
	if _, out := run(t, e2, s.ID, "cat", "a.txt"); out != "a\n" {
		t.Errorf("after the wake: %q", out)
	}
	if _, err := e2.Snapshot(ctx, s.ID, api.SnapshotRequest{}); err != nil {
		t.Errorf("snapshot after a wake: %v", err)
	}
	if _, err := e2.Store.Snapshot(ctx, snap.ID); err != nil {
		t.Errorf("the snapshot taken before hibernation: %v", err)
	}

	_, err = e2.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	if _, err := e2.Diff(ctx, s.ID, nil); err != nil { // a peek to remove too
		t.Fatal(err)
	}
	must(t, e2.Remove(ctx, s.ID))
	for _, p := range []string{filepath.Join(e.StateDir, "checkpoints", s.ID), filepath.Join(e.StateDir, "sessions", s.ID)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("rm of a hibernated session left %s: %v", p, err)
		}
	}
}

// The next agent turn after a hibernation wakes the session and
// continues the same conversation (the CLI's state is in the home,
// which a hibernation keeps).
func TestHibernateAgentConversation(t *testing.T) {
	e := enginetest.Start(t)
	image := enginetest.AgentsImage(t, e.Docker)
	ctx := context.Background()
	model, base := enginetest.Model(t, e.Docker, mockmodel.Reply{Text: "Turn one is done."})
	s, err := e.Create(ctx, api.CreateRequest{Project: ownedProject(t), Image: image, Limits: agentLimits})
	must(t, err)
	t1, _ := turn(t, e, s.ID, api.AgentRequest{Agent: "claude", Prompt: "first prompt", BaseURL: base, APIKey: testKey})
	if t1.State != "done" {
		t.Fatalf("turn 1: %+v", t1)
	}
	_, err = e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	if turns, err := e.Turns(ctx, s.ID); err != nil || len(turns) != 1 {
		t.Fatalf("turns of a hibernated session: %v, %v", turns, err)
	}
	if st := state(t, e, s.ID); st != api.StateHibernated {
		t.Fatalf("reading the turns woke the session: %s", st)
	}
	model.Push(mockmodel.Reply{Text: "Turn two is done."})
	before := len(model.Requests())
	t2, _ := turn(t, e, s.ID, api.AgentRequest{Prompt: "second prompt", BaseURL: base, APIKey: testKey})
	if t2.State != "done" || t2.N != 2 || t2.AgentSession != t1.AgentSession {
		t.Fatalf("turn 2 after a wake: %+v (turn 1 in conversation %q)", t2, t1.AgentSession)
	}
	continued := false
	for _, r := range model.Requests()[before:] {
		if r.Scripted && strings.Contains(r.Body, "first prompt") && strings.Contains(r.Body, "second prompt") {
			continued = true
		}
	}
	if !continued {
		t.Errorf("turn 2's model request does not carry turn 1's conversation")
	}
}

// A wake whose checkpoint cannot be restored (its objects damaged) fails
// with the reason, leaves the session hibernated and the engine whole.
func TestWakeFromDamagedCheckpointFails(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo kept > kept.txt")
	_, err = e.Hibernate(ctx, s.ID, api.HibernateRequest{})
	must(t, err)
	must(t, os.RemoveAll(filepath.Join(e.StateDir, "checkpoints", s.ID, "objects")))
	if _, err := e.Wake(ctx, s.ID); !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "is damaged") ||
		!strings.Contains(err.Error(), "airlock fork "+s.ID) && !strings.Contains(err.Error(), "airlock rm "+s.ID) {
		t.Fatalf("a wake from a damaged checkpoint: %v", err)
	}
	got, err := e.Get(ctx, s.ID)
	must(t, err)
	if got.State != api.StateHibernated {
		t.Errorf("after the failed wake: %s", got.State)
	}
}
