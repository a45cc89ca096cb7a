package engine_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"golang.org/x/sys/unix"
)

// timelineProject is a project with a directory the session replaces.
func timelineProject(t *testing.T) string {
	p := project(t)
	must(t, os.MkdirAll(filepath.Join(p, "old"), 0o755))
	must(t, os.WriteFile(filepath.Join(p, "old/a.txt"), []byte("a\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(p, "old/b.txt"), []byte("b\n"), 0o644))
	return p
}

// tree describes a directory as lines: type, mode, content or target,
// the opaque mark, whiteouts, and which names share an inode.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	inodes := map[uint64][]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s %o", rel, st.Mode)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, _ := os.ReadFile(p)
			line += " " + string(b)
			if st.Nlink > 1 {
				inodes[st.Ino] = append(inodes[st.Ino], rel)
			}
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case unix.S_IFCHR:
			line += fmt.Sprintf(" whiteout %d", st.Rdev)
		case unix.S_IFDIR:
			buf := make([]byte, 8)
			if n, err := unix.Lgetxattr(p, "trusted.overlay.opaque", buf); err == nil {
				line += " opaque=" + string(buf[:n])
			}
		}
		if rel != "." {
			lines = append(lines, line)
		}
		return nil
	})
	must(t, err)
	for _, names := range inodes {
		sort.Strings(names)
		lines = append(lines, "linked "+strings.Join(names, " "))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// liveDiff is a session's review diff as a user reads it: every file with
// its kind and the lines of its hunks.
func liveDiff(t *testing.T, d api.Diff) string {
	var out []string
	for _, f := range d.Files {
		if f.Type == "dir" || f.OldType == "dir" && f.Type == "" {
			continue
		}
		s := f.Path + " " + f.Kind
		for _, h := range f.Hunks {
			s += " " + strings.Join(h.Lines, "")
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func customTurn(t *testing.T, e *enginetest.Engine, id, script string) api.Turn {
	t.Helper()
	tr, _ := turn(t, e, id, api.AgentRequest{Agent: "custom", Prompt: "go", Cmd: script + "; echo {prompt} >/dev/null"})
	if tr.State != "done" {
		t.Fatalf("turn %+v", tr)
	}
	return tr
}

func TestTimeline(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := timelineProject(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	upper := filepath.Join(e.StateDir, "sessions", s.ID, "ws", "upper")

	// A command: a checkpoint that equals the upper layer (deletions,
	// an opaque directory, modes, symlinks, hard links, nested dirs).
	code, out := run(t, e, s.ID, "sh", "-c", `set -e
		echo hi > hello.txt; rm README.md; rm -r old; mkdir old; echo c > old/c.txt
		chmod 750 src/main.c; ln -s hello.txt link; ln hello.txt hard; mkdir -p deep/x; echo y > deep/x/y`)
	if code != 0 {
		t.Fatalf("command: %d %s", code, out)
	}
	list, err := e.Checkpoints(ctx, s.ID)
	must(t, err)
	if len(list) != 1 || list[0].Kind != api.CheckpointCommand || list[0].Command == 0 || list[0].Files < 7 {
		t.Fatalf("after a command: %+v", list)
	}
	st, err := checkpoint.Open(timeline.Dir(e.StateDir, s.ID))
	must(t, err)
	restored := t.TempDir()
	must(t, st.RestoreDir(ctx, checkpoint.ID(list[0].ID), restored))
	if got, want := tree(t, restored), tree(t, upper); got != want {
		t.Fatalf("checkpoint 1 holds\n%s\nthe workspace's upper layer\n%s", got, want)
	}
	// A command that changes nothing makes no checkpoint.
	run(t, e, s.ID, "true")
	if list, _ = e.Checkpoints(ctx, s.ID); len(list) != 1 {
		t.Fatalf("a command that changed nothing was checkpointed: %+v", list)
	}

	// Two agent turns; turn 2's diff is computed from checkpoints.
	customTurn(t, e, s.ID, "echo one > turn.txt")
	d1, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	if got := liveDiff(t, d1); !strings.Contains(got, "turn.txt added +one") || !strings.Contains(got, "old/a.txt deleted") || !strings.Contains(got, "README.md deleted") {
		t.Fatalf("the diff after turn 1 lacks what the test compares:\n%s", got)
	}
	customTurn(t, e, s.ID, "echo two >> turn.txt; rm hello.txt")
	d2, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	list, err = e.Checkpoints(ctx, s.ID)
	must(t, err)
	if len(list) != 3 || list[1].Turn != 1 || list[2].Turn != 2 || list[2].From != list[1].ID || list[2].Added != 1 {
		t.Fatalf("after two turns: %+v", list)
	}
	td, err := e.CheckpointDiff(ctx, s.ID, api.CheckpointDiffQuery{Turn: 2})
	must(t, err)
	// hello.txt is deleted; hard keeps its content (its link is gone).
	if got, want := liveDiff(t, td), "hello.txt deleted -hi\n\nturn.txt modified  one\n+two\n"; got != want {
		t.Errorf("turn 2's diff:\n%q\nwant\n%q", got, want)
	}
	ft, err := e.CheckpointDiff(ctx, s.ID, api.CheckpointDiffQuery{From: 1, To: 2})
	must(t, err)
	if liveDiff(t, ft) != liveDiff(t, td) {
		t.Errorf("--from 1 --to 2:\n%s\nturn 2:\n%s", liveDiff(t, ft), liveDiff(t, td))
	}
	if _, err := e.CheckpointDiff(ctx, s.ID, api.CheckpointDiffQuery{Turn: 9}); !errdefs.IsNotFound(err) {
		t.Errorf("a turn without a checkpoint: %v", err)
	}

	// Undo, with a process running and one a command left behind: both
	// are stopped, and the workspace is as it was after turn 1.
	run(t, e, s.ID, "sh", "-c", "(sleep 601 >/dev/null 2>&1 &); true")
	sleeping := make(chan error, 1)
	go func() {
		_, err := e.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"sleep", "600"}}, engine.ExecIO{})
		sleeping <- err
	}()
	time.Sleep(500 * time.Millisecond)
	u, err := e.Undo(ctx, s.ID, api.UndoRequest{})
	must(t, err)
	if u.Stopped < 1 || u.To.ID != list[1].ID || u.Checkpoint.Kind != api.CheckpointUndo || u.Checkpoint.UndoTo != list[1].ID {
		t.Fatalf("undo: %+v", u)
	}
	select {
	case <-sleeping:
	case <-time.After(10 * time.Second):
		t.Fatal("the running command was not stopped by the undo")
	}
	if _, out := run(t, e, s.ID, "sh", "-c", "ps -o args | grep -c '^sleep 601' || true"); out != "0\n" {
		t.Errorf("the process a command left behind was not stopped by the undo: %q", out)
	}
	if l, _ := e.Checkpoints(ctx, s.ID); l[len(l)-1].Kind != api.CheckpointUndo {
		t.Errorf("the command the undo stopped was checkpointed after it: %+v", l[len(l)-1])
	}
	after, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	if liveDiff(t, after) != liveDiff(t, d1) {
		t.Fatalf("after undo the diff is\n%s\nafter turn 1 it was\n%s", liveDiff(t, after), liveDiff(t, d1))
	}
	if _, out := run(t, e, s.ID, "sh", "-c", "cat turn.txt hello.txt; ls old; readlink link; stat -c %a src/main.c"); out != "one\nhi\nc.txt\nhello.txt\n750\n" {
		t.Errorf("the workspace after undo reads %q", out)
	}
	// The undo is undone.
	_, err = e.Undo(ctx, s.ID, api.UndoRequest{Checkpoint: u.Before})
	must(t, err)
	again, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	if liveDiff(t, again) != liveDiff(t, d2) {
		t.Fatalf("after undoing the undo the diff is\n%s\nafter turn 2 it was\n%s", liveDiff(t, again), liveDiff(t, d2))
	}

	// Fork from turn 1: new sessions with the workspace after it.
	forked, err := e.Fork(ctx, s.ID, api.ForkRequest{Turn: 1, N: 2})
	must(t, err)
	if len(forked.Sessions) != 2 {
		t.Fatalf("fork: %+v", forked)
	}
	for _, f := range forked.Sessions {
		fd, err := e.Diff(ctx, f.ID, nil)
		must(t, err)
		if liveDiff(t, fd) != liveDiff(t, d1) {
			t.Errorf("fork %s's diff\n%s\nwant turn 1's\n%s", f.ID, liveDiff(t, fd), liveDiff(t, d1))
		}
	}

	// The checkpoints go with the session.
	must(t, e.Remove(ctx, s.ID))
	if _, err := os.Stat(timeline.Dir(e.StateDir, s.ID)); !os.IsNotExist(err) {
		t.Errorf("checkpoints of a removed session: %v", err)
	}
}

// TestTimelinePeriodicAndPrune: a workspace that changes while a command
// still runs is checkpointed periodically; a session keeps at most
// CheckpointKeep checkpoints.
func TestTimelinePeriodicAndPrune(t *testing.T) {
	e := enginetest.Start(t, func(o *engine.Options) {
		o.Defaults.CheckpointEvery = 500 * time.Millisecond
		o.Defaults.CheckpointKeep = 3
	})
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	go e.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo a > p.txt; sleep 600"}}, engine.ExecIO{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := e.Checkpoints(ctx, s.ID)
		must(t, err)
		if len(list) == 1 && list[0].Kind == api.CheckpointPeriodic && list[0].Files == 1 {
			break
		}
		if len(list) > 1 || time.Now().After(deadline) {
			t.Fatalf("no periodic checkpoint (one only: nothing changes after the first): %+v", list)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range 9 {
		run(t, e, s.ID, "sh", "-c", fmt.Sprintf("echo %d > f%d", i, i))
	}
	list, err := e.Checkpoints(ctx, s.ID)
	must(t, err)
	var ids []int64
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	// Pruned at every tenth checkpoint (periodic ones may come between
	// the commands): the three newest then, and those made since.
	last := ids[len(ids)-1]
	var want []int64
	for id := last/10*10 - 2; id <= last; id++ {
		want = append(want, id)
	}
	if last < 10 || fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("after %d checkpoints with keep 3: %v, want %v", last, ids, want)
	}
}

// TestUndoHostile: a session that swaps a directory for a symlink to a
// host directory after a checkpoint gets the directory back on undo, and
// nothing is written through the symlink.
func TestUndoHostile(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	host := t.TempDir()
	run(t, e, s.ID, "sh", "-c", "mkdir -p keep/sub; echo k > keep/sub/k.txt; echo m > src/main.c")
	list, err := e.Checkpoints(ctx, s.ID)
	must(t, err)
	first := list[len(list)-1].ID
	run(t, e, s.ID, "sh", "-c", "rm -rf keep src; ln -s "+host+" keep; ln -s "+host+" src")
	if _, err := e.Undo(ctx, s.ID, api.UndoRequest{Checkpoint: first}); err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(host); len(names) != 0 {
		t.Fatalf("the undo wrote into the host directory the session's symlink named: %v", names)
	}
	if _, out := run(t, e, s.ID, "sh", "-c", "cat keep/sub/k.txt src/main.c; test -L keep || echo dir"); out != "k\nm\ndir\n" {
		t.Errorf("after undo: %q", out)
	}
}

// TestUndoOpaque: undo across a directory the session replaced (an opaque
// directory in the upper layer) brings the project's entries back, and
// undoing that undo hides them again.
func TestUndoOpaque(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: timelineProject(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo x > x.txt")
	before, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "rm -r old; mkdir old; echo c > old/c.txt")
	replaced, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	list, err := e.Checkpoints(ctx, s.ID)
	must(t, err)
	u, err := e.Undo(ctx, s.ID, api.UndoRequest{Checkpoint: list[0].ID})
	must(t, err)
	if got, _ := e.Diff(ctx, s.ID, nil); liveDiff(t, got) != liveDiff(t, before) {
		t.Fatalf("after undo:\n%s\nwant\n%s", liveDiff(t, got), liveDiff(t, before))
	}
	if _, out := run(t, e, s.ID, "ls", "old"); out != "a.txt\nb.txt\n" {
		t.Errorf("old/ after undo: %q", out)
	}
	_, err = e.Undo(ctx, s.ID, api.UndoRequest{Checkpoint: u.Before})
	must(t, err)
	if got, _ := e.Diff(ctx, s.ID, nil); liveDiff(t, got) != liveDiff(t, replaced) {
		t.Fatalf("after undoing the undo:\n%s\nwant\n%s", liveDiff(t, got), liveDiff(t, replaced))
	}
	if _, out := run(t, e, s.ID, "ls", "old"); out != "c.txt\n" {
		t.Errorf("old/ after undoing the undo: %q", out)
	}
}

// TestUndoFirstTurn: undoing a session's first turn gives back the
// workspace it started with.
func TestUndoFirstTurn(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	customTurn(t, e, s.ID, "echo one > one.txt; rm README.md; echo x >> src/main.c")
	u, err := e.Undo(ctx, s.ID, api.UndoRequest{})
	must(t, err)
	if u.To.ID != 0 || u.Files == 0 {
		t.Fatalf("undo of the first turn: %+v", u)
	}
	if d, err := e.Diff(ctx, s.ID, nil); err != nil || len(d.Files) != 0 {
		t.Fatalf("after undoing the first turn: %v %s", err, liveDiff(t, d))
	}
}
