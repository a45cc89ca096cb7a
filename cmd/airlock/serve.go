package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/engine/server"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/spf13/cobra"
)

type serveOptions struct {
	stateDir  string
	config    string
	debug     bool
	listen    string
	tokenFile string
	group     string
}

func serveCmd(g *globals) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the engine daemon (needs root: it mounts workspaces)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.stateDir, "state-dir", envOr("AIRLOCK_STATE_DIR", defaultStateDir), "where sessions and the database live (env AIRLOCK_STATE_DIR)")
	cmd.Flags().StringVar(&o.config, "config", envOr("AIRLOCK_CONFIG", defaultConfig), "config file (env AIRLOCK_CONFIG); a missing default file is fine")
	cmd.Flags().BoolVar(&o.debug, "debug", false, "log debug messages")
	cmd.Flags().StringVar(&o.listen, "listen", "", "also answer on this TCP address (e.g. 127.0.0.1:7370), API and browser UI, behind a token")
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "the TCP listener's token (default: a new random one each start, see `airlock ui`)")
	cmd.Flags().StringVar(&o.group, "socket-group", "", "let this group's members use the engine (socket mode 0660), e.g. airlock")
	return cmd
}

func serve(ctx context.Context, g *globals, o *serveOptions) error {
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := overlay.Check(); err != nil {
		return err
	}
	cfg, err := loadConfig(o.config, o.config != defaultConfig || os.Getenv("AIRLOCK_CONFIG") != "")
	if err != nil {
		return err
	}
	defaults, err := cfg.defaults()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.stateDir, 0o700); err != nil {
		return err
	}
	docker, err := engine.NewDocker()
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ver, err := docker.ServerVersion(pctx)
	cancel()
	if err != nil {
		return errdefs.Unavailablef("Docker is not running (%v): start it with `sudo systemctl start docker` (or `sudo dockerd &`), then start the engine again", err)
	}
	st, err := store.Open(ctx, filepath.Join(o.stateDir, "airlock.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	eng, err := engine.New(ctx, docker, st, engine.Options{StateDir: o.stateDir, Defaults: defaults, Logger: log, SpareNetworks: 1})
	if err != nil {
		return err
	}
	sessions, _ := st.Sessions(ctx) // not eng.List: that walks every workspace
	log.Info("engine ready", "sessions", len(sessions), "adopt", time.Since(start).Round(time.Millisecond),
		"docker", ver.Version, "docker_api", ver.APIVersion, "state_dir", o.stateDir, "socket", g.engine)
	l, err := server.Listen(g.engine)
	if err != nil {
		return err
	}
	if o.group != "" {
		if err := shareSocket(g.engine, o.group); err != nil {
			l.Close()
			return err
		}
	}
	srv := server.New(eng, &images.Builder{Docker: docker, Scratch: filepath.Join(o.stateDir, "build"), CABundle: defaults.CABundle}, log, api.VersionInfo{
		API: api.Version, Engine: version, DockerVersion: ver.Version, DockerAPI: ver.APIVersion, PID: os.Getpid(),
	})
	hs := server.HTTPServer(srv.Handler(), log)
	tcp, err := newTCPListener(srv, o, log)
	if err != nil {
		return err
	}
	defer tcp.close()
	srv.StartUI = tcp.start
	if o.listen != "" {
		if _, err := tcp.start(); err != nil {
			return err
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-sigs:
	case <-ctx.Done():
	}
	log.Info("engine stopping; sessions keep running")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	eng.Close(sctx)
	os.Remove(g.engine)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
