package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func usageErr(format string, args ...any) error {
	return errdefs.Invalidf(format, args...)
}

func execCmd(g *globals) *cobra.Command {
	var tty, interactive bool
	var user string
	var env []string
	cmd := &cobra.Command{
		Use:     "exec ID -- COMMAND [ARG...]",
		Short:   "Run another command in a session's workspace",
		Example: "  airlock exec 3f2a -- go test ./...",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErr("usage: airlock exec ID -- COMMAND [ARG...]")
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			code, err := runIn(ctx, c, args[0], api.ExecRequest{Argv: args[1:], TTY: tty, Stdin: interactive || tty, User: user, Env: env})
			if err != nil {
				return err
			}
			return exitWith(code)
		},
	}
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "give the command a terminal")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "pass standard input to the command")
	cmd.Flags().StringVarP(&user, "user", "u", "", "uid:gid or name to run as (default: the session's user)")
	cmd.Flags().StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	return cmd
}

func shellCmd(g *globals) *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "shell ID",
		Short: "Open an interactive shell in a session",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !term.IsTerminal(int(os.Stdin.Fd())) {
				return usageErr("airlock shell needs a terminal; in scripts use `airlock exec %s -- COMMAND`", args[0])
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			argv := []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"}
			env := []string{"TERM=" + envOr("TERM", "xterm-256color")}
			code, err := runIn(ctx, c, args[0], api.ExecRequest{Argv: argv, TTY: true, Stdin: true, User: user, Env: env})
			if err != nil {
				return err
			}
			return exitWith(code)
		},
	}
	cmd.Flags().StringVarP(&user, "user", "u", "", "uid:gid or name to run as (default: the session's user)")
	return cmd
}

// runIn runs a command in a session with this terminal: raw mode and
// resizes for a TTY, Ctrl-C forwarded as SIGINT otherwise (twice detaches).
func runIn(ctx context.Context, c *client.Client, id string, req api.ExecRequest) (int, error) {
	return runWith(ctx, req, func() string { return id }, func(ctx context.Context, req api.ExecRequest, sio client.ExecIO, control func(*client.Exec)) (int, error) {
		return c.Exec(ctx, id, req, sio, control)
	}, nil)
}

// execFunc starts a remote command with this terminal's streams.
type execFunc func(ctx context.Context, req api.ExecRequest, sio client.ExecIO, control func(*client.Exec)) (int, error)

// runWith runs a remote command started by do; id names its session once
// known, and onSession, if not nil, gets the session a run creates.
func runWith(ctx context.Context, req api.ExecRequest, id func() string, do execFunc, onSession func(api.Session)) (int, error) {
	stdinFd := int(os.Stdin.Fd())
	isTerm := term.IsTerminal(stdinFd)
	if req.TTY && !isTerm {
		req.TTY = false // no terminal to give: plain streams instead
	}
	if req.TTY {
		if w, h, err := term.GetSize(stdinFd); err == nil {
			req.Width, req.Height = uint(w), uint(h)
		}
		old, err := term.MakeRaw(stdinFd)
		if err != nil {
			return -1, err
		}
		defer term.Restore(stdinFd, old)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdin *os.File
	if req.Stdin {
		stdin = os.Stdin
	}
	parent := ctx
	code, err := do(ctx, req, client.ExecIO{Stdin: stdin, Stdout: os.Stdout, Stderr: os.Stderr, Session: onSession}, func(x *client.Exec) {
		go func() {
			interrupts := 0
			for {
				select {
				case s := <-sigs:
					switch s {
					case syscall.SIGWINCH:
						if w, h, err := term.GetSize(stdinFd); err == nil && req.TTY {
							x.Resize(uint(w), uint(h))
						}
					case syscall.SIGINT:
						interrupts++
						if interrupts > 1 {
							fmt.Fprintf(os.Stderr, "\nairlock: detached; the command goes on in session %s (`airlock logs %s`)\n", id(), id())
							cancel()
							return
						}
						x.Signal(int(syscall.SIGINT))
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	})
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return 130, nil // detached by the user
	}
	return code, err
}
