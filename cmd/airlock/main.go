// Command airlock is Airlock's CLI. `airlock serve` runs the engine daemon
// (package daemon) and `airlock ci` a job's own engine (package ci); every
// other verb is a client of the engine's local API, and the CLI starts the
// engine on demand when none answers.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/airlock/airlock/daemon"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/names"
	"github.com/airlock/airlock/snapshot"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries a command's own exit status through cobra.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// globals are the flags every verb shares.
type globals struct {
	engine string // engine socket
}

func main() {
	if snapshot.Init() { // the engine's layer applier, re-executed chrooted
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	root := newRoot(&globals{})
	root.SetArgs(args)
	return report(root, root.ExecuteContext(ctx))
}

// newRoot builds the command tree over g, the flags every verb shares.
func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "airlock",
		Short:         "A local sandbox for AI coding agents, with diff review",
		Long:          "Airlock runs each agent session in a container over a copy-on-write view of your project.\nNothing reaches the project until you review the diff and accept it.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.PersistentFlags().StringVar(&g.engine, "engine", envOr("AIRLOCK_ENGINE", daemon.DefaultSocket), "engine socket (env AIRLOCK_ENGINE)")
	root.AddCommand(
		agentCmd(g), eventsCmd(g), secretCmd(g), policyCmd(g), netCmd(g), auditCmd(g), pauseCmd(g), resumeCmd(g), hibernateCmd(g), wakeCmd(g), meterCmd(g), budgetCmd(g), limitsCmd(g),
		snapshotCmd(g), snapshotsCmd(g, "snapshots"), restoreCmd(g), forkCmd(g), uiCmd(g), installServiceCmd(g), ciCmd(g),
		serveCmd(g), runCmd(g), execCmd(g), shellCmd(g), lsCmd(g), diffCmd(g),
		acceptCmd(g), discardCmd(g), logsCmd(g), rmCmd(g), imageCmd(g), portCmd(g),
		versionCmd(g), manCmd(), mcpCmd(g), scheduleCmd(g), turnsCmd(g), undoCmd(g),
	)
	root.InitDefaultCompletionCmd() // now, so that strictGroups covers it too
	strictGroups(root)
	addCompletions(root, g)
	return root
}

// report turns a command's error into its exit status, saying what went
// wrong on standard error.
func report(root *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") && !strings.Contains(msg, "it has:") {
		var cmds []string
		for _, c := range root.Commands() {
			if c.IsAvailableCommand() {
				cmds = append(cmds, c.Name())
			}
		}
		msg = strings.TrimSpace(strings.SplitN(msg, "\n", 2)[0]) + "; the commands are: " + strings.Join(cmds, ", ")
	}
	// A message may embed what a session named (the engine quotes the
	// paths it puts in; this is the last guard): no escape sequence or
	// bidirectional control reaches the terminal. Its lines stay lines.
	fmt.Fprintln(os.Stderr, "airlock:", names.SafeLines(msg))
	if errdefs.ClassOf(err) == errdefs.Internal && isUsage(err) {
		return errdefs.ExitCode(errdefs.Invalid)
	}
	return errdefs.ExitCode(errdefs.ClassOf(err))
}

// strictGroups makes every command that only groups others (`net`,
// `image`, `secret`...) refuse an unknown subcommand with an error naming
// the ones that exist. Cobra's own behaviour for such a command is to print
// its help and exit 0, which a script cannot tell from success.
func strictGroups(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		strictGroups(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() || !cmd.HasParent() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		return errdefs.Invalidf("unknown command %q for %q; it has: %s (see `%s --help`)", args[0], cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())
	}
}

// isUsage tells cobra's own flag and argument errors apart.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown command", "accepts ", "requires at least", "invalid argument", "flag needs an argument", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
