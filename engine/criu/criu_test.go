package criu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/checkpoint"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"
)

type fakeDocker struct {
	info     system.Info
	started  []container.StartOptions
	creates  []checkpoint.CreateOptions
	startErr error
}

func (f *fakeDocker) Info(context.Context) (system.Info, error) { return f.info, nil }
func (f *fakeDocker) CheckpointCreate(_ context.Context, _ string, o checkpoint.CreateOptions) error {
	f.creates = append(f.creates, o)
	// As runc does: the images in a directory named for the checkpoint.
	dir := filepath.Join(o.CheckpointDir, o.CheckpointID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "inventory.img"), []byte("inventory"), 0o600)
}
func (f *fakeDocker) ContainerStart(_ context.Context, _ string, o container.StartOptions) error {
	f.started = append(f.started, o)
	return f.startErr
}

// tool puts an executable name in a PATH of the test's own that holds
// nothing else, answering with code.
func tool(t *testing.T, name string, code int) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\necho 'said on stdout'\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Each thing the host lacks is refused, as unavailable, with what to do.
func TestCheckRefuses(t *testing.T) {
	ctx := context.Background()
	good := tool(t, "criu", 0)
	initDir := t.TempDir()
	realInit := filepath.Join(initDir, "tini-static")
	if err := os.WriteFile(realInit, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(initDir, "docker-init")
	if err := os.Symlink("tini-static", link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		path string
		info system.Info
		want string // "" for no refusal
	}{
		{"not experimental", good, system.Info{InitBinary: realInit}, `"experimental": true`},
		{"no criu", t.TempDir(), system.Info{ExperimentalBuild: true, InitBinary: realInit}, "CRIU 4.1 or newer"},
		{"criu check fails", tool(t, "criu", 1), system.Info{ExperimentalBuild: true, InitBinary: realInit}, "`criu check` fails (said on stdout)"},
		{"symlinked init", good, system.Info{ExperimentalBuild: true, InitBinary: link}, `"init-path": "` + realInit + `"`},
		{"all there", good, system.Info{ExperimentalBuild: true, InitBinary: realInit}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PATH", c.path)
			err := Check(ctx, &fakeDocker{info: c.info})
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want unavailable saying %s", err, c.want)
			}
		})
	}
}

// A checkpoint lands in the session's directory, and a restore copies
// it into the new container's own checkpoint directory under Docker's
// data root before starting the container from it.
func TestCheckpointThenRestore(t *testing.T) {
	ctx := context.Background()
	session, root := t.TempDir(), t.TempDir()
	d := &fakeDocker{info: system.Info{DockerRootDir: root}}
	if Kept(session) {
		t.Fatal("kept before any checkpoint")
	}
	if err := Checkpoint(ctx, d, session, "old"); err != nil {
		t.Fatal(err)
	}
	if o := d.creates[0]; !o.Exit || o.CheckpointDir != Dir(session) || o.CheckpointID != name {
		t.Errorf("checkpoint asked as %+v", o)
	}
	if !Kept(session) {
		t.Fatal("not kept after a checkpoint")
	}
	if err := Restore(ctx, d, session, "new"); err == nil {
		t.Fatal("restored into a container Docker's data root does not have")
	}
	if len(d.started) != 0 {
		t.Fatalf("started %+v", d.started)
	}
	if err := os.MkdirAll(filepath.Join(root, "containers", "new"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Restore(ctx, d, session, "new"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "containers", "new", "checkpoints", name, "inventory.img")); err != nil || string(b) != "inventory" {
		t.Errorf("images in Docker's directory: %q, %v", b, err)
	}
	if len(d.started) != 1 || d.started[0].CheckpointID != name || d.started[0].CheckpointDir != "" {
		t.Errorf("started with %+v: want the checkpoint by name, no directory (Docker 20.10 refuses one)", d.started)
	}
}

// A failed checkpoint says what CRIU's log says went wrong.
func TestCheckpointSaysWhy(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "criu-dump.log")
	lines := "(00.04) Error (criu/util.c:1533): rlimit: Can't setup RLIMIT_NOFILE for self: Operation not permitted\n" +
		"(00.08) Error (criu/sk-inet.c:191): inet: Connected TCP socket, consider using --tcp-established option.\n" +
		"(00.08) Error (criu/cr-dump.c:1681): Dump files (pid: 13978) failed with -1\n" +
		"(00.13) Error (criu/cr-dump.c:2111): Dumping FAILED.\n"
	if err := os.WriteFile(log, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &failingDocker{err: errors.New("Cannot checkpoint container x: runc did not terminate successfully: exit status 1: criu failed: type NOTIFY errno 0 path= " + log + ": unknown")}
	err := Checkpoint(context.Background(), d, t.TempDir(), "x")
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "CRIU said: Error (criu/sk-inet.c:191): inet: Connected TCP socket") ||
		strings.Contains(err.Error(), "rlimit") || !strings.Contains(err.Error(), "hibernate without keeping processes") {
		t.Fatalf("a failed checkpoint: %v", err)
	}
}

type failingDocker struct {
	fakeDocker
	err error
}

func (f *failingDocker) CheckpointCreate(context.Context, string, checkpoint.CreateOptions) error {
	return f.err
}
