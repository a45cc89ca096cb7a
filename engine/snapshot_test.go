package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// diffSummary is a session's changes as "kind path" lines.
func diffSummary(t *testing.T, e *enginetest.Engine, id string) string {
	t.Helper()
	d, err := e.Diff(context.Background(), id, nil)
	must(t, err)
	var out []string
	for _, f := range d.Files {
		out = append(out, string(f.Kind)+" "+f.Path)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// prepare gives a session the state snapshots must carry: a package-like
// file installed as root, a deleted image file, the agent's home, and
// workspace changes (a change, a deletion, a replaced directory).
func prepare(t *testing.T, e *enginetest.Engine, id string) {
	t.Helper()
	var out bytes.Buffer
	code, err := e.Exec(context.Background(), id, api.ExecRequest{User: "0", Argv: []string{"sh", "-c",
		"mkdir -p /opt/tool && echo v1 > /opt/tool/VERSION && rm /etc/group && echo conversation > /home/airlock/.state"}},
		execIO(&out))
	must(t, err)
	if code != 0 {
		t.Fatalf("prepare as root: %d %s", code, out.String())
	}
	if code, out := run(t, e, id, "sh", "-c", "echo changed >> README.md && rm src/main.c && rm -rf src && mkdir src && echo new > src/new.c && echo big > notes.txt"); code != 0 {
		t.Fatalf("prepare: %d %s", code, out)
	}
}

// carried checks that a session holds what prepare wrote.
func carried(t *testing.T, e *enginetest.Engine, id string) {
	t.Helper()
	code, out := run(t, e, id, "sh", "-c", "cat /opt/tool/VERSION /home/airlock/.state README.md src/new.c; ls src; test -e /etc/group && echo group-is-back; true")
	want := "v1\nconversation\n# demo\nchanged\nnew\nnew.c\n"
	if code != 0 || out != want {
		t.Errorf("session %s holds:\n%s\nwant:\n%s", id, out, want)
	}
}

func TestSnapshotRestoreFork(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	prepare(t, e, s.ID)
	before := diffSummary(t, e, s.ID)

	snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{Name: "after-setup"})
	must(t, err)
	if len(snap.Layers) != 2 || snap.Layers[0].What != "container" || snap.Layers[1].What != "workspace" {
		t.Fatalf("layers %+v", snap.Layers)
	}
	if c := snap.Layers[0]; c.Files < 2 || c.Delete < 1 {
		t.Errorf("container layer %+v: want the tool, the home file and the deletion", c)
	}
	if w := snap.Layers[1]; w.Files != 3 || w.Delete != 1 {
		t.Errorf("workspace layer %+v: want README.md, src/new.c, notes.txt and src made opaque", w)
	}
	if snap.Frozen <= 0 || snap.Frozen > snap.Took {
		t.Errorf("frozen %v of %v", snap.Frozen, snap.Took)
	}
	if st := state(t, e, s.ID); st != api.StateRunning {
		t.Errorf("the session is %s after its snapshot", st)
	}
	// The snapshot outlives its session and the engine.
	must(t, e.Remove(ctx, s.ID))
	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	t.Cleanup(func() { enginetest.RemoveAll(t, e2) })
	got, err := e2.GetSnapshot(ctx, "after-setup")
	must(t, err)
	if got.ID != snap.ID {
		t.Fatalf("by name: %s, want %s", got.ID, snap.ID)
	}

	r, err := e2.Restore(ctx, "after-setup", api.RestoreRequest{})
	must(t, err)
	if len(r.Sessions) != 1 || len(r.Warnings) != 0 {
		t.Fatalf("restore: %+v", r)
	}
	carried(t, e2, r.Sessions[0].ID)
	if after := diffSummary(t, e2, r.Sessions[0].ID); after != before {
		t.Errorf("the restored session's diff:\n%s\nthe original's:\n%s", after, before)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "README.md")); string(b) != "# demo\n" {
		t.Errorf("restoring wrote the project: %q", b)
	}

	f, err := e2.Restore(ctx, snap.ID[:6], api.RestoreRequest{N: 3})
	must(t, err)
	if len(f.Sessions) != 3 {
		t.Fatalf("fork made %d sessions", len(f.Sessions))
	}
	for _, x := range f.Sessions {
		carried(t, e2, x.ID)
	}
	// Forks are independent of each other.
	run(t, e2, f.Sessions[0].ID, "sh", "-c", "echo only-here > mine.txt && echo v2 > /opt/tool/VERSION")
	if code, out := run(t, e2, f.Sessions[1].ID, "sh", "-c", "cat mine.txt 2>&1; cat /opt/tool/VERSION"); !strings.Contains(out, "No such file") || !strings.HasSuffix(out, "v1\n") || code != 0 {
		t.Errorf("a fork sees another's writes: %q", out)
	}
	for _, x := range append(r.Sessions, f.Sessions...) {
		must(t, e2.Remove(ctx, x.ID))
	}

	// A second snapshot with the same workspace shares its layer.
	s2, err := e2.Restore(ctx, snap.ID, api.RestoreRequest{})
	must(t, err)
	snap2, err := e2.Snapshot(ctx, s2.Sessions[0].ID, api.SnapshotRequest{})
	must(t, err)
	if snap2.Layers[1].Digest != snap.Layers[1].Digest {
		t.Errorf("the same workspace gave another layer: %s, %s", snap2.Layers[1].Digest, snap.Layers[1].Digest)
	}
	must(t, e2.RemoveSnapshot(ctx, snap.ID))
	if _, err := e2.Restore(ctx, snap2.ID, api.RestoreRequest{}); err != nil {
		t.Errorf("removing one snapshot broke another that shares its layer: %v", err)
	}
	if _, err := e2.Restore(ctx, "after-setup", api.RestoreRequest{}); !errdefs.IsNotFound(err) {
		t.Errorf("restore of a removed snapshot: %v", err)
	}
	if _, err := e2.Restore(ctx, snap2.ID, api.RestoreRequest{N: 51}); !errdefs.IsInvalid(err) {
		t.Errorf("fork of 51: %v", err)
	}
}

func execIO(w io.Writer) engine.ExecIO { return engine.ExecIO{Stdout: w, Stderr: w} }

// TestSnapshotDuringHeavyWrites snapshots a session while it writes as
// fast as it can: each file is written whole under a temporary name,
// renamed, then logged. A consistent snapshot has every logged file
// whole; one read while the writer ran would not.
func TestSnapshotDuringHeavyWrites(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Limits: api.Limits{WorkspaceSize: 256 << 20, Memory: 512 << 20}})
	must(t, err)
	writer := `i=0; while [ $i -lt 4000 ]; do head -c 16384 /dev/zero > .t; mv .t f$i; echo f$i >> log; i=$((i+1)); [ $i -gt 300 ] && rm -f f$((i-300)); done`
	go e.Exec(context.Background(), s.ID, api.ExecRequest{Argv: []string{"sh", "-c", writer}}, execIO(io.Discard))
	var snaps []api.Snapshot
	for range 4 {
		time.Sleep(300 * time.Millisecond)
		snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{})
		must(t, err)
		snaps = append(snaps, snap)
	}
	for i, snap := range snaps {
		r, err := e.Restore(ctx, snap.ID, api.RestoreRequest{})
		must(t, err)
		id := r.Sessions[0].ID
		// The writer's invariant: with f$L logged last, f$((L-298)) to
		// f$L exist whole.
		check := `L=$(tail -n 1 log | tr -d f); n=0; bad=0; j=$((L-298)); [ $j -lt 0 ] && j=0; while [ $j -le $L ]; do n=$((n+1)); [ -e f$j ] && [ $(wc -c < f$j) -eq 16384 ] || bad=$((bad+1)); j=$((j+1)); done; echo $n $bad`
		code, out := run(t, e, id, "sh", "-c", check)
		var n, bad int
		fmt.Sscan(out, &n, &bad)
		if code != 0 || bad != 0 {
			t.Errorf("snapshot %d: %d of the last %d logged files are missing or not whole (%q)", i, bad, n, out)
		}
		if n == 0 {
			t.Errorf("snapshot %d caught no writes: %q", i, out)
		}
		t.Logf("snapshot %d: %d files logged, frozen %v", i, n, snap.Frozen)
		must(t, e.Remove(ctx, id))
	}
}

// TestSnapshotCorrupted damages a stored layer: restore refuses with a
// sentence that says what to do, and leaves no session behind.
func TestSnapshotCorrupted(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	prepare(t, e, s.ID)
	snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{})
	must(t, err)
	blob := filepath.Join(e.StateDir, "snapshots", "blobs", "sha256", strings.TrimPrefix(snap.Layers[1].Digest, "sha256:"))
	data, err := os.ReadFile(blob)
	must(t, err)
	i := bytes.Index(data, []byte("changed"))
	data[i] = 'C'
	must(t, os.WriteFile(blob, data, 0o600))
	before, _ := e.List(ctx)
	_, err = e.Restore(ctx, snap.ID, api.RestoreRequest{})
	if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "airlock snapshot rm") {
		t.Errorf("restore of a damaged snapshot: %v", err)
	}
	if after, _ := e.List(ctx); len(after) != len(before) {
		t.Errorf("a failed restore left a session: %d sessions, %d before", len(after), len(before))
	}
	must(t, os.Remove(blob))
	if _, err := e.Restore(ctx, snap.ID, api.RestoreRequest{}); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("restore with a missing layer: %v", err)
	}
}

// TestSnapshotExportImport exports a snapshot with its image, checks that
// Docker and go-containerregistry read the tar, then imports it where the
// image is gone: the import loads the image, and the restore works.
func TestSnapshotExportImport(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	d := e.Docker
	// An image of its own, to delete.
	c, err := d.ContainerCreate(ctx, &container.Config{Image: enginetest.Image, Cmd: []string{"sh", "-c", "echo base > /base-marker"}}, nil, nil, nil, "")
	must(t, err)
	must(t, d.ContainerStart(ctx, c.ID, container.StartOptions{}))
	wait, errc := d.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-wait:
	case err := <-errc:
		t.Fatal(err)
	}
	tag := "airlock-test/snapbase:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	committed, err := d.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: tag})
	must(t, err)
	d.ContainerRemove(ctx, c.ID, container.RemoveOptions{})
	t.Cleanup(func() {
		enginetest.RemoveAll(t, e) // its sessions use the image
		d.ImageRemove(ctx, tag, image.RemoveOptions{Force: true})
		d.ImageRemove(ctx, committed.ID, image.RemoveOptions{Force: true})
	})

	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p, Image: tag})
	must(t, err)
	prepare(t, e, s.ID)
	snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{Name: "exported"})
	must(t, err)

	x, err := e.PrepareExport(ctx, snap.ID, true)
	must(t, err)
	path := filepath.Join(t.TempDir(), "snap.tar")
	f, err := os.Create(path)
	must(t, err)
	must(t, x.Write(f))
	f.Close()

	// Another reader: go-containerregistry's.
	img, err := tarball.ImageFromPath(path, nil)
	must(t, err)
	layers, err := img.Layers()
	must(t, err)
	cfg, err := img.ConfigFile()
	must(t, err)
	if len(layers) != len(cfg.RootFS.DiffIDs) || cfg.Config.Labels["dev.airlock.snapshot"] == "" {
		t.Errorf("the tar as an image: %d layers, config %+v", len(layers), cfg.RootFS)
	}
	// Docker runs it: the base, the container's changes and the workspace.
	tf, _ := os.Open(path)
	resp, err := d.ImageLoad(ctx, tf)
	must(t, err)
	var loaded bytes.Buffer
	io.Copy(&loaded, resp.Body)
	resp.Body.Close()
	tf.Close()
	ref := "airlock-snapshot:exported"
	t.Cleanup(func() { d.ImageRemove(ctx, ref, image.RemoveOptions{Force: true}) })
	out := dockerRun(t, d, ref, "sh", "-c", "cat /base-marker /opt/tool/VERSION /home/airlock/.state /workspace/src/new.c; test -e /etc/group || echo no-group")
	if out != "base\nv1\nconversation\nnew\nno-group\n" {
		t.Errorf("docker run of the exported image printed %q (load: %s)", out, loaded.String())
	}

	// Gone from here: the session, the snapshot, the image.
	must(t, e.Remove(ctx, s.ID))
	must(t, e.RemoveSnapshot(ctx, snap.ID))
	if _, err := d.ImageRemove(ctx, committed.ID, image.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	in, _ := os.Open(path)
	defer in.Close()
	imp, warnings, err := e.Import(ctx, in)
	must(t, err)
	if imp.Name != "exported" || len(warnings) != 1 || !strings.Contains(warnings[0], "loaded") {
		t.Errorf("import: %+v %v", imp, warnings)
	}
	if _, err := d.ImageInspect(ctx, tag); err != nil {
		t.Errorf("the import did not give the image its name back: %v", err)
	}
	r, err := e.Restore(ctx, imp.ID, api.RestoreRequest{})
	must(t, err)
	carried(t, e, r.Sessions[0].ID)
	if code, out := run(t, e, r.Sessions[0].ID, "cat", "/base-marker"); code != 0 || out != "base\n" {
		t.Errorf("the restored session is not on the loaded image: %q", out)
	}

	// Bad archives.
	for name, data := range map[string][]byte{
		"not a tar": []byte("hello"),
		"cut short": mustRead(t, path)[:200000],
	} {
		if _, _, err := e.Import(ctx, bytes.NewReader(data)); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "export") {
			t.Errorf("import of %s: %v", name, err)
		}
	}
	// The image kept for exports goes with the last snapshot on it.
	must(t, e.RemoveSnapshot(ctx, imp.ID))
	if left, _ := os.ReadDir(filepath.Join(e.StateDir, "snapshots", "blobs", "sha256")); len(left) != 0 {
		t.Errorf("with no snapshot left the store holds %d blobs", len(left))
	}
	var meta map[string]any
	json.Unmarshal([]byte(cfg.Config.Labels["dev.airlock.snapshot"]), &meta)
	if meta["id"] != snap.ID {
		t.Errorf("the label names snapshot %v", meta["id"])
	}
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

// dockerRun is `docker run --rm IMAGE ARGV...`, returning the output.
func dockerRun(t *testing.T, d *client.Client, ref string, argv ...string) string {
	t.Helper()
	ctx := context.Background()
	c, err := d.ContainerCreate(ctx, &container.Config{Image: ref, Cmd: argv, Entrypoint: []string{}}, nil, nil, nil, "")
	must(t, err)
	defer d.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	must(t, d.ContainerStart(ctx, c.ID, container.StartOptions{}))
	wait, errc := d.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-wait:
	case err := <-errc:
		t.Fatal(err)
	}
	logs, err := d.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	must(t, err)
	defer logs.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, logs)
	return out.String()
}
