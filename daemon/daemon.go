// Package daemon runs the engine as a daemon and assembles it for whoever
// runs one: `airlock serve` (the unix socket, the TCP listener and its
// token, the browser interface on demand), `airlock ci` (an engine of its
// own for one job), the config file both read, and the systemd unit
// `airlock install-service` writes. Assemble is the one place an engine is
// built from its parts (Docker, the SQLite store, the image builder, the
// API server).
package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/engine/server"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/secretscan"
	"github.com/docker/docker/client"
)

// Where the daemon lives unless told otherwise; docs/API.md and the
// README name them.
const (
	DefaultSocket   = "/run/airlock/airlock.sock"
	DefaultStateDir = "/var/lib/airlock"
	DefaultConfig   = "/etc/airlock/config.yaml"
)

// dockerProbe bounds the first question to Docker, so that a daemon that
// hangs fails the start with a message instead of hanging it. A Docker that
// is not there fails at once (the socket refuses); the bound is for one that
// is there and busy, which on two cores running twenty CI jobs at once takes
// more than 5 s to answer its version (seen: TestCIConcurrent), so it is
// generous.
var dockerProbe = time.Minute

// Options say how Assemble builds an engine. The daemon and `airlock ci`
// differ only here: ci passes a state directory of its own (so its own
// SQLite file and secrets key), its policy file, a slow idle check, and
// no spare networks, since it runs one session and exits.
type Options struct {
	// StateDir holds the database (airlock.db), the workspaces and the
	// image builds' scratch space; it is made (mode 0700) if missing.
	StateDir string
	// Defaults are the sessions' settings (see LoadConfig).
	Defaults engine.Defaults
	// Logger receives the engine's log (nil: nothing is logged).
	Logger *slog.Logger
	// SpareNetworks, IdleCheck and PolicyFile are engine.Options'.
	SpareNetworks int
	IdleCheck     time.Duration
	PolicyFile    string
	// NeverAsk is engine.Options' (airlock ci).
	NeverAsk bool
	// Secrets is engine.Options' (nil: the airlock-scan beside the
	// engine's binary, as a child). The CLI, which links a detector
	// anyway, passes it.
	Secrets secretscan.Finder
	// Version is the engine's version that `airlock version` shows.
	Version string
}

// Daemon is an assembled engine and the API server over it.
type Daemon struct {
	Engine *engine.Engine
	// Server is the engine's HTTP API, with the image builder; nothing
	// listens until Serve (or the caller) gives it a listener.
	Server *server.Server

	log    *slog.Logger
	docker *client.Client
	store  *store.Store
}

// Assemble checks what the engine needs (overlayfs and the right to
// mount, a Docker daemon that answers), opens the store and starts the
// engine, which adopts the sessions the store knows. Close stops it.
func Assemble(ctx context.Context, o Options) (*Daemon, error) {
	o = o.withDefaults()
	if o.StateDir == "" {
		return nil, errdefs.Invalidf("no state directory: give the engine one (--state-dir)")
	}
	if err := overlay.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, err
	}
	docker, err := engine.NewDocker()
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, dockerProbe)
	ver, err := docker.ServerVersion(pctx)
	cancel()
	if err != nil {
		docker.Close()
		if pctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return nil, errdefs.Unavailablef("Docker did not answer within %s (%v): it is running but stuck or overloaded; check `systemctl status docker` (or restart dockerd), then try again", dockerProbe, err)
		}
		return nil, errdefs.Unavailablef("Docker is not running (%v): start it with `sudo systemctl start docker` (or `sudo dockerd &`), then try again", err)
	}
	st, err := store.Open(ctx, filepath.Join(o.StateDir, "airlock.db"))
	if err != nil {
		docker.Close()
		return nil, err
	}
	start := time.Now()
	eng, err := engine.New(ctx, docker, st, engine.Options{StateDir: o.StateDir, Defaults: o.Defaults, Logger: o.Logger,
		SpareNetworks: o.SpareNetworks, IdleCheck: o.IdleCheck, PolicyFile: o.PolicyFile, NeverAsk: o.NeverAsk, Secrets: o.Secrets})
	if err != nil {
		st.Close()
		docker.Close()
		return nil, err
	}
	sessions, _ := st.Sessions(ctx) // not eng.List: that walks every workspace
	o.Logger.Info("engine ready", "sessions", len(sessions), "adopt", time.Since(start).Round(time.Millisecond),
		"docker", ver.Version, "docker_api", ver.APIVersion, "state_dir", o.StateDir)
	builder := &images.Builder{Docker: docker, Scratch: filepath.Join(o.StateDir, "build"), CABundle: o.Defaults.CABundle}
	srv := server.New(eng, builder, o.Logger, api.VersionInfo{
		API: api.Version, Engine: o.Version, DockerVersion: ver.Version, DockerAPI: ver.APIVersion, PID: os.Getpid(),
	})
	return &Daemon{Engine: eng, Server: srv, log: o.Logger, docker: docker, store: st}, nil
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return o
}

// Close stops the engine (its sessions keep running, for the next engine
// to adopt) and closes the store and the Docker client.
func (d *Daemon) Close(ctx context.Context) {
	d.Engine.Close(ctx)
	d.store.Close()
	d.docker.Close()
}
