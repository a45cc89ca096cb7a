package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/harness"
	"github.com/spf13/cobra"
)

func scheduleCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Run an agent or a command in a new session on a schedule (cron)",
		Long: "A schedule runs an agent turn or a command in a new session over the project, as the\n" +
			"project is at that time, at the times of a cron expression. Each run's session waits for\n" +
			"review like any other (`airlock diff ID`, then accept or discard). The engine runs the\n" +
			"schedules: they survive its restarts, and an occurrence missed while the machine slept or\n" +
			"no engine ran runs once when it is back (not once per occurrence missed).",
		Example: "  airlock schedule add nightly --cron \"0 6 * * 1-5\" --project ~/src/app --agent claude \\\n" +
			"      --prompt-file nightly.md --cost-budget 0.50 --on-done 'notify-send \"airlock: $AIRLOCK_OUTCOME\" $AIRLOCK_SESSION'\n" +
			"  airlock schedule add tests --cron @hourly --project . -- make test\n" +
			"  airlock schedule ls\n" +
			"  airlock schedule run nightly\n" +
			"  airlock schedule log nightly\n" +
			"  airlock schedule rm nightly",
	}
	cmd.AddCommand(scheduleAddCmd(g), scheduleLsCmd(g), scheduleRmCmd(g), scheduleRunCmd(g), scheduleLogCmd(g))
	return cmd
}

func scheduleAddCmd(g *globals) *cobra.Command {
	var s api.Schedule
	var project, promptFile, policy string
	var out *output
	cmd := &cobra.Command{
		Use:   "add NAME --cron EXPR (--agent NAME --prompt TEXT | -- COMMAND [ARG...])",
		Short: "Add a schedule",
		Long: "Add a schedule. --cron takes five fields (minute hour day-of-month month day-of-week) in\n" +
			"the engine's time zone, or @hourly, @daily, @weekly, @every 2h. A prompt file is read now.\n" +
			"The agent's API key is the engine's (`airlock secret set`): no terminal is there to give it.\n" +
			"--on-done runs on this host after each run, in the project folder, as the folder's owner,\n" +
			"with AIRLOCK_SCHEDULE, AIRLOCK_SESSION, AIRLOCK_OUTCOME (done, applied, failed, policy, error),\n" +
			"AIRLOCK_EXIT_CODE, AIRLOCK_CHANGED (paths changed) and AIRLOCK_PROJECT in its environment.\n" +
			"--apply-policy accepts a run's changes into the project when they pass the accept policy\n" +
			"(--policy, else the project's .airlock/policy.yaml), as `airlock ci --apply` does.",
		Example: "  airlock schedule add nightly --cron \"0 6 * * 1-5\" --project ~/src/app --agent claude --prompt-file nightly.md --cost-budget 0.50\n" +
			"  airlock schedule add deps --cron @weekly -- sh -c 'go get -u ./... && go mod tidy'",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s.Name = args[0]
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				if dash != 1 {
					return usageErr("give the schedule's name, then the command after `--`: `airlock schedule add NAME --cron EXPR -- COMMAND`")
				}
				s.Command = args[1:]
			} else if len(args) > 1 {
				return usageErr("unexpected %q: put a command after `--`, e.g. `airlock schedule add %s --cron @daily -- make test`", args[1], s.Name)
			}
			if s.Cron == "" {
				return usageErr("no --cron: say when it runs, e.g. --cron \"0 6 * * 1-5\" (06:00 on weekdays) or --cron @daily")
			}
			if promptFile != "" {
				if s.Prompt != "" {
					return usageErr("give --prompt or --prompt-file, not both")
				}
				var b []byte
				var err error
				if promptFile == "-" {
					b, err = io.ReadAll(os.Stdin)
				} else {
					b, err = os.ReadFile(promptFile)
				}
				if err != nil {
					return usageErr("--prompt-file: %v", err)
				}
				s.Prompt = string(b)
			}
			if s.Prompt != "" && s.Agent == "" {
				return usageErr("--prompt needs --agent (%s)", strings.Join(harness.Names(), ", "))
			}
			if s.Agent != "" && s.BaseURL == "" {
				// As `airlock run` does: this environment's endpoint, when set.
				if ag, err := harness.Lookup(s.Agent); err == nil && ag.BaseURLEnv != "" {
					s.BaseURL = os.Getenv(ag.BaseURLEnv)
				}
			}
			var err error
			if s.Project, err = filepath.Abs(project); err != nil {
				return err
			}
			if policy != "" {
				if s.Policy, err = filepath.Abs(policy); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			added, err := c.AddSchedule(ctx, s)
			if err != nil {
				return err
			}
			return printOne(out, os.Stdout, added, func() error {
				fmt.Printf("schedule %s added: next run %s\n", added.Name, when(added.Next))
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&s.Cron, "cron", "", "when it runs: minute hour day-of-month month day-of-week, e.g. \"0 6 * * 1-5\", or @daily, @hourly, @every 2h")
	fl.StringVarP(&project, "project", "p", ".", "the project folder each run's session works on (never written until you accept)")
	fl.StringVar(&s.Agent, "agent", "", "coding agent to run: "+strings.Join(harness.Names(), ", "))
	fl.StringVar(&s.Prompt, "prompt", "", "what the agent should do")
	fl.StringVar(&promptFile, "prompt-file", "", "read the prompt from a file now (- for standard input)")
	fl.StringVar(&s.Model, "model", "", "model name (default: the agent's, or the config file's)")
	fl.StringVar(&s.BaseURL, "base-url", "", "provider endpoint, e.g. a gateway or a local model (default: $ANTHROPIC_BASE_URL or $OPENAI_BASE_URL now, then the engine's config file)")
	fl.StringVar(&s.Image, "image", "", "local image to run (default: the agents image for an agent, airlock/base for a command)")
	fl.Float64Var(&s.CostBudget, "cost-budget", 0, "pause each run's session once it cost this much, in USD")
	fl.StringVar(&policy, "policy", "", "accept policy file each run's changes are checked against (a violation is the run's outcome; the session still waits for review)")
	fl.StringVar(&s.OnDone, "on-done", "", "shell command run on this host after each run (see AIRLOCK_* above)")
	fl.BoolVar(&s.ApplyPolicy, "apply-policy", false, "accept each run's changes into the project when they pass the accept policy (held or flagged changes: the run waits for review)")
	fl.BoolVar(&s.AllowOverlap, "allow-overlap", false, "start a run even while the last one still runs (default: skip it, and log that)")
	out = addOutputFlags(cmd, "the schedule")
	return cmd
}

func scheduleLsCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the schedules with their next run and last outcome",
		Args:  cobra.NoArgs,
		RunE: listRun(g, &out, func(ctx context.Context, c *client.Client, _ []string) ([]api.Schedule, error) {
			return c.Schedules(ctx)
		}, func(list []api.Schedule) error {
			return table("NAME\tCRON\tNEXT\tLAST\tPROJECT\tWHAT", func(tw io.Writer) {
				for _, s := range list {
					last := "-"
					if s.Last != nil {
						last = s.Last.Outcome + " " + ago(s.Last.Started)
						if s.Last.Session != "" {
							last += " (" + s.Last.Session + ")"
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, when(s.Next), last, s.Project, scheduleWhat(s))
				}
			})
		}),
	}
	out = addOutputFlags(cmd, "the schedules")
	return cmd
}

func scheduleRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "rm NAME",
		ValidArgsFunction: g.completeSchedules,
		Short:             "Remove a schedule and its log (its sessions stay, for review)",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			return c.RemoveSchedule(cmd.Context(), args[0])
		},
	}
}

func scheduleRunCmd(g *globals) *cobra.Command {
	var detach bool
	var out *output
	cmd := &cobra.Command{
		Use:               "run NAME",
		ValidArgsFunction: g.completeSchedules,
		Short:             "Run a schedule now and wait for its run to end",
		Long: "Run a schedule now, besides its times, and wait for the run to end (the run goes on if\n" +
			"this command is interrupted). Exits 0 when the run is done, with the command's exit code\n" +
			"when it failed, 1 otherwise.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			if !detach && !out.wantsJSON() {
				fmt.Fprintf(os.Stderr, "airlock: schedule %s: running (Ctrl-C stops waiting, not the run)\n", args[0])
			}
			run, err := c.RunSchedule(ctx, args[0], api.ScheduleRunRequest{Wait: !detach})
			if err != nil {
				return err
			}
			if err := printOne(out, os.Stdout, run, func() error {
				fmt.Println(run.Session)
				return nil
			}); err != nil {
				return err
			}
			if detach {
				return nil
			}
			switch run.Outcome {
			case api.RunDone:
				summarize(ctx, c, run.Session)
				return nil
			case api.RunApplied:
				fmt.Fprintf(os.Stderr, "airlock: schedule %s: %d path(s) accepted into %s (they passed the accept policy)\n", run.Schedule, run.Applied, orDash(run.Session))
				return nil
			case api.RunFailed:
				fmt.Fprintf(os.Stderr, "airlock: schedule %s: the run failed%s\n", run.Schedule, orNothing(run.Error))
				summarize(ctx, c, run.Session)
				if run.ExitCode != nil && *run.ExitCode > 0 {
					return exitWith(*run.ExitCode)
				}
			default:
				fmt.Fprintf(os.Stderr, "airlock: schedule %s: %s%s\n", run.Schedule, run.Outcome, orNothing(run.Error))
				if run.Session != "" {
					summarize(ctx, c, run.Session)
				}
			}
			return exitWith(1)
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "print the run's session id once it runs, and return")
	out = addOutputFlags(cmd, "the run")
	return cmd
}

func scheduleLogCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:               "log NAME",
		ValidArgsFunction: g.completeSchedules,
		Short:             "A schedule's past runs: when, session, outcome",
		Args:              cobra.ExactArgs(1),
		RunE: listRun(g, &out, func(ctx context.Context, c *client.Client, args []string) ([]api.ScheduleRun, error) {
			return c.ScheduleRuns(ctx, args[0])
		}, func(runs []api.ScheduleRun) error {
			return table("STARTED\tDUE\tTRIGGER\tSESSION\tOUTCOME\tCHANGES\tERROR", func(tw io.Writer) {
				for _, r := range runs {
					changes := "-"
					if r.Ended != nil && r.Session != "" {
						changes = fmt.Sprint(r.Changed)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Started.Local().Format("2006-01-02 15:04:05"), r.Due.Local().Format("2006-01-02 15:04"),
						r.Trigger, orDash(r.Session), r.Outcome, changes, orDash(oneLine(r.Error)))
				}
			})
		}),
	}
	out = addOutputFlags(cmd, "the runs")
	return cmd
}

// when shows a schedule's next time.
func when(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Local().Format("Mon 2006-01-02 15:04")
}

// scheduleWhat says what a schedule runs.
func scheduleWhat(s api.Schedule) string {
	if len(s.Command) > 0 {
		return shellQuote(s.Command)
	}
	return s.Agent + ": " + oneLine(s.Prompt)
}

// oneLine is text's first line, cut short.
func oneLine(text string) string {
	text, _, more := strings.Cut(strings.TrimSpace(text), "\n")
	if len(text) > 60 {
		text, more = text[:57], true
	}
	if more {
		text += "…"
	}
	return text
}

func orNothing(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// completeSchedules offers the schedules' names, for the first argument.
func (g *globals) completeSchedules(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	list, err := client.New(g.engine).Schedules(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, s := range list {
		out = append(out, cobra.CompletionWithDesc(s.Name, s.Cron+" "+s.Project))
	}
	return matching(out, toComplete, args), cobra.ShellCompDirectiveNoFileComp
}
