package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlock/airlock/daemon"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
)

// connect returns a client of a running engine, starting one in the
// background when none answers on the socket.
func (g *globals) connect(ctx context.Context) (*client.Client, error) {
	c := client.New(g.engine)
	// A socket that accepts a connection has an engine behind it: the
	// request itself will tell the rest, one round trip sooner.
	if conn, err := net.DialTimeout("unix", g.engine, 2*time.Second); err == nil {
		conn.Close()
		return c, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := c.Ping(pctx)
	cancel()
	if err == nil {
		return c, nil
	}
	if !errdefs.IsUnavailable(err) {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errdefs.Unavailablef("no Airlock engine answers on %s, and starting one needs root (it mounts the session workspaces): run `sudo airlock serve`, or `sudo airlock install-service` once", g.engine)
	}
	if err := g.startEngine(); err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx, 15*time.Second); err != nil {
		return nil, errdefs.Unavailablef("started an engine but it does not answer on %s: see %s", g.engine, engineLog())
	}
	return c, nil
}

func engineLog() string {
	return filepath.Join(envOr("AIRLOCK_STATE_DIR", daemon.DefaultStateDir), "engine.log")
}

// startEngine runs `airlock serve` detached from this process, logging to
// the state directory.
func (g *globals) startEngine() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := engineLog()
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(self, "serve", "--engine", g.engine)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the engine: %w", err)
	}
	fmt.Fprintf(os.Stderr, "airlock: started the engine (pid %d, log %s)\n", cmd.Process.Pid, logPath)
	return cmd.Process.Release()
}
