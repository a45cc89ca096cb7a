package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/ports"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
)

// OpenPort forwards a session's port to the host (see ports.Forwarder.Open).
func (e *Engine) OpenPort(ctx context.Context, id string, req api.PortRequest) (api.Port, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Port{}, err
	}
	return e.ports.Open(ctx, rec.ID, req)
}

// Ports lists a session's forwarded ports.
func (e *Engine) Ports(ctx context.Context, id string) ([]api.Port, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.ports.List(rec.ID), nil
}

// ClosePort ends the forward of a session's port.
func (e *Engine) ClosePort(ctx context.Context, id string, port int) error {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return err
	}
	return e.ports.Close(rec.ID, port)
}

// ListeningPorts lists the TCP ports a session listens on that are not
// forwarded (see ports.Forwarder.Listening).
func (e *Engine) ListeningPorts(ctx context.Context, id string) ([]api.ListeningPort, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.ports.Listening(ctx, rec.ID)
}

// newPorts wires engine/ports to the session core and listens again on
// the forwards of the sessions adopted.
func newPorts(e *Engine) *ports.Forwarder {
	f := ports.New(portsCore{e: e, pids: &sync.Map{}}, filepath.Join(e.stateDir, "ports.json"), e.log)
	f.Restore(func(id string) bool {
		if e.liveSession(id) != nil {
			return true
		}
		// A hibernated session's forwards wake it on their first connection.
		rec, err := e.store.Session(context.Background(), id)
		return err == nil && rec.State == api.StateHibernated
	})
	return f
}

// portsCore is the session core as engine/ports sees it.
type portsCore struct {
	e *Engine
	// pids are the main processes of containers, by container id: asking
	// Docker costs milliseconds on every connection (a request to
	// busybox httpd, a connection each, took 4.4 ms through a forward,
	// 1.4-1.8 ms with the cache).
	pids *sync.Map
}

var _ ports.Sessions = portsCore{}

// Wake implements ports.Sessions: work marked and done at once (which
// resumes a paused session and counts as its use), then the network
// namespace of its container's process.
func (c portsCore) Wake(ctx context.Context, id string) (string, error) {
	rec, done, err := c.e.working(ctx, id)
	if err != nil {
		return "", err
	}
	done()
	if rec.State != api.StateRunning {
		return "", errdefs.Conflictf("session %s is %s: only a running session's ports are reached", rec.ID, rec.State)
	}
	pid, err := c.pid(ctx, rec)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid), nil
}

// Proc implements ports.Sessions: the procfs directory of the session's
// container's process, the session left as it is.
func (c portsCore) Proc(ctx context.Context, id string) (string, error) {
	rec, err := c.e.store.Session(ctx, id)
	if err != nil {
		return "", err
	}
	if rec.State != api.StateRunning && rec.State != api.StatePaused {
		return "", errdefs.Conflictf("session %s is %s: only a running or paused session's ports are listed", rec.ID, rec.State)
	}
	pid, err := c.pid(ctx, rec)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/%d", pid), nil
}

// pid is the main process of the session's container, from the cache
// while it is still the container's.
func (c portsCore) pid(ctx context.Context, rec store.Session) (int, error) {
	if pid, ok := c.pids.Load(rec.ContainerID); ok && inContainer(pid.(int), rec.ContainerID) {
		return pid.(int), nil
	}
	ins, err := c.e.docker.ContainerInspect(ctx, rec.ContainerID)
	if err != nil {
		return 0, dockerError("inspect the session's container", err)
	}
	if ins.State == nil || ins.State.Pid <= 0 {
		return 0, errdefs.Unavailablef("session %s's container is not running", rec.ID)
	}
	c.pids.Store(rec.ContainerID, ins.State.Pid)
	return ins.State.Pid, nil
}

// inContainer tells whether process pid still belongs to the container
// (its cgroup path names the container, under Docker's cgroupfs and
// systemd drivers alike), not a process that took its number after the
// container restarted.
func inContainer(pid int, containerID string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && strings.Contains(string(b), containerID)
}
