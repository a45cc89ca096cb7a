package engine_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/airlock/airlock/snapshot"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestMain lets the test binary be the layer applier a restore starts
// (snapshot.ApplyLayer re-executes the binary, chrooted).
func TestMain(m *testing.M) {
	if snapshot.Init() {
		return
	}
	os.Exit(m.Run())
}

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
	// Their workspaces and container layers are copies of the layer
	// cache's: a write in place in one reaches neither another nor the
	// cache.
	run(t, e2, f.Sessions[0].ID, "sh", "-c", "echo only-here > mine.txt && echo v2 > /opt/tool/VERSION && printf X | dd of=README.md conv=notrunc 2>/dev/null")
	if code, out := run(t, e2, f.Sessions[1].ID, "sh", "-c", "cat mine.txt 2>&1; cat README.md /opt/tool/VERSION"); !strings.Contains(out, "No such file") || !strings.HasSuffix(out, "# demo\nchanged\nv1\n") || code != 0 {
		t.Errorf("a fork sees another's writes: %q", out)
	}
	if code, out := run(t, e2, f.Sessions[0].ID, "sh", "-c", "head -c 3 README.md"); code != 0 || out != "X d" {
		t.Errorf("the write in place did not happen: %q", out)
	}
	cache := filepath.Join(e2.StateDir, "layer-cache")
	ws := filepath.Join(cache, "workspace-"+strings.Replace(snap.Layers[1].Digest, ":", "-", 1))
	if b, err := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != "# demo\nchanged\n" {
		t.Errorf("the layer cache's README.md: %q %v", b, err)
	}
	ct := filepath.Join(cache, "container-"+strings.Replace(snap.Layers[0].Digest, ":", "-", 1))
	if b, err := os.ReadFile(filepath.Join(ct, "opt/tool/VERSION")); string(b) != "v1\n" {
		t.Errorf("the layer cache's /opt/tool/VERSION: %q %v", b, err)
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
	if _, err := os.Stat(ws); err != nil {
		t.Errorf("removing one snapshot dropped the cached layer another shares: %v", err)
	}
	if _, err := e2.Restore(ctx, snap2.ID, api.RestoreRequest{}); err != nil {
		t.Errorf("removing one snapshot broke another that shares its layer: %v", err)
	}
	if _, err := e2.Restore(ctx, snap2.ID, api.RestoreRequest{N: 101}); !errdefs.IsInvalid(err) {
		t.Errorf("fork of 101: %v", err)
	}
	must(t, e2.RemoveSnapshot(ctx, snap2.ID))
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("the layer cache keeps %d entries once no snapshot uses them", len(ents))
	}
	if _, err := e2.Restore(ctx, "after-setup", api.RestoreRequest{}); !errdefs.IsNotFound(err) {
		t.Errorf("restore of a removed snapshot: %v", err)
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

	// Gone from here: the session, the snapshot, the image (and the
	// warm containers made on it, which hold it as sessions do).
	must(t, e.Remove(ctx, s.ID))
	must(t, e.RemoveSnapshot(ctx, snap.ID))
	drainWarm(t, e)
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
	// Loaded by content, under no name: an archive's names could take one
	// of the user's (say airlock/base, which every new session runs on).
	if _, err := d.ImageInspect(ctx, tag); err == nil {
		t.Errorf("the import gave the loaded image the archive's name %s", tag)
	}
	if imp.ImageID != committed.ID || imp.Spec.Project != "" {
		t.Errorf("imported: image %s (want %s), spec %+v", imp.ImageID, committed.ID, imp.Spec)
	}
	r, err := e.Restore(ctx, imp.ID, api.RestoreRequest{Project: p})
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
	if spec, _ := json.Marshal(meta["spec"]); meta["project"] != "" || strings.Contains(string(spec), p) {
		t.Errorf("the exported label carries the session's settings: %s", cfg.Config.Labels["dev.airlock.snapshot"])
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

// lent is one entry of a crafted layer.
type lent struct {
	name, link string
	typ        byte
	mode       int64
	data       string
	pax        map[string]string
	major      int64
}

func layerTar(t *testing.T, entries ...lent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.data)), PAXRecords: e.pax, Devmajor: e.major, Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		must(t, tw.WriteHeader(h))
		io.WriteString(tw, e.data)
	}
	must(t, tw.Close())
	return buf.Bytes()
}

// blob is one file of a crafted archive: its bytes, or a generator for
// those too large to hold.
type blob struct {
	data []byte
	gen  func(w io.Writer) error
	sum  *[2]string // digest and size of a generated blob, once computed
}

func (b blob) digest(t *testing.T) (string, int64) {
	if b.gen != nil && b.sum != nil && b.sum[0] != "" {
		n, _ := strconv.ParseInt(b.sum[1], 10, 64)
		return b.sum[0], n
	}
	h := sha256.New()
	n, err := b.copyTo(h)
	must(t, err)
	d := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if b.sum != nil {
		*b.sum = [2]string{d, strconv.FormatInt(n, 10)}
	}
	return d, n
}

func (b blob) copyTo(w io.Writer) (int64, error) {
	if b.gen == nil {
		n, err := w.Write(b.data)
		return int64(n), err
	}
	cw := &counting{w: w}
	err := b.gen(cw)
	return cw.n, err
}

type counting struct {
	w io.Writer
	n int64
}

func (c *counting) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// crafted is an OCI image layout tar made by hand, as someone handing a
// user a snapshot archive could make it.
type crafted struct {
	label                map[string]any
	container, workspace blob
	// edits, applied in this order before the archive is written
	config   func(cfg map[string]any)
	manifest func(m map[string]any, blobs map[string]blob)
	index    func(idx map[string]any)
	extra    map[string]blob // more files in the archive
}

func newCrafted(t *testing.T) *crafted {
	return &crafted{
		label: map[string]any{"id": "0123456789ab", "session": "fedcba987654", "name": "crafted", "image": enginetest.Image,
			"spec": map[string]any{"project": "/", "user": "0:0"}},
		container: blob{data: layerTar(t, lent{name: "opt/", typ: tar.TypeDir, mode: 0o755}, lent{name: "opt/tool", typ: tar.TypeReg, data: "tool\n"},
			lent{name: "home/", typ: tar.TypeDir, mode: 0o755}, lent{name: "home/airlock/", typ: tar.TypeDir, mode: 0o1777},
			lent{name: "home/airlock/.state", typ: tar.TypeReg, data: "state\n"})},
		workspace: blob{data: layerTar(t, lent{name: "workspace/", typ: tar.TypeDir, mode: 0o755}, lent{name: "workspace/new.txt", typ: tar.TypeReg, data: "new\n"})},
	}
}

func (c *crafted) reader(t *testing.T) io.Reader {
	t.Helper()
	blobs := map[string]blob{}
	var layers []any
	var snapLayers []any
	for i, l := range []blob{c.container, c.workspace} {
		d, n := l.digest(t)
		blobs[d] = l
		layers = append(layers, map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d, "size": n})
		snapLayers = append(snapLayers, map[string]any{"what": []string{"container", "workspace"}[i], "digest": d, "size": n})
	}
	label := map[string]any{"layers": snapLayers}
	for k, v := range c.label {
		label[k] = v
	}
	lj, _ := json.Marshal(label)
	cfg := map[string]any{"architecture": "amd64", "os": "linux", "config": map[string]any{"Labels": map[string]string{"dev.airlock.snapshot": string(lj)}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layers[0].(map[string]any)["digest"].(string), layers[1].(map[string]any)["digest"].(string)}}}
	if c.config != nil {
		c.config(cfg)
	}
	cj, _ := json.Marshal(cfg)
	cd, cn := blob{data: cj}.digest(t)
	blobs[cd] = blob{data: cj}
	man := map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cn}, "layers": layers}
	if c.manifest != nil {
		c.manifest(man, blobs)
	}
	mj, _ := json.Marshal(man)
	md, mn := blob{data: mj}.digest(t)
	blobs[md] = blob{data: mj}
	idx := map[string]any{"schemaVersion": 2, "manifests": []any{map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": mn,
		"annotations": map[string]string{"dev.airlock.snapshot.id": "0123456789ab"}}}}
	if c.index != nil {
		c.index(idx)
	}
	ij, _ := json.Marshal(idx)
	files := []struct {
		name string
		b    blob
	}{{"oci-layout", blob{data: []byte(`{"imageLayoutVersion":"1.0.0"}`)}}, {"index.json", blob{data: ij}}}
	for d, b := range blobs {
		files = append(files, struct {
			name string
			b    blob
		}{"blobs/sha256/" + strings.TrimPrefix(d, "sha256:"), b})
	}
	for n, b := range c.extra {
		files = append(files, struct {
			name string
			b    blob
		}{n, b})
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for _, f := range files {
			_, n := f.b.digest(t)
			if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: n}); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := f.b.copyTo(tw); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	return pr
}

// bombLayer is a workspace layer of n empty files.
func bombLayer(n int) blob {
	return blob{sum: new([2]string), gen: func(w io.Writer) error {
		tw := tar.NewWriter(w)
		if err := tw.WriteHeader(&tar.Header{Name: "workspace/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
		for i := range n {
			if err := tw.WriteHeader(&tar.Header{Name: "workspace/" + strconv.Itoa(i), Typeflag: tar.TypeReg, Mode: 0o644, Format: tar.FormatUSTAR}); err != nil {
				return err
			}
		}
		return tw.Close()
	}}
}

func storeBlobs(t *testing.T, e *enginetest.Engine) int {
	ents, _ := os.ReadDir(filepath.Join(e.StateDir, "snapshots", "blobs", "sha256"))
	return len(ents)
}

// TestSnapshotImportRefusesCraftedArchives imports archives made to hurt
// the host or the engine: each is refused with a classed error that says
// what to do, and leaves nothing behind.
func TestSnapshotImportRefusesCraftedArchives(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	outside := t.TempDir()
	big := strings.Repeat("x", 5<<20)
	cases := []struct {
		name  string
		edit  func(c *crafted)
		class errdefs.Class
		says  string
	}{
		{"writes through a symlink it made", func(c *crafted) {
			c.workspace = blob{data: layerTar(t, lent{name: "workspace/", typ: tar.TypeDir, mode: 0o755}, lent{name: "workspace/d/", typ: tar.TypeDir, mode: 0o755},
				lent{name: "workspace/d", typ: tar.TypeSymlink, link: outside}, lent{name: "workspace/d/pwned", typ: tar.TypeReg, data: "x"})}
		}, errdefs.Invalid, "symlink"},
		{"a device node", func(c *crafted) {
			c.container = blob{data: layerTar(t, lent{name: "opt/", typ: tar.TypeDir, mode: 0o755}, lent{name: "opt/sda", typ: tar.TypeBlock, major: 8})}
		}, errdefs.Invalid, "device"},
		{"a whiteout of ..", func(c *crafted) {
			c.workspace = blob{data: layerTar(t, lent{name: "workspace/", typ: tar.TypeDir, mode: 0o755}, lent{name: "workspace/.wh...", typ: tar.TypeReg})}
		}, errdefs.Invalid, "whiteout"},
		{"a trusted xattr", func(c *crafted) {
			c.container = blob{data: layerTar(t, lent{name: "f", typ: tar.TypeReg, data: "x", pax: map[string]string{"SCHILY.xattr.trusted.overlay.redirect": "/etc"}})}
		}, errdefs.Invalid, "extended attribute"},
		{"an absolute name", func(c *crafted) {
			c.container = blob{data: layerTar(t, lent{name: "/etc/cron.d/x", typ: tar.TypeReg, data: "x"})}
		}, errdefs.Invalid, "absolute"},
		{"a tar bomb of tiny files", func(c *crafted) { c.workspace = bombLayer(1_000_001) }, errdefs.Invalid, "entries"},
		{"a blob that is not what its name says", func(c *crafted) {
			c.manifest = func(m map[string]any, blobs map[string]blob) {
				d := m["layers"].([]any)[1].(map[string]any)["digest"].(string)
				blobs[d] = blob{data: append(append([]byte{}, blobs[d].data...), 0)}
			}
		}, errdefs.Invalid, "export"},
		{"a manifest naming a layer the archive lacks", func(c *crafted) {
			c.manifest = func(m map[string]any, blobs map[string]blob) {
				m["layers"].([]any)[0].(map[string]any)["digest"] = "sha256:" + strings.Repeat("ab", 32)
			}
		}, errdefs.Invalid, "export"},
		{"a descriptor whose size lies", func(c *crafted) {
			c.manifest = func(m map[string]any, _ map[string]blob) { m["layers"].([]any)[1].(map[string]any)["size"] = 1 }
		}, errdefs.Invalid, "export"},
		{"a digest that is not sha256", func(c *crafted) {
			c.index = func(idx map[string]any) {
				idx["manifests"].([]any)[0].(map[string]any)["digest"] = "sha256:../../../etc/passwd"
			}
		}, errdefs.Invalid, "export"},
		{"a huge config", func(c *crafted) {
			c.config = func(cfg map[string]any) { cfg["pad"] = big }
		}, errdefs.Invalid, "MiB"},
		{"a huge index", func(c *crafted) {
			c.index = func(idx map[string]any) { idx["pad"] = big }
		}, errdefs.Invalid, "MiB"},
		{"thousands of blobs", func(c *crafted) {
			c.extra = map[string]blob{}
			for i := range 3000 {
				b := []byte(strconv.Itoa(i))
				sum := sha256.Sum256(b)
				c.extra["blobs/sha256/"+hex.EncodeToString(sum[:])] = blob{data: b}
			}
		}, errdefs.Invalid, "blobs"},
		{"a label that is not a snapshot", func(c *crafted) {
			c.config = func(cfg map[string]any) {
				cfg["config"].(map[string]any)["Labels"] = map[string]string{"dev.airlock.snapshot": `{"layers":"no"}`}
			}
		}, errdefs.Invalid, "export"},
		{"layers other than the label's", func(c *crafted) {
			c.label["layers"] = []any{map[string]any{"what": "workspace", "digest": "sha256:" + strings.Repeat("cd", 32)}}
		}, errdefs.Invalid, "export"},
		{"a config claiming another session's id", func(c *crafted) { c.label["session"] = s.ID }, errdefs.Conflict, s.ID},
	}
	before, _ := e.Snapshots(ctx)
	blobsBefore := storeBlobs(t, e)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCrafted(t)
			tc.edit(c)
			t0 := time.Now()
			snap, _, err := e.Import(ctx, c.reader(t))
			if errdefs.ClassOf(err) != tc.class || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("import: %v (class %s), want class %s saying %q", err, errdefs.ClassOf(err), tc.class, tc.says)
			}
			if err == nil {
				// What a restore of it would do.
				if r, err := e.Restore(ctx, snap.ID, api.RestoreRequest{Project: project(t), Image: enginetest.Image}); err == nil {
					for _, x := range r.Sessions {
						e.Remove(ctx, x.ID)
					}
				}
				e.RemoveSnapshot(ctx, snap.ID)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("something was written outside: %v", ents)
			}
			if after, _ := e.Snapshots(ctx); len(after) != len(before) {
				t.Errorf("%d snapshots after a refused import, %d before", len(after), len(before))
			}
			if n := storeBlobs(t, e); n != blobsBefore {
				t.Errorf("%d blobs in the store after a refused import, %d before", n, blobsBefore)
			}
			t.Logf("refused in %v", time.Since(t0))
		})
	}
}

// TestSnapshotImportedSettingsNotTrusted: an archive's settings (project,
// user, CA bundle, egress with a stored secret injected to someone else's
// host) are never used; restore takes them from the user.
func TestSnapshotImportedSettingsNotTrusted(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	must(t, e.SetSecret(ctx, "MY_KEY", "sk-very-secret"))
	hostFile := filepath.Join(t.TempDir(), "server.pem")
	must(t, os.WriteFile(hostFile, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\nPRIVATE-KEY-MATERIAL\n"), 0o600))
	victim := project(t)
	c := newCrafted(t)
	c.label["spec"] = map[string]any{"project": victim, "user": "0:0", "ca_bundle": hostFile, "env": []string{"LD_PRELOAD=/tmp/evil.so"},
		"egress": map[string]any{"mode": "custom", "allow": []string{"evil.example.com"}, "inject": []string{"evil.example.com:authorization=Bearer secret:MY_KEY"}},
		"limits": map[string]any{"memory": 1 << 40}, "idle_timeout": -1}
	c.label["project"] = victim
	snap, _, err := e.Import(ctx, c.reader(t))
	must(t, err)
	if snap.Project != "" || snap.Spec.Project != "" || snap.Spec.Egress != nil || snap.Spec.CABundle != "" || len(snap.Spec.Env) != 0 || snap.Spec.User != "" {
		t.Errorf("the imported snapshot keeps the archive's settings: %+v", snap)
	}
	if snap.ID == "0123456789ab" || snap.Session == "fedcba987654" {
		t.Errorf("the imported snapshot keeps the archive's ids: %s of %s", snap.ID, snap.Session)
	}
	if _, err := e.Restore(ctx, snap.ID, api.RestoreRequest{}); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "--project") {
		t.Fatalf("restore of an imported snapshot without a project: %v", err)
	}
	mine := project(t)
	if _, err := e.Restore(ctx, snap.ID, api.RestoreRequest{Project: mine}); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "--image") {
		t.Fatalf("restore of an imported snapshot whose archive carries no image, without one: %v", err)
	}
	r, err := e.Restore(ctx, snap.ID, api.RestoreRequest{Project: mine, Image: enginetest.Image})
	must(t, err)
	got := r.Sessions[0]
	if got.Project != mine || got.User == "0:0" && os.Getuid() != 0 {
		t.Errorf("restored over %s as %s", got.Project, got.User)
	}
	if got.Egress != nil && (len(got.Egress.Inject) != 0 || strings.Contains(strings.Join(got.Egress.Allow, ","), "evil")) {
		t.Errorf("the restored session took the archive's egress policy: %+v", got.Egress)
	}
	if got.Limits.Memory == 1<<40 || got.IdleTimeout < 0 {
		t.Errorf("the restored session took the archive's limits: %+v idle %v", got.Limits, got.IdleTimeout)
	}
	if code, out := run(t, e, got.ID, "sh", "-c", "cat /etc/airlock/ca-bundle.pem; env"); code != 0 || strings.Contains(out, "PRIVATE-KEY-MATERIAL") || strings.Contains(out, "LD_PRELOAD") {
		t.Errorf("the restored session holds what the archive pointed at: exit %d", code)
	}
	if code, out := run(t, e, got.ID, "cat", "new.txt", "/opt/tool", "/home/airlock/.state"); code != 0 || out != "new\ntool\nstate\n" {
		t.Errorf("the restored session lacks the archive's files: %d %q", code, out)
	}
}

// TestSnapshotImportedHomeSymlink: a container layer that turns /home into
// a symlink to a host path cannot make the restore write the agent's home
// there (the engine writes the home from the host side).
func TestSnapshotImportedHomeSymlink(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	// The host directory must hold an "airlock" directory for the write to
	// land: /var/lib is one (the engine's own state).
	hostDir := t.TempDir()
	must(t, os.Mkdir(filepath.Join(hostDir, "airlock"), 0o755))
	c := newCrafted(t)
	c.container = blob{data: layerTar(t, lent{name: "home", typ: tar.TypeSymlink, link: hostDir},
		lent{name: "home/airlock/", typ: tar.TypeDir, mode: 0o755}, lent{name: "home/airlock/pwned", typ: tar.TypeReg, data: "pwned"})}
	snap, _, err := e.Import(ctx, c.reader(t))
	if err == nil {
		_, err = e.Restore(ctx, snap.ID, api.RestoreRequest{Project: project(t), Image: enginetest.Image})
	}
	if err == nil {
		t.Errorf("an archive whose /home is a symlink to %s was imported and restored", hostDir)
	}
	if ents, _ := os.ReadDir(filepath.Join(hostDir, "airlock")); len(ents) != 0 {
		t.Errorf("the restore wrote to the host: %v", ents)
	}
}

// TestSnapshotHomeNotReadThroughSymlink: a session whose image makes /home
// an absolute symlink must not make the snapshot read the host's directory
// of that name (/proc/PID/root/home resolves it against the host's root).
func TestSnapshotHomeNotReadThroughSymlink(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	d := e.Docker
	hostDir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(hostDir, "airlock"), 0o755))
	must(t, os.WriteFile(filepath.Join(hostDir, "airlock", "host-secret"), []byte("HOST-SECRET\n"), 0o600))
	cr, err := d.ContainerCreate(ctx, &container.Config{Image: enginetest.Image, Cmd: []string{"sh", "-c", "rm -rf /home && ln -s " + hostDir + " /home"}}, nil, nil, nil, "")
	must(t, err)
	must(t, d.ContainerStart(ctx, cr.ID, container.StartOptions{}))
	wait, errc := d.ContainerWait(ctx, cr.ID, container.WaitConditionNotRunning)
	select {
	case <-wait:
	case err := <-errc:
		t.Fatal(err)
	}
	tag := "airlock-test/homelink:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err = d.ContainerCommit(ctx, cr.ID, container.CommitOptions{Reference: tag})
	must(t, err)
	d.ContainerRemove(ctx, cr.ID, container.RemoveOptions{})
	t.Cleanup(func() {
		enginetest.RemoveAll(t, e)
		d.ImageRemove(ctx, tag, image.RemoveOptions{Force: true})
	})
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Image: tag})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo agent > $HOME/.state")
	snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{})
	if err == nil {
		for _, l := range snap.Layers {
			data, _ := os.ReadFile(filepath.Join(e.StateDir, "snapshots", "blobs", "sha256", strings.TrimPrefix(l.Digest, "sha256:")))
			if bytes.Contains(data, []byte("HOST-SECRET")) {
				t.Errorf("the %s layer holds a file of the host's %s", l.What, hostDir)
			}
		}
	} else if errdefs.ClassOf(err) == errdefs.Internal {
		t.Errorf("snapshot: %v (want a classed error or a snapshot without the host's files)", err)
	}
	fmt.Fprint(io.Discard, snap)
}
