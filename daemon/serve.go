package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/airlock/airlock/engine/server"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/secretscan"
)

// ServeOptions say where the daemon answers and what it reads at start.
type ServeOptions struct {
	// Socket is the unix socket of the API (mode 0600, or 0660 with
	// Group).
	Socket string
	// Group, when set, lets its members use the socket.
	Group string
	// StateDir is the engine's state (default DefaultStateDir).
	StateDir string
	// Config is the config file; a missing one is fine unless
	// ConfigRequired (the user named it).
	Config         string
	ConfigRequired bool
	// Listen, when set, opens the TCP listener (API and browser UI,
	// behind the token) at start; otherwise `airlock ui` opens it on a
	// loopback port.
	Listen string
	// TokenFile holds the TCP listener's token ("": a new random one).
	TokenFile string
	// Logger receives the daemon's log (nil: nothing is logged).
	Logger *slog.Logger
	// Version is the engine's version that `airlock version` shows.
	Version string
	// WarmPool, when set, is the warm pool's size over the config
	// file's (0: none).
	WarmPool *int
	// Secrets is Options' (nil: the airlock-scan beside the engine).
	Secrets secretscan.Finder
}

// NewLogger is the daemon's log: text lines to w, debug messages only when
// asked.
func NewLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// engineClose bounds a graceful stop's close of the engine: it removes the
// warm pool's containers and mounts (each a docker rm and an unmount; the
// 5 s it had could run out on a loaded machine and leave them running and
// frozen) and waits for the makes under way. A service manager waits 90 s
// by default before it kills.
const engineClose = time.Minute

// Serve runs the engine daemon until ctx is done or the API's server
// fails. The engine's sessions keep running after it returns.
func Serve(ctx context.Context, o ServeOptions) error {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	defaults, err := LoadConfig(o.Config, o.ConfigRequired)
	if err != nil {
		return err
	}
	if o.WarmPool != nil {
		if *o.WarmPool < 0 {
			return errdefs.Invalidf("--warm-pool %d: give how many warm containers to keep, 0 for none", *o.WarmPool)
		}
		defaults.WarmPool = *o.WarmPool
		if *o.WarmPool == 0 {
			defaults.WarmPool = -1
		}
	}
	token, err := loadToken(o.TokenFile)
	if err != nil {
		return err
	}
	d, err := Assemble(ctx, Options{StateDir: o.StateDir, Defaults: defaults, Logger: log, SpareNetworks: 1, Version: o.Version, Secrets: o.Secrets})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), engineClose)
		defer cancel()
		d.Close(sctx)
	}()
	l, err := server.Listen(o.Socket)
	if err != nil {
		return err
	}
	defer os.Remove(o.Socket)
	defer l.Close() // Serve closes it too; this is for the returns before
	if o.Group != "" {
		if err := shareSocket(o.Socket, o.Group); err != nil {
			return err
		}
	}
	log.Info("engine answering", "socket", o.Socket)
	rel := newReleaser(quietAfter, freeOSMemory)
	defer rel.watchCollections()()
	tcp := newTCPListener(d.Server, o.Listen, token, log, rel)
	defer tcp.close()
	d.Server.StartUI = tcp.start
	if o.Listen != "" {
		if _, err := tcp.start(); err != nil {
			return err
		}
	}
	hs := server.HTTPServer(rel.wrap(d.Server.Handler()), log)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("engine stopping; sessions keep running")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
