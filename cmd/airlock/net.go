package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/spf13/cobra"
)

// netFlags are the network policy flags of `run`.
type netFlags struct {
	mode    string
	allow   []string
	deny    []string
	inject  []string
	inspect []string
	private bool
	ask     time.Duration
}

func (f *netFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.mode, "net", "", "network policy: allow-all, deny-all, custom, or ask (what no rule decides waits for `airlock net decide`) (default custom: model APIs and package registries; see the config file)")
	fl.StringArrayVar(&f.allow, "allow", nil, "let the session reach this: example.com, *.example.com, 198.51.100.0/24, each with an optional :PORT; or a request: 'GET api.example.com/repos/**' (HTTPS needs --inspect for the host) (repeatable)")
	fl.StringArrayVar(&f.deny, "deny", nil, "never let the session reach this (same forms; beats --allow; repeatable)")
	fl.StringArrayVar(&f.inspect, "inspect", nil, "end TLS to this host at the proxy (with the engine's CA, which the session trusts) so method/path rules apply to its HTTPS requests (repeatable)")
	fl.BoolVar(&f.private, "allow-private", false, "let allowed rules reach private, loopback and link-local addresses (blocked otherwise)")
	fl.StringArrayVar(&f.inject, "inject", nil, "add a header holding a secret to a host's requests in transit, e.g. 'api.example.com:x-api-key=secret:API_KEY' (repeatable; the session never sees the secret)")
	fl.DurationVar(&f.ask, "ask-timeout", 0, "under --net ask, how long a question waits for an answer before it is a deny (default 60s, at most 1h)")
}

// policy is the session's policy, or nil for the engine's default.
// Without --net, the rules add to the default policy.
func (f *netFlags) policy() *api.EgressPolicy {
	if f.mode == "" && len(f.allow) == 0 && len(f.deny) == 0 && len(f.inject) == 0 && len(f.inspect) == 0 && !f.private && f.ask == 0 {
		return nil
	}
	return &api.EgressPolicy{Mode: f.mode, Allow: f.allow, Deny: f.deny, Private: f.private, Inject: f.inject, Inspect: f.inspect, AskTimeout: f.ask}
}

func policyCmd(g *globals) *cobra.Command {
	var mode string
	var allow, deny, inject, inspect []string
	var private, noPrivate bool
	var ask time.Duration
	var out *output
	cmd := &cobra.Command{
		Use:   "policy ID",
		Short: "Show or change a running session's network policy (effective for new connections at once)",
		Example: "  airlock policy 3f2a --allow docs.example.org\n" +
			"  airlock policy 3f2a --deny '*.tracker.example' --net allow-all\n" +
			"  airlock policy 3f2a --inspect api.github.com --allow 'GET api.github.com/repos/**' --deny 'POST api.github.com/**'",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			ch := api.PolicyChange{Mode: mode, Allow: allow, Deny: deny, Inject: inject, Inspect: inspect, AskTimeout: ask}
			if private || noPrivate {
				v := private
				ch.Private = &v
			}
			var p api.EgressPolicy
			if ch.Mode == "" && len(allow) == 0 && len(deny) == 0 && len(inject) == 0 && len(inspect) == 0 && ch.Private == nil && ask == 0 {
				s, err := c.Session(ctx, args[0])
				if err != nil {
					return err
				}
				if s.Egress == nil {
					return fmt.Errorf("session %s has no network policy", s.ID)
				}
				p = *s.Egress
			} else if p, err = c.Policy(ctx, args[0], ch); err != nil {
				return err
			}
			return printOne(out, os.Stdout, p, func() error { printPolicy(p); return nil })
		},
	}
	out = addOutputFlags(cmd, "the policy")
	cmd.Flags().StringVar(&mode, "net", "", "allow-all, deny-all, custom or ask")
	cmd.Flags().StringArrayVar(&allow, "allow", nil, "add an allow rule (repeatable)")
	cmd.Flags().StringArrayVar(&deny, "deny", nil, "add a deny rule (repeatable)")
	cmd.Flags().StringArrayVar(&inject, "inject", nil, "add a secret injection, HOST:HEADER=...secret:NAME... (repeatable)")
	cmd.Flags().StringArrayVar(&inspect, "inspect", nil, "end TLS to this host at the proxy so method/path rules apply to it (repeatable)")
	cmd.Flags().BoolVar(&private, "allow-private", false, "let allowed rules reach private addresses")
	cmd.Flags().BoolVar(&noPrivate, "no-private", false, "block private addresses again")
	cmd.Flags().DurationVar(&ask, "ask-timeout", 0, "under --net ask, how long a question waits for an answer before it is a deny")
	cmd.AddCommand(policySaveCmd(g))
	return cmd
}

// policySaveCmd writes a session's policy into its project's policy file.
func policySaveCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:     "save ID",
		Short:   "Write the session's network policy into its project's .airlock/policy.yaml (section egress), for review and commit; new sessions of the project start from it",
		Example: "  airlock policy save 3f2a && git diff .airlock/policy.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			saved, err := c.SavePolicy(ctx, args[0])
			if err != nil {
				return err
			}
			return printOne(out, os.Stdout, saved, func() error {
				fmt.Printf("saved in %s:\n", saved.File)
				printPolicy(saved.Policy)
				return nil
			})
		},
	}
	out = addOutputFlags(cmd, "what was saved")
	return cmd
}

func printPolicy(p api.EgressPolicy) {
	fmt.Printf("mode: %s\n", p.Mode)
	if p.AskTimeout > 0 {
		fmt.Printf("ask timeout: %s\n", p.AskTimeout)
	}
	if p.Private {
		fmt.Println("private addresses: allowed where a rule allows them")
	}
	for _, r := range p.Allow {
		fmt.Printf("allow %s\n", r)
	}
	for _, r := range p.Deny {
		fmt.Printf("deny  %s\n", r)
	}
	for _, r := range p.Inject {
		fmt.Printf("inject %s\n", r)
	}
	for _, r := range p.Inspect {
		fmt.Printf("inspect %s\n", r)
	}
}

func netCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "net", Short: "A session's connections: the log, allowing what was blocked, and answering what --net ask holds"}
	var blocked bool
	var limit int
	var out *output
	logc := &cobra.Command{
		Use:   "log ID",
		Short: "Every connection of the session: time, host, port, bytes, decision, rule",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			log, err := c.NetLog(ctx, args[0], blocked, limit)
			if err != nil {
				return err
			}
			if out.custom() {
				return printList(out, os.Stdout, log, nil)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "#\tTIME\tKIND\tHOST\tPORT\tOUT\tIN\tDECISION\tRULE")
			for _, e := range log {
				dec := "allowed"
				if !e.Allowed {
					dec = "BLOCKED"
				}
				port := ""
				if e.Port > 0 {
					port = fmt.Sprint(e.Port)
				}
				host := e.Host
				if e.Method != "" { // a request the proxy read
					host = e.Method + " " + e.Host + e.Path
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Time.Local().Format(time.TimeOnly), e.Kind, host, port,
					bytesText(e.BytesOut), bytesText(e.BytesIn), dec, e.Rule)
				if !e.Allowed && e.Reason != "" {
					fmt.Fprintf(tw, "\t\t\t  %s\t\t\t\t\t\n", e.Reason)
				}
			}
			tw.Flush()
			if !blocked && len(log) > 0 {
				fmt.Fprintf(os.Stderr, "allow a blocked one with `airlock net allow %s --from-log #`\n", args[0])
			}
			return nil
		},
	}
	logc.Flags().BoolVar(&blocked, "blocked", false, "only what was blocked")
	out = addOutputFlags(logc, "the connections (JSON lines)")
	out.lines = true
	logc.Flags().IntVar(&limit, "limit", 0, "only the last N")
	var from int64
	allow := &cobra.Command{
		Use:     "allow ID --from-log N",
		Short:   "Allow what log entry N was blocked for",
		Example: "  airlock net allow 3f2a --from-log 7",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from <= 0 {
				return usageErr("give the log entry to allow with --from-log N (see `airlock net log %s --blocked`)", args[0])
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			p, err := c.Policy(ctx, args[0], api.PolicyChange{FromLog: from})
			if err != nil {
				return err
			}
			printPolicy(p)
			return nil
		},
	}
	allow.Flags().Int64Var(&from, "from-log", 0, "the log entry (#) to allow")
	cmd.AddCommand(logc, allow, pendingCmd(g), decideCmd(g))
	return cmd
}

// pendingCmd lists what sessions under --net ask wait on.
func pendingCmd(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "What sessions under --net ask are waiting on: session, method, host, path",
		Args:  cobra.NoArgs,
		RunE: listRun(g, &out, func(ctx context.Context, c *client.Client, _ []string) ([]api.PendingQuestion, error) {
			return c.Pending(ctx)
		}, func(list []api.PendingQuestion) error {
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "#\tSESSION\tWAITING\tKIND\tMETHOD\tHOST\tPATH")
			for _, q := range list {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", q.ID, q.Session, time.Since(q.Time).Round(time.Second), q.Kind, q.Method,
					net.JoinHostPort(q.Host, strconv.Itoa(q.Port)), q.Path)
			}
			tw.Flush()
			if len(list) > 0 {
				fmt.Fprintln(os.Stderr, "answer with `airlock net decide # --allow-once|--allow-always|--deny`")
			}
			return nil
		}),
	}
	out = addOutputFlags(cmd, "the questions (JSON lines)")
	out.lines = true
	return cmd
}

// decideCmd answers one pending question.
func decideCmd(g *globals) *cobra.Command {
	var once, always, deny bool
	cmd := &cobra.Command{
		Use:     "decide N (--allow-once | --allow-always | --deny)",
		Short:   "Answer question N of `airlock net pending`",
		Example: "  airlock net decide 3 --allow-always",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || n <= 0 {
				return usageErr("%q is not a question number: see `airlock net pending`", args[0])
			}
			answers := map[string]bool{"allow-once": once, "allow-always": always, "deny": deny}
			answer := ""
			for a, set := range answers {
				if set {
					if answer != "" {
						return usageErr("give one of --allow-once, --allow-always or --deny")
					}
					answer = a
				}
			}
			if answer == "" {
				return usageErr("give one of --allow-once, --allow-always or --deny")
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			return c.Decide(ctx, api.Decide{ID: n, Answer: answer})
		},
	}
	cmd.Flags().BoolVar(&once, "allow-once", false, "let this connection or request through; the next is asked again")
	cmd.Flags().BoolVar(&always, "allow-always", false, "let it through and add its host and port to the session's running policy")
	cmd.Flags().BoolVar(&deny, "deny", false, "refuse it")
	return cmd
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fk", float64(n)/(1<<10))
	}
	return fmt.Sprint(n)
}
