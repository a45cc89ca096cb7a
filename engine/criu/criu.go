// Package criu keeps a session container's processes across hibernation:
// CRIU, through Docker's checkpoint API, writes them to the session's
// directory as the container stops, and restores them into the new
// container a wake makes instead of starting it afresh. What that takes
// on the host, found on this project's machine (docs/ARCHITECTURE.md,
// "Processes and CRIU"): Docker started with --experimental; CRIU 4.1 or
// newer (3.17 cannot run on kernels from 6.13 on); a Docker init that is
// not a symlink (CRIU 4.1 cannot restore a bind mount of one). Docker
// 20.10 takes a checkpoint directory when it checkpoints but refuses one
// when it restores ("custom checkpointdir is not supported"), so Restore
// copies the images into the new container's own checkpoint directory
// under Docker's data root: the engine and Docker share a host, as they
// do for the workspace mounts. Knows nothing of sessions beyond their
// directory.
package criu

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/checkpoint"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"
)

// Docker is the part of the Docker Engine API this package uses.
type Docker interface {
	Info(ctx context.Context) (system.Info, error)
	CheckpointCreate(ctx context.Context, containerID string, options checkpoint.CreateOptions) error
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
}

// name is the name of a session's process checkpoint.
const name = "hibernate"

// Dir is where a hibernated session's processes are, in its directory:
// Docker writes the checkpoint beneath it.
func Dir(sessionDir string) string { return filepath.Join(sessionDir, "processes") }

// Kept says whether a hibernated session kept its processes.
func Kept(sessionDir string) bool {
	_, err := os.Stat(filepath.Join(Dir(sessionDir), name, "inventory.img"))
	return err == nil
}

// Check says why this host cannot checkpoint a container's processes
// (an Unavailable error that says what to do), or nil.
func Check(ctx context.Context, d Docker) error {
	info, err := d.Info(ctx)
	if err != nil {
		return errdefs.Wrap(errdefs.Unavailable, fmt.Errorf("ask Docker whether it can checkpoint containers: %w", err))
	}
	if !info.ExperimentalBuild {
		return errdefs.Unavailablef(`keeping processes needs Docker's checkpoint API, which only an experimental daemon has: set "experimental": true in /etc/docker/daemon.json and restart Docker, or hibernate without keeping processes`)
	}
	criu, err := exec.LookPath("criu")
	if err != nil {
		return errdefs.Unavailablef("keeping processes needs CRIU 4.1 or newer on the host (`apt-get install criu` on Debian 13; Debian 12's 3.17 does not run on kernels from 6.13 on), or hibernate without keeping processes")
	}
	if out, err := exec.CommandContext(ctx, criu, "check").CombinedOutput(); err != nil {
		return errdefs.Unavailablef("keeping processes needs a CRIU that works on this host, and `criu check` fails (%s): install CRIU 4.1 or newer, or hibernate without keeping processes", lastLine(string(out), err))
	}
	init := info.InitBinary
	if init == "" {
		init = "docker-init"
	}
	if p, err := exec.LookPath(init); err == nil {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			real, _ := filepath.EvalSymlinks(p)
			return errdefs.Unavailablef(`keeping processes needs Docker's init to be a file, not a symlink (CRIU cannot restore a bind mount of %s, a link to %s): set "init-path": %q in /etc/docker/daemon.json and restart Docker`, p, real, real)
		}
	}
	return nil
}

func lastLine(out string, err error) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
}

// Checkpoint writes the processes of a session's container to Dir and
// stops them: the container exits. On failure nothing is left in Dir and
// the processes run on.
func Checkpoint(ctx context.Context, d Docker, sessionDir, containerID string) error {
	dir := Dir(sessionDir)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	err := d.CheckpointCreate(ctx, containerID, checkpoint.CreateOptions{CheckpointID: name, CheckpointDir: dir, Exit: true})
	if err != nil {
		os.RemoveAll(dir)
		why := ""
		if said := dumpErrors(err.Error()); said != "" {
			why = "; CRIU said: " + said
		}
		return errdefs.Wrap(errdefs.Unavailable, fmt.Errorf("CRIU could not checkpoint the session's processes (%w%s): hibernate without keeping processes to stop them instead", err, why))
	}
	return nil
}

// dumpLog finds the log runc names in a failed checkpoint's error.
var dumpLog = regexp.MustCompile(`path= (/\S+/criu-dump\.log)`)

// dumpErrors is what CRIU's log, named in a failed checkpoint's error,
// says went wrong (its last error lines, from the end of the log only),
// or "". The rlimit line is CRIU's own setup, in every log here.
func dumpErrors(msg string) string {
	m := dumpLog.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	f, err := os.Open(m[1])
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 64 << 10
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	} else if fi.Size() > tail {
		f.Seek(fi.Size()-tail, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, tail))
	var errs []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "Error ("); i >= 0 && !strings.Contains(line, "rlimit") && !strings.Contains(line, "FAILED") {
			errs = append(errs, strings.TrimSpace(line[i:]))
		}
	}
	return strings.Join(errs[max(0, len(errs)-3):], "; ")
}

// Restore starts a session's new container (created, not started) from
// the processes in Dir: the images are copied where Docker looks for the
// container's own checkpoints. Dir is left as it is.
func Restore(ctx context.Context, d Docker, sessionDir, containerID string) error {
	info, err := d.Info(ctx)
	if err != nil {
		return fmt.Errorf("find Docker's data root: %w", err)
	}
	own := filepath.Join(info.DockerRootDir, "containers", containerID)
	if _, err := os.Stat(own); err != nil {
		return fmt.Errorf("Docker's data root is not on the engine's host (%w)", err)
	}
	dst := filepath.Join(own, "checkpoints", name)
	os.RemoveAll(dst)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(Dir(sessionDir), name))); err != nil {
		return fmt.Errorf("copy the process checkpoint to Docker: %w", err)
	}
	if err := d.ContainerStart(ctx, containerID, container.StartOptions{CheckpointID: name}); err != nil {
		return fmt.Errorf("restore the processes: %w", err)
	}
	return nil
}
