// Package enginetest sets up what the integration tests need: the real
// Docker daemon, root for mounts, the tiny test image and an engine with
// its own state directory. Prerequisites that are missing skip the test
// with the reason, unless AIRLOCK_REQUIRE_INTEGRATION=1 (as `make test`
// sets), where they fail it so CI never passes by skipping.
package enginetest

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/harness/mockmodel"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// Image is the tiny image integration tests run in.
const Image = images.TinyName

// Require skips (or, in CI, fails) the test unless integration tests can
// run here: not -short, root, a Docker daemon answering.
func Require(t testing.TB) *client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	missing := func(why string) {
		t.Helper()
		if os.Getenv("AIRLOCK_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("integration prerequisites missing: %s (run `make test`, which sets them up)", why)
		}
		t.Skipf("integration test skipped: %s (run `make test` as root to set them up)", why)
	}
	if os.Geteuid() != 0 {
		missing("needs root to mount overlays")
	}
	d, err := engine.NewDocker()
	if err != nil {
		missing("no Docker client: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Ping(ctx); err != nil {
		missing("Docker is not running: " + err.Error())
	}
	return d
}

var tinyOnce sync.Mutex

// TinyImage builds (or finds) the busybox test image.
func TinyImage(t testing.TB, d *client.Client) {
	t.Helper()
	tinyOnce.Lock()
	defer tinyOnce.Unlock()
	b := &images.Builder{Docker: d, Scratch: t.TempDir()}
	if _, err := b.Build(context.Background(), api.ImageBuildRequest{Kind: "tiny"}, nil); err != nil {
		t.Fatalf("build the tiny image: %v", err)
	}
}

// Engine is a running engine with its store and state directory.
type Engine struct {
	*engine.Engine
	Store    *store.Store
	StateDir string
	Docker   *client.Client
}

// Start returns an engine whose sessions are removed when the test ends.
func Start(t testing.TB, opts ...func(*engine.Options)) *Engine {
	t.Helper()
	d := Require(t)
	TinyImage(t, d)
	dir := t.TempDir()
	e := Reopen(t, d, dir, opts...)
	t.Cleanup(func() { RemoveAll(t, e) })
	return e
}

// Reopen starts an engine over an existing state directory, as a daemon
// restart does.
func Reopen(t testing.TB, d *client.Client, dir string, opts ...func(*engine.Options)) *Engine {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := engine.Options{StateDir: dir, Defaults: engine.Defaults{
		Image: Image, Limits: api.Limits{WorkspaceSize: 64 << 20, Memory: 256 << 20},
	}}
	for _, f := range opts {
		f(&o)
	}
	eng, err := engine.New(ctx, d, st, o)
	if err != nil {
		t.Fatal(err)
	}
	return &Engine{Engine: eng, Store: st, StateDir: dir, Docker: d}
}

// RemoveAll removes every session of e (unmounting before the test's
// temporary directories go).
func RemoveAll(t testing.TB, e *Engine) {
	ctx := context.Background()
	list, _ := e.List(ctx)
	for _, s := range list {
		if err := e.Remove(ctx, s.ID); err != nil {
			t.Errorf("remove session %s: %v", s.ID, err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e.Close(cctx)
}

var agentsOnce sync.Mutex

// AgentsImage builds (or finds) the image with the real agent CLIs,
// airlock/agents, over airlock/base. Package downloads are cached across
// runs under the system's temporary directory.
func AgentsImage(t testing.TB, d *client.Client) string {
	t.Helper()
	agentsOnce.Lock()
	defer agentsOnce.Unlock()
	scratch := filepath.Join(os.TempDir(), "airlock-test-build")
	b := &images.Builder{Docker: d, Scratch: scratch}
	start := time.Now()
	img, err := b.Build(context.Background(), api.ImageBuildRequest{Kind: "agents", Agents: []string{"claude", "codex", "opencode"}}, nil)
	if err != nil {
		t.Fatalf("build the agents image: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Logf("built %s in %s", img.Name, d.Round(time.Second))
	}
	return img.Name
}

// Model starts a scripted mock model server that sessions reach on the
// Docker bridge's gateway address, and returns it with its base URL.
func Model(t testing.TB, d *client.Client, script ...mockmodel.Reply) (*mockmodel.Server, string) {
	t.Helper()
	nw, err := d.NetworkInspect(context.Background(), "bridge", network.InspectOptions{})
	if err != nil || len(nw.IPAM.Config) == 0 {
		t.Fatalf("find the Docker bridge's gateway: %v", err)
	}
	gw := nw.IPAM.Config[0].Gateway
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatalf("listen on the bridge gateway %s: %v", gw, err)
	}
	m := mockmodel.New(script...)
	srv := &http.Server{Handler: m}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return m, "http://" + l.Addr().String()
}
