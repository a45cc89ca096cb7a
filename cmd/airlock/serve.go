package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlock/airlock/daemon"
	"github.com/spf13/cobra"
)

func serveCmd(g *globals) *cobra.Command {
	o := daemon.ServeOptions{Version: version}
	var debug bool
	var warmPool int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the engine daemon (needs root: it mounts workspaces)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			o.Socket = g.engine
			if cmd.Flags().Changed("warm-pool") {
				o.WarmPool = &warmPool
			}
			o.ConfigRequired = o.Config != daemon.DefaultConfig || os.Getenv("AIRLOCK_CONFIG") != ""
			return daemon.Serve(ctx, o)
		},
	}
	cmd.Flags().StringVar(&o.StateDir, "state-dir", envOr("AIRLOCK_STATE_DIR", daemon.DefaultStateDir), "where sessions and the database live (env AIRLOCK_STATE_DIR)")
	cmd.Flags().StringVar(&o.Config, "config", envOr("AIRLOCK_CONFIG", daemon.DefaultConfig), "config file (env AIRLOCK_CONFIG); a missing default file is fine")
	cmd.Flags().BoolVar(&debug, "debug", false, "log debug messages")
	cmd.Flags().IntVar(&warmPool, "warm-pool", 2, "warm containers kept ready for each of the two kinds of session asked for last, 0 for none (default: the config's warm_pool, else 2)")
	cmd.Flags().StringVar(&o.Listen, "listen", "", "also answer on this TCP address (e.g. 127.0.0.1:7370), API and browser UI, behind a token")
	cmd.Flags().StringVar(&o.TokenFile, "token-file", "", "the TCP listener's token (default: a new random one each start, see `airlock ui`)")
	cmd.Flags().StringVar(&o.Group, "socket-group", "", "let this group's members use the engine (socket mode 0660), e.g. airlock")
	return cmd
}
