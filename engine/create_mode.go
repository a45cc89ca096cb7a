package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/container"
)

// createMode is how a new session starts: idle (Create), with its first
// command as the container's main process (*firstRun, Run), or filled
// from a snapshot (*restoreSource, Restore and Fork). The create steps
// ask it at the points where the modes differ.
type createMode interface {
	// fillWorkspace fills the workspace's upper directory before the
	// overlay is mounted.
	fillWorkspace(upper string) error
	// racesBase says whether the upper directory may be written while
	// the base is captured (the session's own writes), rather than
	// holding files the session started with.
	racesBase() bool
	// command is the container's main process.
	command() []string
	// configure adjusts the container's configuration.
	configure(cfg *container.Config, hostCfg *container.HostConfig)
	// created runs once the container exists, before it starts; it
	// adds its own cleanup to c.
	created(ctx context.Context, c *creation) error
	// starting is told just before the container starts.
	starting()
	// running runs once the container runs on its network.
	running(ctx context.Context, c *creation) error
	// warm says whether the session may start from a warm container
	// (warmpool.go), already started: created is then not called.
	warm() bool
}

// idle is the mode of Create: an empty workspace over the project and a
// container that idles until commands come as execs.
type idle struct{}

func (idle) fillWorkspace(string) error                         { return nil }
func (idle) racesBase() bool                                    { return true }
func (idle) command() []string                                  { return keepAlive }
func (idle) configure(*container.Config, *container.HostConfig) {}
func (idle) created(context.Context, *creation) error           { return nil }
func (idle) starting()                                          {}
func (idle) running(context.Context, *creation) error           { return nil }
func (idle) warm() bool                                         { return true }

// The first command runs as the container's main process, which is
// attached to before it starts, as `docker run` does, so that no output
// is missed.

func (*firstRun) fillWorkspace(string) error { return nil }
func (*firstRun) racesBase() bool            { return true }
func (f *firstRun) command() []string        { return f.cmd() }

func (*firstRun) configure(cfg *container.Config, hostCfg *container.HostConfig) {
	cfg.Labels[labelFirst] = "1"
	// The first command's output goes to its caller, not to a log.
	hostCfg.LogConfig = container.LogConfig{Type: "none"}
}

func (f *firstRun) created(ctx context.Context, c *creation) error {
	var err error
	f.attach, err = c.e.docker.ContainerAttach(ctx, c.rec.ContainerID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return dockerError("attach to the session's container", err)
	}
	c.onFail(func(context.Context) { f.attach.Close() })
	return nil
}

func (f *firstRun) starting()                              { f.started = time.Now() }
func (*firstRun) running(context.Context, *creation) error { return nil }

// A first command may start from a warm container, whose main process is
// already the init: the command then runs as the session's next ones do
// (Run sees claimed and execs it).
func (*firstRun) warm() bool { return true }

// A restored session's workspace, container layer and home come from a
// snapshot: the workspace before the overlay is mounted, the container
// layer once the container exists, the home (a tmpfs) once it runs.

func (s *restoreSource) racesBase() bool                                  { return false }
func (*restoreSource) command() []string                                  { return keepAlive }
func (*restoreSource) configure(*container.Config, *container.HostConfig) {}
func (*restoreSource) starting()                                          {}

// A restore starts from a warm container when the snapshot changed none
// of the container's own files: those go into Docker's upper directory
// before the container starts. The home is filled once it runs, as for a
// cold one.
func (s *restoreSource) warm() bool { return s.containerEmpty }

func (s *restoreSource) created(ctx context.Context, c *creation) error {
	info, err := c.e.docker.ContainerInspect(ctx, c.rec.ContainerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	if !overlayDriver(info.GraphDriver.Name) {
		return errdefs.Unavailablef("Docker stores containers with the %q storage driver; restoring a snapshot needs overlay2 (the default)", info.GraphDriver.Name)
	}
	return s.fillContainer(info.GraphDriver.Data["UpperDir"])
}

func (s *restoreSource) running(ctx context.Context, c *creation) error {
	info, err := c.e.docker.ContainerInspect(ctx, c.rec.ContainerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	if info.State == nil || info.State.Pid == 0 {
		return fmt.Errorf("the restored session's container stopped as it started")
	}
	return s.fillHome(info.State.Pid)
}
