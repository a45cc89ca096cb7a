// Package enginetest sets up what the integration tests need: the real
// Docker daemon, root for mounts, the tiny test image and an engine with
// its own state directory. Prerequisites that are missing skip the test
// with the reason, unless AIRLOCK_REQUIRE_INTEGRATION=1 (as `make test`
// sets), where they fail it so CI never passes by skipping.
package enginetest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/harness/mockmodel"
	"github.com/airlock/airlock/secretscan"
	"github.com/airlock/airlock/testenv"
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
	return Prerequisites(t)
}

// Prerequisites is Require without the -short skip, for the light
// versions of integration suites that still run under -short.
func Prerequisites(t testing.TB) *client.Client {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root to mount overlays")
	}
	d, err := engine.NewDocker()
	if err != nil {
		Missing(t, "no Docker client: "+err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Ping(ctx); err != nil {
		Missing(t, "Docker is not running: "+err.Error())
	}
	return d
}

// Missing skips the test for want of a prerequisite, or fails it under
// AIRLOCK_REQUIRE_INTEGRATION=1, so CI never passes by skipping.
func Missing(t testing.TB, why string) {
	t.Helper()
	testenv.Missing(t, why)
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
	if o.Defaults.WarmPool == 0 {
		o.Defaults.WarmPool = WarmPool(t)
	}
	for _, f := range opts {
		f(&o)
	}
	if o.InitPath == "" {
		o.InitPath = SessionInit(t)
	}
	if o.Secrets == nil {
		o.Secrets = secretscan.NewProcess(secretscan.ProcessOptions{Path: SecretScanner(t)})
	}
	if o.Defaults.CABundle == "" { // the engine trusts the mock model
		o.Defaults.CABundle = filepath.Join(dir, "model-ca.pem")
		if err := os.WriteFile(o.Defaults.CABundle, ModelCA(), 0o644); err != nil {
			t.Fatal(err)
		}
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
	// Close discards the warm pool's entries, each a container and a
	// mounted workspace under the test's directory: given up early (5 s
	// was not enough on a loaded machine), it leaves a mount the test's
	// TempDir cleanup cannot remove ("device or resource busy").
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	e.Close(cctx)
}

// WarmPool is the warm pool size of the tests' engines: $AIRLOCK_TEST_POOL
// (0: no pool, as make test runs the engine's suite a second time), else
// the engine's default. As engine.Defaults.WarmPool: negative is none.
func WarmPool(t testing.TB) int {
	t.Helper()
	v := os.Getenv("AIRLOCK_TEST_POOL")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("AIRLOCK_TEST_POOL=%q: give a number of warm containers, 0 for none", v)
	}
	if n == 0 {
		return -1
	}
	return n
}

// SessionInit is the sessions' init (engine/fastexec) the tests' engines
// bind into their containers, as the installed engine finds it beside
// itself: $AIRLOCK_TEST_INIT ("none": no init, every command through
// docker exec, as make test runs the engine's suite a second time), else
// built once per test binary.
func SessionInit(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AIRLOCK_TEST_INIT"); p != "" {
		return p
	}
	p, err := builtInit()
	if err != nil {
		t.Fatalf("build the sessions' init: %v", err)
	}
	return p
}

// SecretScanner is the secret scanner (cmd/airlock-scan) the tests'
// engines run as a child, as the installed engine does: built once per
// test binary.
func SecretScanner(t testing.TB) string {
	t.Helper()
	p, err := builtScan()
	if err != nil {
		t.Fatalf("build the secret scanner: %v", err)
	}
	return p
}

// CLI is the airlock CLI (cmd/airlock), for tests that serve and drive
// an engine as a user does: built once per test binary.
func CLI(t testing.TB) string {
	t.Helper()
	p, err := builtCLI()
	if err != nil {
		t.Fatalf("build the CLI: %v", err)
	}
	return p
}

var (
	builtCLI  = sync.OnceValues(func() (string, error) { return build("./cmd/airlock", "airlock") })
	builtInit = sync.OnceValues(func() (string, error) { return build("./engine/fastexec/init", "airlock-init", "CGO_ENABLED=0") })
	builtScan = sync.OnceValues(func() (string, error) { return build("./cmd/airlock-scan", "airlock-scan") })
)

// build builds the module's package pkg into a temporary directory as
// name, with env added to the environment.
func build(pkg, name string, env ...string) (string, error) {
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "airlock-test-"+name+"-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v: %s", err, b)
	}
	return out, nil
}

var agentsOnce sync.Mutex

// AgentsImage builds (or finds) the image with the real agent CLIs,
// airlock/agents, over airlock/base. Package downloads are cached across
// runs under the system's temporary directory.
func AgentsImage(t testing.TB, d *client.Client) string {
	t.Helper()
	return buildImage(t, d, api.ImageBuildRequest{Kind: "agents", Agents: []string{"claude", "codex", "opencode"}})
}

// BaseImage builds (or finds) airlock/base: Debian with git, node and
// python, what a real project's session runs on.
func BaseImage(t testing.TB, d *client.Client) string {
	t.Helper()
	return buildImage(t, d, api.ImageBuildRequest{Kind: "base"})
}

func buildImage(t testing.TB, d *client.Client, req api.ImageBuildRequest) string {
	t.Helper()
	agentsOnce.Lock()
	defer agentsOnce.Unlock()
	scratch := filepath.Join(os.TempDir(), "airlock-test-build")
	// Test binaries of several packages run at once under make test:
	// one builds, the others wait and find the image it tagged.
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(scratch, "agents.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	b := &images.Builder{Docker: d, Scratch: scratch}
	start := time.Now()
	img, err := b.Build(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("build the %s image: %v", req.Kind, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Logf("built %s in %s", img.Name, d.Round(time.Second))
	}
	return img.Name
}

// Model starts a scripted mock model server that sessions reach on the
// Docker bridge's gateway address, and returns it with its base URL. It
// speaks HTTPS, as a provider does (Airlock adds API keys only over TLS),
// with a certificate from ModelCA, which engines from Start and Reopen
// trust upstream; a daemon a test starts trusts it with ModelConfig.
func Model(t testing.TB, d *client.Client, script ...mockmodel.Reply) (*mockmodel.Server, string) {
	t.Helper()
	nw, err := d.NetworkInspect(context.Background(), "bridge", network.InspectOptions{})
	if err != nil || len(nw.IPAM.Config) == 0 {
		t.Fatalf("find the Docker bridge's gateway: %v", err)
	}
	gw := nw.IPAM.Config[0].Gateway
	if gw == "" { // newer Engines leave it out: the subnet's first address
		pfx, err := netip.ParsePrefix(nw.IPAM.Config[0].Subnet)
		if err != nil {
			t.Fatalf("the Docker bridge has neither a gateway nor a subnet: %+v", nw.IPAM.Config[0])
		}
		gw = pfx.Masked().Addr().Next().String()
	}
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	if err != nil {
		t.Fatalf("listen on the bridge gateway %s: %v", gw, err)
	}
	ca, err := modelCA()
	if err != nil {
		t.Fatalf("make the mock model's CA: %v", err)
	}
	m := mockmodel.New(script...)
	srv, base, err := m.ServeTLS(l, ca)
	if err != nil {
		t.Fatalf("serve the mock model over TLS: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return m, base
}

// modelCA signs the mock model's certificates; one per test process.
var modelCA = sync.OnceValues(mockmodel.NewCA)

// ModelCA is the PEM of the CA that signs Model's certificates.
func ModelCA() []byte {
	ca, err := modelCA()
	if err != nil {
		panic(err)
	}
	return ca.PEM()
}

// ModelConfig writes an engine config file (for AIRLOCK_CONFIG) whose
// ca_bundle trusts ModelCA.
func ModelConfig(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	bundle := filepath.Join(dir, "model-ca.pem")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(bundle, ModelCA(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("ca_bundle: "+bundle+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}
