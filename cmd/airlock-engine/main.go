// Command airlock-engine is the engine daemon on its own. `airlock serve`
// execs it when it stands beside the CLI (the Makefile builds both into
// bin/), with the options the CLI parsed, so the engine's process is this
// binary: it links no CLI. The CLI's Go templates (`--format`, cobra's
// help) make the linker keep every exported method of every type, and an
// engine run from that binary maps about 7 MB more of it (docs/ARCHITECTURE.md,
// "The engine's binary"). Without this binary beside it, `airlock serve`
// runs the same daemon.Serve in its own process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlock/airlock/daemon"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/snapshot"
)

// version is set at build time with -ldflags "-X main.version=...", as the
// CLI's is.
var version = "dev"

func main() {
	if snapshot.Init() { // the engine's layer applier, re-executed chrooted
		return
	}
	o := daemon.ServeOptions{Version: version}
	var debug bool
	var cli string
	fs := flag.NewFlagSet("airlock-engine", flag.ExitOnError)
	fs.StringVar(&o.Socket, "engine", daemon.DefaultSocket, "engine socket")
	fs.StringVar(&o.StateDir, "state-dir", daemon.DefaultStateDir, "where sessions and the database live")
	fs.StringVar(&o.Config, "config", daemon.DefaultConfig, "config file")
	fs.BoolVar(&o.ConfigRequired, "config-required", false, "fail when the config file is missing")
	fs.BoolVar(&debug, "debug", false, "log debug messages")
	fs.StringVar(&o.Listen, "listen", "", "also answer on this TCP address, behind a token")
	fs.StringVar(&o.TokenFile, "token-file", "", "the TCP listener's token")
	fs.StringVar(&o.Group, "socket-group", "", "let this group's members use the engine")
	fs.StringVar(&cli, "cli-version", "", "the version of the `airlock` that ran this engine")
	fs.Parse(os.Args[1:])
	o.Logger = daemon.NewLogger(os.Stderr, debug)
	if cli != "" && cli != version {
		o.Logger.Warn("this engine's binary is not the CLI's build: rebuild both (make build)", "engine", version, "cli", cli)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := daemon.Serve(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock:", err)
		os.Exit(errdefs.ExitCode(errdefs.ClassOf(err)))
	}
}
