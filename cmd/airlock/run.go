package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock/airlock/daemon"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
	"github.com/spf13/cobra"
)

type createFlags struct {
	project       string
	image         string
	user          string
	workspaceSize string
	memory        string
	cpus          float64
	pids          int64
	env           []string
	caBundle      string
	net           netFlags
	idleTimeout   time.Duration
	keepAlive     bool
	cpuBudget     time.Duration
	costBudget    float64
	workspace     string
	hibernate     string
}

func (f *createFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.project, "project", "p", ".", "the project folder the session works on (never written until you accept)")
	fl.StringVar(&f.image, "image", "", "local image to run (default airlock/base; `airlock image build` makes it)")
	fl.StringVarP(&f.user, "user", "u", "", "uid:gid or name to run as (default: the project owner)")
	fl.StringVar(&f.workspace, "workspace", "", "where the session's writes live: tmpfs (in memory, the default) or disk (the state directory's disk: no memory, survives a reboot)")
	fl.StringVar(&f.workspaceSize, "workspace-size", "", "cap on what the session can write, e.g. 2g (default 2g)")
	fl.StringVar(&f.memory, "memory", "", "memory cap including workspace writes, e.g. 4g (default 4g)")
	fl.Float64Var(&f.cpus, "cpus", 0, "CPU cap in cores (default min(2, cores))")
	fl.Int64Var(&f.pids, "pids", 0, "process count cap (default 1024)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "environment variable KEY=VALUE for the session (repeatable)")
	fl.StringVar(&f.caBundle, "ca-bundle", "", "extra CA bundle (PEM) the session trusts, for intercepting proxies")
	f.net.add(cmd)
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "pause the session after this long idle, e.g. 10m (default 30m)")
	fl.BoolVar(&f.keepAlive, "keep-alive", false, "never pause the session for being idle")
	fl.StringVar(&f.hibernate, "hibernate-after", "", "hibernate the session (on disk only, no memory; processes stop) after this long idle, e.g. 4h, or off (default 2h)")
	fl.DurationVar(&f.cpuBudget, "cpu-budget", 0, "pause the session once it used this much active CPU, e.g. 2h")
	fl.Float64Var(&f.costBudget, "cost-budget", 0, "pause the session once it cost this much, in USD")
}

func (f *createFlags) request() (api.CreateRequest, error) {
	project, err := filepath.Abs(f.project)
	if err != nil {
		return api.CreateRequest{}, err
	}
	req := api.CreateRequest{Project: project, Image: f.image, User: f.user, Env: f.env, Egress: f.net.policy(), IdleTimeout: f.idleTimeout,
		CPUBudget: f.cpuBudget, CostBudget: f.costBudget, Workspace: f.workspace}
	switch f.workspace {
	case "", api.WorkspaceTmpfs, api.WorkspaceDisk:
	default:
		return req, usageErr("--workspace %s: give tmpfs or disk", f.workspace)
	}
	switch f.hibernate {
	case "":
	case "off", "never", "0":
		req.HibernateAfter = -1
	default:
		d, err := time.ParseDuration(f.hibernate)
		if err != nil || d <= 0 {
			return req, usageErr("--hibernate-after %s: give a duration like 4h, or off", f.hibernate)
		}
		req.HibernateAfter = d
	}
	if f.keepAlive {
		req.IdleTimeout = -1
	}
	if f.idleTimeout < 0 {
		return req, usageErr("--idle-timeout must be positive (use --keep-alive to never pause)")
	}
	if f.caBundle != "" {
		if req.CABundle, err = filepath.Abs(f.caBundle); err != nil {
			return req, err
		}
	}
	req.Limits.CPUs, req.Limits.Pids = f.cpus, f.pids
	if req.Limits.WorkspaceSize, err = daemon.ParseSize("--workspace-size", f.workspaceSize); err != nil {
		return req, err
	}
	if req.Limits.Memory, err = daemon.ParseSize("--memory", f.memory); err != nil {
		return req, err
	}
	return req, nil
}

func runCmd(g *globals) *cobra.Command {
	f := &createFlags{}
	af := &agentFlags{}
	var tty, interactive bool
	var publish []int
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARG...] | run --agent NAME --prompt TEXT",
		Short: "Create a session and run a command in it",
		Long: "Create a session over the project and run COMMAND in it, streaming its output.\n" +
			"Prints the session id and exits with the command's exit code. The project is untouched:\n" +
			"review with `airlock diff ID`, then `airlock accept ID` or `airlock discard ID`.",
		Example: "  airlock run --project ~/src/app -- sh -c 'echo hi > hello.txt; rm README.md'\n" +
			"  airlock run --project . --agent claude --prompt \"Fix the failing test in pkg/foo\"\n" +
			"  airlock run --agent codex --prompt-file task.md --schema result.schema.json --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range publish {
				if _, err := portArg(strconv.Itoa(p)); err != nil {
					return err
				}
			}
			if af.agent != "" {
				if len(args) > 0 {
					return usageErr("give either --agent with a prompt or a command after `--`, not both")
				}
				return runAgent(cmd.Context(), g, f, af, publish)
			}
			if af.prompt != "" || af.promptFile != "" {
				return usageErr("--prompt needs --agent (%s)", strings.Join(harness.Names(), ", "))
			}
			if len(args) == 0 {
				return usageErr("no command given: put it after `--`, e.g. `airlock run -- make test`")
			}
			req, err := f.request()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			var id string
			xreq := api.ExecRequest{Argv: args, TTY: tty, Stdin: interactive || tty}
			code, err := runWith(ctx, xreq, func() string { return id }, func(ctx context.Context, xreq api.ExecRequest, sio client.ExecIO, control func(*client.Exec)) (int, error) {
				return c.Run(ctx, api.RunRequest{Create: req, Exec: xreq}, sio, control)
			}, func(sess api.Session) {
				id = sess.ID
				fmt.Fprintf(os.Stderr, "airlock: session %s (project %s, image %s)\n", sess.ID, sess.Project, sess.Image)
				publishPorts(ctx, c, sess.ID, publish)
			})
			if err != nil {
				return err
			}
			summarize(ctx, c, id)
			return exitWith(code)
		},
	}
	f.add(cmd)
	af.add(cmd, true)
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "give the command a terminal")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "pass standard input to the command")
	cmd.Flags().IntSliceVar(&publish, "publish", nil, "forward this port of the session to a free port of 127.0.0.1 and print its URL (repeatable; see `airlock port`)")
	return cmd
}

// runAgent creates a session and runs the agent's first turn in it.
func runAgent(ctx context.Context, g *globals, f *createFlags, af *agentFlags, publish []int) error {
	areq, err := af.request(af.prompt)
	if err != nil {
		return err
	}
	req, err := f.request()
	if err != nil {
		return err
	}
	if req.Image == "" && af.agent != "custom" {
		req.Image = api.DefaultAgentsImage
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	sess, err := c.Create(ctx, req)
	if err != nil {
		if errdefs.IsNotFound(err) && req.Image == api.DefaultAgentsImage && f.image == "" {
			return errdefs.NotFoundf("image %s is not available: build it with `airlock image build --agents %s`", req.Image, af.agent)
		}
		return err
	}
	fmt.Fprintf(os.Stderr, "airlock: session %s (project %s, image %s, agent %s)\n", sess.ID, sess.Project, sess.Image, af.agent)
	publishPorts(ctx, c, sess.ID, publish)
	code, err := runTurn(ctx, c, sess.ID, areq, af.json)
	if err != nil {
		return err
	}
	summarize(ctx, c, sess.ID)
	return exitWith(code)
}

// summarize tells the user where the session's changes stand.
func summarize(ctx context.Context, c interface {
	Session(context.Context, string) (api.Session, error)
}, id string) {
	s, err := c.Session(ctx, id)
	if err != nil {
		return
	}
	switch {
	case s.Changed == 0:
		fmt.Fprintf(os.Stderr, "airlock: session %s: no changes\n", id)
	case s.Changed > 0:
		fmt.Fprintf(os.Stderr, "airlock: session %s: %d changed path(s); review with `airlock diff %s`, then `airlock accept %s` or `airlock discard %s`\n", id, s.Changed, id, id, id)
	}
	if s.Workspace != nil && s.Workspace.Full {
		fmt.Fprintf(os.Stderr, "airlock: session %s: the workspace is full (%d MiB): writes fail with ENOSPC; start a session with a larger --workspace-size\n", id, s.Workspace.Size>>20)
	}
}

func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}
