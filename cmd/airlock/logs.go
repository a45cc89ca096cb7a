package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
	"github.com/spf13/cobra"
)

// followEvery is how often `logs -f` asks the engine: it records a
// running command's output about once a second.
const followEvery = time.Second

func logsCmd(g *globals) *cobra.Command {
	var follow bool
	var out *output
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Show what ran in a session, with exit codes and output",
		Long: "Show what ran in a session: every command with its exit code and output, and the\n" +
			"session's pauses and resumes. With -f, keep printing new commands and output until\n" +
			"the session stops or is removed (or Ctrl-C); --json and --format then print each\n" +
			"command once it has ended, one per line.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			if follow {
				return followLogs(ctx, c, args[0], out, os.Stdout)
			}
			cmds, err := c.Commands(ctx, args[0], true)
			if err != nil {
				return err
			}
			return printList(out, os.Stdout, cmds, func() error {
				life, _ := c.Lifecycle(ctx, args[0])
				v := &logView{w: os.Stdout, life: life}
				for _, x := range cmds {
					v.command(x)
				}
				v.lifeUntil(time.Time{})
				if len(cmds) == 0 {
					fmt.Fprintln(os.Stderr, "nothing has run in this session yet")
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new commands and output until the session stops")
	out = addOutputFlags(cmd, "the commands")
	return cmd
}

// logView prints a session's commands, with its pauses and resumes
// between them by time.
type logView struct {
	w    io.Writer
	life []api.LifecycleEvent // not yet printed, oldest first
}

// lifeUntil prints the pauses and resumes before t (all for a zero t).
func (v *logView) lifeUntil(t time.Time) {
	for len(v.life) > 0 && (t.IsZero() || v.life[0].Time.Before(t)) {
		l := v.life[0]
		fmt.Fprintf(v.w, "-- %s %s (%s)\n", l.Time.Format("2006-01-02 15:04:05"), l.Kind, l.Reason)
		v.life = v.life[1:]
	}
}

// command prints a command's header line and its output.
func (v *logView) command(x api.Command) {
	v.header(x)
	if x.Output != "" {
		fmt.Fprint(v.w, x.Output)
		if !strings.HasSuffix(x.Output, "\n") {
			fmt.Fprintln(v.w)
		}
	}
}

// header prints "#ID time $ argv  (status, took, cpu)".
func (v *logView) header(x api.Command) {
	v.lifeUntil(x.Started)
	fmt.Fprintf(v.w, "#%d %s $ %s  (%s)\n", x.ID, x.Started.Format("2006-01-02 15:04:05"), shellQuote(x.Argv), commandStatus(x))
}

func commandStatus(x api.Command) string {
	status := x.State
	if x.ExitCode != nil {
		status = fmt.Sprintf("exit %d", *x.ExitCode)
	}
	if x.Ended != nil {
		status += ", " + x.Ended.Sub(x.Started).Round(time.Millisecond).String()
	}
	if x.CPUSeconds > 0 {
		status += fmt.Sprintf(", cpu %.2fs", x.CPUSeconds)
	}
	return status
}

// followLogs prints what ran in the session and then what runs, until the
// session stops or is removed, or ctx ends (Ctrl-C). It asks the engine
// every followEvery for the commands not yet seen to end.
func followLogs(ctx context.Context, c *client.Client, id string, out *output, w io.Writer) error {
	f := &follower{view: logView{w: w}, out: out, printed: map[int64]*tailMark{}}
	for {
		sess, err := c.Session(ctx, id)
		gone := errdefs.IsNotFound(err)
		if err != nil && !gone {
			return err
		}
		if !gone {
			id = sess.ID // a prefix the user gave stays valid after others appear
			if err := f.poll(ctx, c, id); err != nil {
				if errdefs.IsNotFound(err) {
					gone = true
				} else {
					return err
				}
			}
		}
		switch {
		case gone:
			f.say("-- session %s was removed", id)
			return nil
		case sess.State == api.StateStopped || sess.State == api.StateFailed:
			f.say("-- session %s %s", sess.ID, sess.State)
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followEvery):
		}
	}
}

// follower is the state of `logs -f` between two looks at the engine.
type follower struct {
	view logView
	out  *output
	// since is the first command not yet seen to end.
	since int64
	// printed is, per command seen but not settled, how far its output
	// was printed (n < 0: all of it, the command has ended).
	printed map[int64]*tailMark
	// lifeSeen counts the pauses and resumes already printed.
	lifeSeen int
}

// tailMark is how far a command's output was printed: the length printed
// and its last bytes, to find the place again once the engine keeps only
// the head and tail of a long output.
type tailMark struct {
	n    int
	last []byte
}

const tailMarkSize = 4 << 10

func (f *follower) say(format string, args ...any) {
	if !f.out.custom() {
		fmt.Fprintf(f.view.w, format+"\n", args...)
	}
}

// poll prints what changed since the last look.
func (f *follower) poll(ctx context.Context, c *client.Client, id string) error {
	cmds, err := c.CommandsSince(ctx, id, f.since, true)
	if err != nil {
		return err
	}
	custom := f.out.custom()
	if !custom {
		life, err := c.Lifecycle(ctx, id)
		if err != nil {
			return err
		}
		f.view.life = life[min(f.lifeSeen, len(life)):]
	}
	fresh := len(f.view.life)
	settled := true // every command so far has ended
	for _, x := range cmds {
		if x.ID < f.since {
			continue // an engine below API level 1 ignores since
		}
		ended := x.State != "running"
		if mark := f.printed[x.ID]; mark == nil || mark.n >= 0 {
			if !custom {
				f.text(x, ended)
			} else if ended {
				if err := printList(f.out, f.view.w, []api.Command{x}, nil); err != nil {
					return err
				}
				f.printed[x.ID] = &tailMark{n: -1}
			}
		}
		if settled && ended {
			f.since = x.ID + 1
			delete(f.printed, x.ID)
		} else {
			settled = false
		}
	}
	if settled {
		f.view.lifeUntil(time.Time{})
	}
	f.lifeSeen += fresh - len(f.view.life)
	return nil
}

// text prints a command's header when first seen and the output it has
// recorded since the last look; a running command gets a line when it
// ends.
func (f *follower) text(x api.Command, ended bool) {
	mark := f.printed[x.ID]
	if mark == nil {
		if ended {
			f.view.command(x)
			f.printed[x.ID] = &tailMark{n: -1}
			return
		}
		f.view.header(x)
		mark = &tailMark{}
		f.printed[x.ID] = mark
	}
	fmt.Fprint(f.view.w, mark.advance(x.Output, x.Truncated))
	if ended {
		if mark.n > 0 && !bytes.HasSuffix(mark.last, []byte("\n")) {
			fmt.Fprintln(f.view.w)
		}
		fmt.Fprintf(f.view.w, "#%d ended (%s)\n", x.ID, commandStatus(x))
		mark.n = -1
	}
}

// advance returns the part of output not printed yet. While the engine
// keeps a command's whole output that is what follows the length
// printed; once it keeps only head and tail, it is what follows the last
// bytes printed, found again in the tail (or the whole tail, after a note,
// if the output outran the tail between two looks).
func (m *tailMark) advance(output string, truncated bool) string {
	var fresh string
	switch {
	case !truncated && len(output) >= m.n:
		fresh = output[m.n:]
	case len(m.last) > 0 && strings.LastIndex(output, string(m.last)) >= 0:
		fresh = output[strings.LastIndex(output, string(m.last))+len(m.last):]
	default:
		_, tail, _ := strings.Cut(output, "[... output truncated by airlock ...]\n")
		fresh = "[... output skipped by airlock: it came faster than `logs -f` reads ...]\n" + tail
	}
	m.n += len(fresh)
	m.last = append(m.last, fresh...)
	if over := len(m.last) - tailMarkSize; over > 0 {
		m.last = append(m.last[:0], m.last[over:]...)
	}
	return fresh
}

func shellQuote(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]{}!#~") {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}
