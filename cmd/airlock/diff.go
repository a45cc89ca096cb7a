package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/names"
	"github.com/spf13/cobra"
)

func diffCmd(g *globals) *cobra.Command {
	var stat, asJSON, patch, blame, ignoredOnly, noIgnore, generated bool
	var color string
	var q api.CheckpointDiffQuery
	cmd := &cobra.Command{
		Use:   "diff ID [PATH...]",
		Short: "Show a session's changes against the current project",
		Long: "Show what the session changed, as a unified diff against the project as it is now.\n" +
			"--patch prints a patch that `git apply` applies to the project; --json gives every file and hunk.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if color != "auto" && color != "always" && color != "never" {
				return usageErr("--color %q: give auto, always or never", color)
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			id, paths := args[0], args[1:]
			byTurn := q != (api.CheckpointDiffQuery{}) || cmd.Flags().Changed("from") || cmd.Flags().Changed("to")
			if byTurn && (patch || len(paths) > 0) {
				return usageErr("--turn, --from and --to show whole checkpoints: leave out --patch and paths")
			}
			if blame && (byTurn || patch || stat) {
				return usageErr("--blame annotates the session's whole diff: leave out --turn, --from, --to, --patch and --stat")
			}
			if ignoredOnly && noIgnore {
				return usageErr("--ignored lists only the ignored changes, --no-ignore lists them with the rest: give one")
			}
			dq := api.DiffQuery{Paths: paths}
			switch {
			case ignoredOnly:
				dq.Ignored = api.IgnoredModeOnly
			case noIgnore:
				dq.Ignored = api.IgnoredModeAll
			}
			if (byTurn || patch || blame) && dq.Ignored != "" {
				return usageErr("--ignored and --no-ignore choose what a diff of the session lists: leave out --turn, --from, --to, --patch and --blame")
			}
			if patch {
				return c.Patch(ctx, id, paths, os.Stdout)
			}
			if blame {
				b, err := c.Blame(ctx, id, paths)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(os.Stdout, b, true)
				}
				out := bufio.NewWriterSize(os.Stdout, 64<<10)
				defer out.Flush()
				return printBlame(out, b)
			}
			colored := color == "always" || color == "auto" && colorOn(os.Stdout)
			if stat && !asJSON && !byTurn {
				return diffStat(ctx, c, id, dq, colored)
			}
			if asJSON && !byTurn {
				out := bufio.NewWriterSize(os.Stdout, 64<<10)
				if err := printDiffJSON(ctx, c, id, dq, out); err != nil {
					return err
				}
				return out.Flush()
			}
			get := func(ctx context.Context, id string, _ []string) (api.Diff, error) { return c.DiffOf(ctx, id, dq) }
			if byTurn {
				get = func(ctx context.Context, id string, _ []string) (api.Diff, error) {
					return c.CheckpointDiff(ctx, id, q)
				}
			}
			d, err := get(ctx, id, paths)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(d)
			}
			out := bufio.NewWriterSize(os.Stdout, 64<<10)
			defer out.Flush()
			printCommits(out, d.Commits)
			if stat {
				printStat(out, d, colored)
			} else if err := printUnified(out, foldGenerated(d.Files, generated), colored); err != nil {
				return err
			}
			out.Flush()
			diffEnd(len(d.Stats), d)
			printIgnored(os.Stderr, id, d)
			return nil
		},
	}
	cmd.Flags().BoolVar(&stat, "stat", false, "summary: one line per path with added and removed lines")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: every file with kind, modes, sizes and hunks")
	cmd.Flags().BoolVar(&patch, "patch", false, "print a git-apply compatible patch")
	cmd.Flags().StringVar(&color, "color", "auto", "color: auto, always or never")
	cmd.Flags().BoolVar(&ignoredOnly, "ignored", false, "list only the changes the project's ignore rules (.gitignore, info/exclude, core.excludesFile) or the session's own rules cover")
	cmd.Flags().BoolVar(&noIgnore, "no-ignore", false, "list every change, ignored ones marked (by default they are counted, not listed)")
	cmd.Flags().BoolVar(&generated, "generated", false, "show the hunks of generated files (lockfiles, linguist-generated) instead of folding them")
	cmd.Flags().BoolVar(&blame, "blame", false, "name beside each hunk the checkpoint (turn or command) that last changed it and the agent's tool call that made it")
	cmd.Flags().IntVar(&q.Turn, "turn", 0, "what agent turn N changed, from the session's checkpoints (the session is not touched)")
	cmd.Flags().IntVar(&q.From, "from", 0, "from the workspace after turn N (with --to; 0: the session's start)")
	cmd.Flags().IntVar(&q.To, "to", 0, "to the workspace after turn N (default with --from: the newest checkpoint)")
	cmd.MarkFlagsMutuallyExclusive("turn", "from")
	cmd.MarkFlagsMutuallyExclusive("turn", "to")
	return cmd
}

// diffStat prints the session's summary as the engine hands it on: a
// large session's hundreds of thousands of paths are not held (see
// statPrinter); the commits made in the session come after them.
func diffStat(ctx context.Context, c *client.Client, id string, q api.DiffQuery, colored bool) error {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer out.Flush()
	p := &statPrinter{w: out, colored: colored}
	d, err := c.DiffStatEach(ctx, id, q, p.setWidth, p.add)
	if err != nil {
		return err
	}
	p.finish()
	printCommits(out, d.Commits)
	out.Flush()
	diffEnd(p.n, d)
	printIgnored(os.Stderr, id, d)
	return nil
}

func printCommits(w io.Writer, commits []api.Commit) {
	if len(commits) == 0 {
		return
	}
	fmt.Fprintf(w, "%d commit(s) made in the session (accept --commits imports them as a branch):\n", len(commits))
	for _, c := range commits {
		fmt.Fprintf(w, "  %s %s <%s> %s\n", c.Hash[:10], printable(c.Author), printable(c.Email), printable(c.Subject))
	}
}

// diffEnd says on standard error what a diff of n paths leaves unsaid:
// that there is nothing, or that the workspace is full.
func diffEnd(n int, d api.Diff) {
	if n == 0 && len(d.Commits) == 0 && d.Ignored == nil && d.SessionIgnored == nil {
		fmt.Fprintln(os.Stderr, "no changes")
	}
	if d.Workspace.Full {
		fmt.Fprintf(os.Stderr, "airlock: the session's workspace is full (%d of %d MiB): the session's writes fail with ENOSPC; accept or discard, or start a session with a larger --workspace-size\n", d.Workspace.Used>>20, d.Workspace.Size>>20)
	}
}

// printBlame prints the diff of b with each hunk's header followed by
// the turn or command that last changed it.
func printBlame(w io.Writer, b api.Blame) error {
	byHunk := map[string]api.HunkBlame{}
	for _, h := range b.Hunks {
		byHunk[h.Path+"\x00"+h.Hunk] = h
	}
	for _, f := range b.Diff.Files {
		var buf bytes.Buffer
		if err := printUnified(&buf, []api.FileDiff{f}, false); err != nil {
			return err
		}
		i := 0
		for _, line := range strings.SplitAfter(buf.String(), "\n") {
			if strings.HasPrefix(line, "@@") && i < len(f.Hunks) {
				line = strings.TrimSuffix(line, "\n") + "  " + blameText(byHunk[f.Path+"\x00"+f.Hunks[i].ID]) + "\n"
				i++
			}
			io.WriteString(w, line)
		}
	}
	return nil
}

// blameText is a hunk's annotation: the checkpoint, the turn or command
// it belongs to and, for a turn, the agent's call that made the hunk and
// how sure that is. What the agent or the command wrote is shown on one
// line, without control characters.
func blameText(h api.HunkBlame) string {
	if h.Checkpoint == 0 {
		return "[not checkpointed yet]"
	}
	var who string
	switch {
	case h.Turn > 0:
		who = fmt.Sprintf("turn %d", h.Turn)
	case h.Command > 0:
		who = fmt.Sprintf("command %d", h.Command)
		if h.CommandLine != "" {
			who += " `" + printable(h.CommandLine) + "`"
		}
	default:
		who = h.Kind
	}
	if h.Kind != api.CheckpointTurn && h.Kind != api.CheckpointCommand && who != h.Kind {
		who += " (" + h.Kind + ")"
	}
	s := fmt.Sprintf("[%s, checkpoint %d", who, h.Checkpoint)
	if c := h.Call; c != nil {
		s += "; " + printable(c.Tool)
		if c.Input != "" {
			s += " " + printable(c.Input)
		}
		if c.ID != "" {
			s += ", call " + printable(c.ID)
		}
		s += " at " + c.Time.Local().Format("15:04:05")
		if c.Match == api.BlameMatchLast {
			if c.Edits > 1 {
				s += fmt.Sprintf(", the last of %d edits of the file in the turn", c.Edits)
			} else {
				s += ", the turn's one edit of the file"
			}
		}
	} else if h.Turn > 0 {
		s += "; no event of the turn names the file"
	}
	return s + "]"
}

// printable is untrusted text fit for a terminal line: control characters
// (escape sequences, newlines) are shown as U+FFFD.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return '\uFFFD'
		}
		return r
	}, s)
}

// printStat prints d's stats, one line per path, then the totals.
func printStat(w io.Writer, d api.Diff, colored bool) {
	p := &statPrinter{w: w, colored: colored}
	for _, s := range d.Stats {
		p.add(s)
	}
	p.finish()
}

// statPrinter prints a diff's stats as they come: at once when the width
// of the path column is known first (the engine says it when it reads
// back a summary), else held until the last. Lines are appended by hand,
// not by fmt: a large session has hundreds of thousands.
type statPrinter struct {
	w       io.Writer
	colored bool
	width   int
	known   bool       // width is known: lines go out as they come
	held    []api.Stat // until then
	n       int
	adds    int
	dels    int
	line    []byte
}

// setWidth is the engine's word on the longest path, in bytes.
func (p *statPrinter) setWidth(width int) { p.width, p.known = min(width, 60), true }

func (p *statPrinter) add(s api.Stat) error {
	if !p.known {
		p.held = append(p.held, s)
		return nil
	}
	p.print(s)
	return nil
}

// finish prints what was held and the totals.
func (p *statPrinter) finish() {
	if !p.known {
		width := 0
		for _, s := range p.held {
			width = max(width, len(names.Quote(s.Path)))
		}
		p.setWidth(width)
		for _, s := range p.held {
			p.print(s)
		}
		p.held = nil
	}
	if p.n > 0 {
		fmt.Fprintf(p.w, " %d path(s) changed, %d insertion(s)(+), %d deletion(s)(-)\n", p.n, p.adds, p.dels)
	}
}

func (p *statPrinter) pad(n int) {
	for ; n > 0; n-- {
		p.line = append(p.line, ' ')
	}
}

func (p *statPrinter) print(s api.Stat) {
	p.line = append(p.line[:0], ' ')
	p.line = append(p.line, s.Kind...)
	p.pad(8 - len(s.Kind))
	p.line = append(p.line, ' ')
	path := names.Quote(s.Path)
	p.line = append(p.line, path...)
	p.pad(p.width - utf8.RuneCountInString(path)) // as fmt pads: by runes
	p.line = append(p.line, " | "...)
	switch {
	case s.TooLarge:
		p.line = append(p.line, "no text diff (too large: `airlock diff` says why)"...)
	case s.Binary:
		p.line = append(p.line, "binary"...)
	case s.Added+s.Removed > 0:
		p.line = fmt.Appendf(p.line, "%4d ", s.Added+s.Removed)
		if p.colored {
			p.line = append(p.line, "\x1b[32m"...)
		}
		p.line = append(p.line, strings.Repeat("+", min(s.Added, 30))...)
		if p.colored {
			p.line = append(p.line, "\x1b[0m\x1b[31m"...)
		}
		p.line = append(p.line, strings.Repeat("-", min(s.Removed, 30))...)
		if p.colored {
			p.line = append(p.line, "\x1b[0m"...)
		}
	}
	var marks []string
	if s.From != "" {
		marks = append(marks, "from "+names.Quote(s.From))
	}
	if s.Conflict {
		marks = append(marks, "CONFLICT")
	} else if s.Merged {
		marks = append(marks, "merged with host changes")
	}
	if s.Held {
		marks = append(marks, "held")
	}
	switch s.Ignored {
	case api.IgnoredProject:
		marks = append(marks, "ignored")
	case api.IgnoredSession:
		marks = append(marks, "ignored by the session's rule")
	}
	if s.Generated {
		marks = append(marks, "generated")
	}
	marks = append(marks, s.Findings...)
	if len(marks) > 0 {
		p.line = append(p.line, "  ["...)
		p.line = append(p.line, strings.Join(marks, ", ")...)
		p.line = append(p.line, ']')
	}
	p.w.Write(append(p.line, '\n'))
	p.n++
	p.adds += s.Added
	p.dels += s.Removed
}
