package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/harness"
	"github.com/airlock/airlock/names"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// agentFlags are the flags of an agent turn, on `run` and `agent`.
type agentFlags struct {
	agent      string
	prompt     string
	promptFile string
	model      string
	baseURL    string
	schema     string
	cmd        string
	events     string
	json       bool
	newConv    bool
}

func (f *agentFlags) add(cmd *cobra.Command, run bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.agent, "agent", "", "coding agent to run: "+strings.Join(harness.Names(), ", ")+" (custom runs --cmd)")
	if run {
		fl.StringVar(&f.prompt, "prompt", "", "what the agent should do")
	}
	fl.StringVar(&f.promptFile, "prompt-file", "", "read the prompt from a file (- for standard input)")
	fl.StringVar(&f.model, "model", "", "model name (default: the agent's, or the config file's)")
	fl.StringVar(&f.baseURL, "base-url", "", "provider endpoint, e.g. a gateway or a local model (default: $ANTHROPIC_BASE_URL or $OPENAI_BASE_URL, then the config file)")
	fl.StringVar(&f.schema, "schema", "", "JSON Schema file the agent's final answer must match (one retry, then an error)")
	fl.StringVar(&f.cmd, "cmd", "", "for --agent custom: the command line, with {prompt} where the prompt goes")
	fl.StringVar(&f.events, "events", "", "for --agent custom: how to read its output, jsonl (Airlock events) or text (default)")
	fl.BoolVar(&f.json, "json", false, "print the agent's events as JSON lines instead of progress")
	if !run {
		fl.BoolVar(&f.newConv, "new", false, "start a new conversation instead of continuing the last one")
	}
}

// request builds the turn's request; the API key and endpoint come from
// this environment when set, otherwise from the engine's secrets and
// config.
func (f *agentFlags) request(prompt string) (api.AgentRequest, error) {
	req := api.AgentRequest{Agent: f.agent, Model: f.model, BaseURL: f.baseURL, Cmd: f.cmd, Events: f.events, New: f.newConv}
	if f.promptFile != "" {
		if prompt != "" {
			return req, usageErr("give the prompt as an argument or with --prompt-file, not both")
		}
		var b []byte
		var err error
		if f.promptFile == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(f.promptFile)
		}
		if err != nil {
			return req, usageErr("--prompt-file: %v", err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return req, usageErr("no prompt: give one (--prompt \"...\" or --prompt-file FILE)")
	}
	req.Prompt = prompt
	if f.schema != "" {
		b, err := os.ReadFile(f.schema)
		if err != nil {
			return req, usageErr("--schema: %v", err)
		}
		if !json.Valid(b) {
			return req, usageErr("--schema %s is not JSON: give a JSON Schema document", f.schema)
		}
		req.Schema = b
	}
	if f.agent != "" {
		ag, err := harness.Lookup(f.agent)
		if err != nil {
			return req, usageErr("%v", err)
		}
		if ag.KeyEnv != "" {
			req.APIKey = os.Getenv(ag.KeyEnv)
		}
		if req.BaseURL == "" && ag.BaseURLEnv != "" {
			req.BaseURL = os.Getenv(ag.BaseURLEnv)
		}
	}
	return req, nil
}

// runTurn runs one turn and shows it; it returns the exit code the CLI
// ends with (0 when the turn is done, 1 when it failed).
func runTurn(ctx context.Context, c *client.Client, id string, req api.AgentRequest, asJSON bool) (int, error) {
	if req.Agent == "" {
		// Continuing: the key and endpoint of the session's last agent.
		if turns, err := c.Turns(ctx, id); err == nil && len(turns) > 0 {
			if ag, err := harness.Lookup(turns[len(turns)-1].Agent); err == nil {
				if ag.KeyEnv != "" {
					req.APIKey = os.Getenv(ag.KeyEnv)
				}
				if req.BaseURL == "" && ag.BaseURLEnv != "" {
					req.BaseURL = os.Getenv(ag.BaseURLEnv)
				}
			}
		}
	}
	show := newTurnView(os.Stdout, os.Stderr, asJSON)
	if len(req.Schema) > 0 && !asJSON {
		// Standard output is for the structured result alone.
		show.out = os.Stderr
	}
	stop := show.tick()
	turn, err := c.Agent(ctx, id, req, show.event)
	stop()
	show.clear()
	if err != nil {
		return 1, err
	}
	show.summary(turn)
	if turn.State != "done" {
		fmt.Fprintf(os.Stderr, "airlock: turn %d failed: %s\n", turn.N, turn.Error)
		return 1, nil
	}
	if len(req.Schema) > 0 && !asJSON {
		fmt.Println(string(turn.Result))
	}
	return 0, nil
}

func agentCmd(g *globals) *cobra.Command {
	f := &agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent ID [PROMPT]",
		Short: "Give a session's agent its next prompt (same conversation, same workspace)",
		Example: "  airlock agent 3f2a \"Now add a test for the empty input case\"\n" +
			"  airlock agent 3f2a --agent codex --prompt-file review.md",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt := ""
			if len(args) == 2 {
				prompt = args[1]
			}
			req, err := f.request(prompt)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			code, err := runTurn(ctx, c, args[0], req, f.json)
			if err != nil {
				return err
			}
			return exitWith(code)
		},
	}
	f.add(cmd, false)
	return cmd
}

func eventsCmd(g *globals) *cobra.Command {
	var turn int
	var out *output
	cmd := &cobra.Command{
		Use:   "events ID",
		Short: "What the session's agents did, turn by turn",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			evs, err := c.Events(ctx, args[0], turn)
			if err != nil {
				return err
			}
			return printList(out, os.Stdout, evs, func() error {
				show := newTurnView(os.Stdout, os.Stdout, false)
				show.tty, show.color = false, false
				for _, ev := range evs {
					if ev.Type == api.EventTurnDone {
						fmt.Printf("── turn %d done%s\n", ev.Turn, usageText(ev.Usage))
						continue
					}
					show.event(ev)
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&turn, "turn", 0, "only this turn")
	out = addOutputFlags(cmd, "the events (JSON lines)")
	out.lines = true
	return cmd
}

func secretCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "secret", Short: "API keys kept by the engine on the host, never in a session's records"}
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "Store a secret; the value is read from standard input (not echoed on a terminal)",
		Example: "  airlock secret set ANTHROPIC_API_KEY\n" +
			"  printf %s \"$KEY\" | airlock secret set OPENAI_API_KEY",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var value []byte
			var err error
			if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
				fmt.Fprintf(os.Stderr, "%s: ", args[0])
				value, err = term.ReadPassword(fd)
				fmt.Fprintln(os.Stderr)
			} else {
				value, err = io.ReadAll(io.LimitReader(os.Stdin, 64<<10))
			}
			if err != nil {
				return err
			}
			v := strings.TrimRight(string(value), "\r\n")
			if v == "" {
				return usageErr("no value given for %s: type it, or pipe it in", args[0])
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			if err := c.SetSecret(ctx, args[0], v); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "airlock: stored %s\n", args[0])
			return nil
		},
	}
	var lsOut *output
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List stored secrets (names only)",
		Args:  cobra.NoArgs,
		RunE: listRun(g, &lsOut, func(ctx context.Context, c *client.Client, _ []string) ([]api.Secret, error) {
			return c.Secrets(ctx)
		}, func(list []api.Secret) error {
			for _, s := range list {
				fmt.Printf("%s\t%s\n", s.Name, s.Updated.Local().Format(time.DateTime))
			}
			return nil
		}),
	}
	lsOut = addOutputFlags(ls, "the secrets' names")
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a stored secret",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			return c.DeleteSecret(ctx, args[0])
		},
	}
	cmd.AddCommand(set, ls, rm)
	return cmd
}

// turnView shows a turn's events: progress lines (with a status line on a
// terminal) or JSON lines.
type turnView struct {
	mu        sync.Mutex
	out, errw io.Writer
	json      bool
	tty       bool // a status line on errw
	color     bool // ANSI colours on errw
	start     time.Time
	files     map[string]bool
	usage     harness.Usage
	tool      string
	status    bool
}

func newTurnView(out, errw *os.File, asJSON bool) *turnView {
	tty := term.IsTerminal(int(errw.Fd())) && !asJSON
	return &turnView{out: out, errw: errw, json: asJSON, tty: tty, color: tty && colorOn(errw), start: time.Now(), files: map[string]bool{}}
}

// tick keeps the status line's clock going between events.
func (v *turnView) tick() (stop func()) {
	if !v.tty {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				v.mu.Lock()
				v.clearLocked()
				v.statusLine()
				v.mu.Unlock()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

func (v *turnView) clear() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clearLocked()
}

func (v *turnView) clearLocked() {
	if v.status {
		fmt.Fprint(v.errw, "\r\x1b[K")
		v.status = false
	}
}

func (v *turnView) paint(color, s string) string {
	if !v.color {
		return s
	}
	return "\x1b[" + color + "m" + s + "\x1b[0m"
}

func (v *turnView) event(ev api.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.json {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(v.out, string(b))
		return
	}
	v.clearLocked()
	switch ev.Type {
	case api.EventMessage:
		fmt.Fprintln(v.out, strings.TrimRight(ev.Text, "\n"))
	case api.EventToolCall:
		v.tool = ev.Tool
		fmt.Fprintln(v.errw, v.paint("2", "  ▸ "+ev.Tool+" "+ev.Input))
	case api.EventFileEdit:
		v.files[ev.Path] = true
		fmt.Fprintln(v.errw, v.paint("36", "  ✎ "+names.Quote(ev.Path)))
	case api.EventCommand:
		code := "?"
		if ev.ExitCode != nil {
			code = fmt.Sprint(*ev.ExitCode)
		}
		color := "2"
		if code != "0" {
			color = "33"
		}
		fmt.Fprintln(v.errw, v.paint(color, "  $ "+ev.Command+"  → exit "+code))
	case api.EventUsage:
		if ev.Usage != nil {
			v.usage.Add(harness.Usage(*ev.Usage))
		}
	case api.EventError:
		fmt.Fprintln(v.errw, v.paint("31", "  ! "+ev.Text))
	}
	if ev.Type != api.EventTurnDone {
		v.statusLine()
	}
}

// statusLine shows, on a terminal, the time, the current tool, the files
// touched and the tokens so far.
func (v *turnView) statusLine() {
	if !v.tty {
		return
	}
	tool := ""
	if v.tool != "" {
		tool = " · " + v.tool
	}
	fmt.Fprintf(v.errw, "%s", v.paint("2", fmt.Sprintf("  … %s%s · %d file(s) · %s tokens", time.Since(v.start).Round(time.Second), tool, len(v.files), kilo(v.usage.InputTokens+v.usage.OutputTokens))))
	v.status = true
}

func (v *turnView) summary(t api.Turn) {
	if v.json {
		return
	}
	fmt.Fprintf(os.Stderr, "airlock: turn %d (%s) %s in %s: %d file(s) edited%s\n", t.N, t.Agent, t.State,
		time.Since(v.start).Round(100*time.Millisecond), len(v.files), usageText(&t.Usage))
}

func usageText(u *api.Usage) string {
	if u == nil || u.InputTokens+u.OutputTokens == 0 {
		return ""
	}
	s := fmt.Sprintf(", %s tokens in, %s out", kilo(u.InputTokens), kilo(u.OutputTokens))
	if u.CostUSD > 0 {
		s += fmt.Sprintf(", $%.4f", u.CostUSD)
	}
	return s
}

func kilo(n int64) string {
	if n >= 10000 {
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}
