package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/airlock/airlock/ci"
	"github.com/airlock/airlock/daemon"
	"github.com/airlock/airlock/harness"
	"github.com/airlock/airlock/names"
	"github.com/spf13/cobra"
)

func ciCmd(g *globals) *cobra.Command {
	f := &createFlags{}
	af := &agentFlags{}
	var policy, out string
	var apply, keep, requireClean, patchPerTurn bool
	cmd := &cobra.Command{
		Use:   "ci [flags] (--agent NAME --prompt-file FILE | -- COMMAND...)",
		Short: "For CI: task to patch and verdict in one process (no daemon), with documented exit codes",
		Long: `Run the whole flow for a CI job in this process, with an engine of its
own (nothing is left running): a session over the checkout, the agent's
turn (or a command), the review under the accept policy and its scanners,
then out/changes.patch, out/verdict.json and a markdown summary (to
$GITHUB_STEP_SUMMARY when set, else out/summary.md). --apply also writes
the changes that need no human into the checkout.

Exit codes: 0 success, 1 the agent or command failed, 2 changes held for a
human, 3 policy violation (a scanner finding), 4 infrastructure error,
64 invalid input, 73 out/ not writable. docs/CI.md has the verdict's
format.`,
		Example: "  airlock ci --project . --agent claude --prompt-file task.md --policy .airlock/ci.yaml --out out/\n" +
			"  airlock ci --apply --out out/ -- make fmt",
		RunE: func(cmd *cobra.Command, args []string) error {
			o := ci.Options{Project: f.project, Command: args, PolicyFile: policy, Out: out, Apply: apply, Keep: keep,
				RequireClean: requireClean, PatchPerTurn: patchPerTurn, Summary: os.Getenv("GITHUB_STEP_SUMMARY"), Progress: os.Stderr}
			if os.Getenv("AIRLOCK_DEBUG") != "" {
				o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
			}
			var err error
			if o.Create, err = f.request(); err != nil {
				o.InputError = err
			}
			if af.agent != "" && o.InputError == nil {
				if o.Agent, err = af.request(af.prompt); err != nil {
					o.InputError = err
				} else if ag, err := harness.Lookup(af.agent); err == nil && ag.KeyEnv != "" {
					o.Agent.APIKey = os.Getenv(ag.KeyEnv)
				}
			}
			if o.Defaults, err = daemon.LoadConfig(envOr("AIRLOCK_CONFIG", daemon.DefaultConfig), os.Getenv("AIRLOCK_CONFIG") != ""); err != nil && o.InputError == nil {
				o.InputError = err
			}
			v := ci.Run(cmd.Context(), o)
			if af.json {
				json.NewEncoder(os.Stdout).Encode(v)
			}
			fmt.Fprintf(os.Stderr, "airlock ci: %s: %s\n", v.Outcome, names.Safe(v.Message))
			if v.ExitCode != 0 {
				return &exitError{code: v.ExitCode}
			}
			return nil
		},
	}
	f.add(cmd)
	af.add(cmd, true)
	fl := cmd.Flags()
	fl.Lookup("json").Usage = "also print the verdict on standard output"
	fl.StringVar(&policy, "policy", "", "accept policy file (default: the project's .airlock/policy.yaml)")
	fl.StringVarP(&out, "out", "o", "out", "where changes.patch, verdict.json and summary.md go")
	fl.BoolVar(&apply, "apply", false, "write the changes that need no human into the checkout")
	fl.BoolVar(&keep, "keep", false, "leave the session and its state for debugging")
	fl.BoolVar(&requireClean, "require-clean", false, "refuse a checkout with uncommitted changes")
	fl.BoolVar(&patchPerTurn, "patch-per-turn", false, "also write out/turn-N.patch: what each agent turn changed")
	return cmd
}
