package timeline_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/testenv"
	"golang.org/x/sys/unix"
)

// fakeSessions is one session "s1" over an upper directory and a project.
type fakeSessions struct {
	upper, project string
	turns          []api.Turn
	commands       []api.Command
	events         map[int][]api.Event
}

func (f *fakeSessions) Workspace(ctx context.Context, id string) (string, string, string, error) {
	if id != "s1" {
		return "", "", "", errdefs.NotFoundf("no session %s", id)
	}
	return f.upper, "", f.project, nil
}
func (f *fakeSessions) Project(ctx context.Context, id string) (string, error)   { return f.project, nil }
func (f *fakeSessions) Active() []string                                         { return []string{"s1"} }
func (f *fakeSessions) Turns(ctx context.Context, id string) ([]api.Turn, error) { return f.turns, nil }
func (f *fakeSessions) Commands(ctx context.Context, id string) ([]api.Command, error) {
	return f.commands, nil
}
func (f *fakeSessions) Events(ctx context.Context, id string, turn int) ([]api.Event, error) {
	return f.events[turn], nil
}
func (f *fakeSessions) StopProcesses(ctx context.Context, id string) (int, func(), error) {
	return 0, func() {}, nil
}
func (f *fakeSessions) RecordLayers(ctx context.Context, id, label string) (timeline.Layers, bool, error) {
	return timeline.Layers{}, false, nil
}
func (f *fakeSessions) RestoreLayers(ctx context.Context, id string, l timeline.Layers) (bool, error) {
	return false, nil
}
func (f *fakeSessions) PruneLayers(ctx context.Context, id string, keep []timeline.Layers) error {
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(data), 0o644))
}

func summary(d api.Diff) string {
	var out []string
	for _, f := range d.Files {
		out = append(out, f.Kind+" "+f.Path)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// TestDiffOverTheProject: a checkpoint's whiteouts and opaque directories
// read as deletions of the project's files, counted when recorded; a
// Record that finds nothing changed records nothing; a checkpoint another
// recorder labelled is listed by its label; Remove deletes the store.
func TestDiffOverTheProject(t *testing.T) {
	testenv.Root(t, "whiteouts and opaque directories")
	ctx := context.Background()
	state := t.TempDir()
	f := &fakeSessions{upper: t.TempDir(), project: t.TempDir(), turns: []api.Turn{{N: 1, Usage: api.Usage{InputTokens: 7, CostUSD: 0.5}, CPUSeconds: 2}}}
	write(t, filepath.Join(f.project, "README.md"), "# demo\n")
	write(t, filepath.Join(f.project, "old/a.txt"), "a\n")
	write(t, filepath.Join(f.project, "old/b.txt"), "b\n")
	write(t, filepath.Join(f.project, "keep.txt"), "one\ntwo\n")
	tl := timeline.New(state, f, timeline.Options{Every: -1})

	write(t, filepath.Join(f.upper, "new.txt"), "new\n")
	write(t, filepath.Join(f.upper, "keep.txt"), "one\n2\n")
	must(t, unix.Mknod(filepath.Join(f.upper, "README.md"), unix.S_IFCHR, 0))
	write(t, filepath.Join(f.upper, "old/c.txt"), "c\n")
	must(t, unix.Setxattr(filepath.Join(f.upper, "old"), "trusted.overlay.opaque", []byte("y"), 0))
	c, ok, err := tl.Record(ctx, "s1", timeline.Mark{Kind: api.CheckpointTurn, Turn: 1, Always: true})
	must(t, err)
	if !ok || c.Files != 6 || c.Added != 3 || c.Removed != 4 {
		t.Fatalf("turn 1's checkpoint: %+v: want 6 files, +3 -4", c)
	}
	d, err := tl.Diff(ctx, "s1", api.CheckpointDiffQuery{Turn: 1})
	must(t, err)
	if got, want := summary(d), "added new.txt, added old/c.txt, deleted README.md, deleted old/a.txt, deleted old/b.txt, modified keep.txt"; got != want {
		t.Errorf("turn 1: %s, want %s", got, want)
	}
	if _, ok, err := tl.Record(ctx, "s1", timeline.Mark{Kind: api.CheckpointCommand, Command: 3}); ok || err != nil {
		t.Errorf("an unchanged workspace was recorded (%v)", err)
	}

	// The file comes back as the project has it.
	must(t, os.Remove(filepath.Join(f.upper, "keep.txt")))
	st, err := tl.Store("s1")
	must(t, err)
	_, err = st.RecordDir(ctx, f.upper, checkpoint.RecordOptions{Label: "hibernate"})
	must(t, err)
	list, err := tl.List(ctx, "s1")
	must(t, err)
	if len(list) != 2 || list[0].Usage == nil || list[0].Usage.CostUSD != 0.5 || list[1].Kind != "hibernate" {
		t.Fatalf("list: %+v", list)
	}
	d, err = tl.Diff(ctx, "s1", api.CheckpointDiffQuery{FromCheckpoint: 1, ToCheckpoint: 2})
	must(t, err)
	if got := summary(d); got != "modified keep.txt" || d.Stats[0].Added != 1 || d.Stats[0].Removed != 1 {
		t.Errorf("from 1 to 2: %s %+v", got, d.Stats)
	}

	must(t, tl.Remove("s1"))
	if _, err := os.Stat(timeline.Dir(state, "s1")); !os.IsNotExist(err) {
		t.Errorf("the store is still there: %v", err)
	}
	if list, err := tl.List(ctx, "s1"); err != nil || len(list) != 0 {
		t.Errorf("after Remove: %v %v", list, err)
	}
}

// TestWritePatch: a checkpoint diff written as a patch is applied by git
// to the project as the diff's start had it.
func TestWritePatch(t *testing.T) {
	testenv.Root(t, "whiteouts")
	ctx := context.Background()
	f := &fakeSessions{upper: t.TempDir(), project: t.TempDir()}
	write(t, filepath.Join(f.project, "README.md"), "# demo\n")
	write(t, filepath.Join(f.project, "keep.txt"), "one\ntwo\n")
	tl := timeline.New(t.TempDir(), f, timeline.Options{Every: -1})
	write(t, filepath.Join(f.upper, "new.txt"), "new\nno newline")
	write(t, filepath.Join(f.upper, "keep.txt"), "one\n2\n")
	must(t, os.Chmod(filepath.Join(f.upper, "keep.txt"), 0o755))
	must(t, unix.Mknod(filepath.Join(f.upper, "README.md"), unix.S_IFCHR, 0))
	must(t, os.Symlink("keep.txt", filepath.Join(f.upper, "link")))
	_, _, err := tl.Record(ctx, "s1", timeline.Mark{Kind: api.CheckpointTurn, Turn: 1, Always: true})
	must(t, err)
	d, err := tl.Diff(ctx, "s1", api.CheckpointDiffQuery{Turn: 1})
	must(t, err)
	var patch strings.Builder
	must(t, timeline.WritePatch(&patch, d.Files))
	repo := t.TempDir()
	write(t, filepath.Join(repo, "README.md"), "# demo\n")
	write(t, filepath.Join(repo, "keep.txt"), "one\ntwo\n")
	cmd := exec.Command("git", "apply", "-")
	cmd.Dir, cmd.Stdin = repo, strings.NewReader(patch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v %s\n%s", err, out, patch.String())
	}
	for p, want := range map[string]string{"new.txt": "new\nno newline", "keep.txt": "one\n2\n"} {
		if b, _ := os.ReadFile(filepath.Join(repo, p)); string(b) != want {
			t.Errorf("%s: %q, want %q", p, b, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(repo, "keep.txt")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("keep.txt's mode: %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(repo, "README.md")); !os.IsNotExist(err) {
		t.Errorf("README.md is still there: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(repo, "link")); err != nil || target != "keep.txt" {
		t.Errorf("link: %q %v", target, err)
	}
}
