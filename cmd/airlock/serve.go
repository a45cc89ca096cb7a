package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/airlock/airlock/daemon"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/secretscan/gitleaks"
	"github.com/spf13/cobra"
)

// engineName is the engine's own binary beside the CLI's (cmd/airlock-engine;
// the Makefile builds both into bin/).
const engineName = "airlock-engine"

func serveCmd(g *globals) *cobra.Command {
	o := daemon.ServeOptions{Version: version}
	var debug bool
	var warmPool int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the engine daemon (needs root: it mounts workspaces)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Socket = g.engine
			if cmd.Flags().Changed("warm-pool") {
				o.WarmPool = &warmPool
			}
			o.ConfigRequired = o.Config != daemon.DefaultConfig || os.Getenv("AIRLOCK_CONFIG") != ""
			if bin := engineBeside(); bin != "" {
				return execEngine(bin, o, debug)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Logger = daemon.NewLogger(os.Stderr, debug)
			o.Secrets = gitleaks.New() // linked here anyway: no child needed
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

// engineBeside is the engine's own binary when it stands beside this one,
// else "": the engine then runs in this process.
func engineBeside() string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(self), engineName)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return ""
	}
	return p
}

// execEngine replaces this process with the engine's binary (same pid, so
// what started `airlock serve` — a shell, systemd, the CLI's start on
// demand — keeps its engine), passing the options parsed here.
func execEngine(bin string, o daemon.ServeOptions, debug bool) error {
	args := []string{engineName,
		"--engine=" + o.Socket, "--state-dir=" + o.StateDir, "--config=" + o.Config,
		"--config-required=" + strconv.FormatBool(o.ConfigRequired), "--debug=" + strconv.FormatBool(debug),
		"--listen=" + o.Listen, "--token-file=" + o.TokenFile, "--socket-group=" + o.Group,
		"--cli-version=" + o.Version,
	}
	err := syscall.Exec(bin, args, os.Environ())
	return errdefs.Wrap(errdefs.Unavailable, fmt.Errorf("run the engine's binary %s: %w (rebuild it with `make build`, or remove it to run the engine in this process)", bin, err))
}
