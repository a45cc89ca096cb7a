package enginetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/airlock/airlock/engine"
)

// Podman starts Podman's Docker-compatible service of the test's own
// (scripts/podman.sh run: its own storage, mount and network namespaces)
// and an engine over it, reaching it through DOCKER_HOST as a user's
// engine would. The engine's state directory is a shared mount, so that
// the workspaces the engine mounts there reach the service's mount
// namespace. Sessions are removed and the service stopped when the test
// ends.
func Podman(t *testing.T, opts ...func(*engine.Options)) *Engine {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		Missing(t, "needs root to mount overlays and run podman")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		Missing(t, "podman is not installed (run `scripts/podman.sh install`)")
	}
	script := filepath.Join(repoRoot(t), "scripts", "podman.sh")
	state := sharedDir(t)
	svc := t.TempDir()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(svc, "podman.sock"))
	d, err := engine.NewDocker()
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, "podman's service", exec.Command(script, "run", svc), d)
	TinyImage(t, d)
	e := Reopen(t, d, state, opts...)
	t.Cleanup(func() { RemoveAll(t, e) })
	return e
}

// sharedDir is a temporary directory bind-mounted on itself as a shared
// mount: what is mounted below it later propagates to mount namespaces
// made as its slaves.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s shared: %v", dir, err)
	}
	return dir
}

// repoRoot is the directory of go.mod above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
