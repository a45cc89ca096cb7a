package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/review"
	"github.com/spf13/cobra"
)

func diffCmd(g *globals) *cobra.Command {
	var stat, asJSON, patch, blame bool
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
			get := c.Diff
			if stat && !asJSON {
				get = c.DiffStat
			}
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
			colored := color == "always" || color == "auto" && colorOn(os.Stdout)
			out := bufio.NewWriterSize(os.Stdout, 64<<10)
			defer out.Flush()
			if len(d.Commits) > 0 {
				fmt.Fprintf(out, "%d commit(s) made in the session (accept --commits imports them as a branch):\n", len(d.Commits))
				for _, c := range d.Commits {
					fmt.Fprintf(out, "  %s %s <%s> %s\n", c.Hash[:10], c.Author, c.Email, c.Subject)
				}
			}
			if stat {
				printStat(out, d, colored)
			} else if files, err := reviewFiles(d.Files); err != nil {
				return err
			} else if err := review.Unified(out, files, colored); err != nil {
				return err
			}
			out.Flush()
			if len(d.Stats) == 0 && len(d.Commits) == 0 {
				fmt.Fprintln(os.Stderr, "no changes")
			}
			if d.Workspace.Full {
				fmt.Fprintf(os.Stderr, "airlock: the session's workspace is full (%d of %d MiB): the session's writes fail with ENOSPC; accept or discard, or start a session with a larger --workspace-size\n", d.Workspace.Used>>20, d.Workspace.Size>>20)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&stat, "stat", false, "summary: one line per path with added and removed lines")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: every file with kind, modes, sizes and hunks")
	cmd.Flags().BoolVar(&patch, "patch", false, "print a git-apply compatible patch")
	cmd.Flags().StringVar(&color, "color", "auto", "color: auto, always or never")
	cmd.Flags().BoolVar(&blame, "blame", false, "name beside each hunk the checkpoint (turn or command) that last changed it")
	cmd.Flags().IntVar(&q.Turn, "turn", 0, "what agent turn N changed, from the session's checkpoints (the session is not touched)")
	cmd.Flags().IntVar(&q.From, "from", 0, "from the workspace after turn N (with --to; 0: the session's start)")
	cmd.Flags().IntVar(&q.To, "to", 0, "to the workspace after turn N (default with --from: the newest checkpoint)")
	cmd.MarkFlagsMutuallyExclusive("turn", "from")
	cmd.MarkFlagsMutuallyExclusive("turn", "to")
	return cmd
}

// printBlame prints the diff of b with each hunk's header followed by
// the turn or command that last changed it.
func printBlame(w io.Writer, b api.Blame) error {
	byHunk := map[string]api.HunkBlame{}
	for _, h := range b.Hunks {
		byHunk[h.Path+"\x00"+h.Hunk] = h
	}
	for _, f := range b.Diff.Files {
		files, err := reviewFiles([]api.FileDiff{f})
		if err != nil {
			return err
		}
		var buf strings.Builder
		if err := review.Unified(&buf, files, false); err != nil {
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

func blameText(h api.HunkBlame) string {
	switch {
	case h.Checkpoint == 0:
		return "[not checkpointed yet]"
	case h.Kind == api.CheckpointTurn:
		return fmt.Sprintf("[turn %d, checkpoint %d]", h.Turn, h.Checkpoint)
	case h.Kind == api.CheckpointCommand && h.Command > 0:
		return fmt.Sprintf("[command %d, checkpoint %d]", h.Command, h.Checkpoint)
	}
	return fmt.Sprintf("[%s, checkpoint %d]", h.Kind, h.Checkpoint)
}

// reviewFiles is the wire's diff in the review's types, for
// review.Unified to print: the two have the same JSON (engine/api keeps
// it so, engine/wire_test.go checks it), so JSON converts them whole.
func reviewFiles(files []api.FileDiff) ([]review.FileDiff, error) {
	b, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	var out []review.FileDiff
	return out, json.Unmarshal(b, &out)
}

func printStat(w io.Writer, d api.Diff, colored bool) {
	flags := map[string]string{}
	for _, f := range d.Stats {
		var marks []string
		if f.From != "" {
			marks = append(marks, "from "+f.From)
		}
		if f.Conflict {
			marks = append(marks, "CONFLICT")
		} else if f.Merged {
			marks = append(marks, "merged with host changes")
		}
		if f.Held {
			marks = append(marks, "held")
		}
		marks = append(marks, f.Findings...)
		if len(marks) > 0 {
			flags[f.Path] = "  [" + strings.Join(marks, ", ") + "]"
		}
	}
	width := 0
	for _, s := range d.Stats {
		width = max(width, len(s.Path))
	}
	width = min(width, 60)
	var adds, dels int
	// Appended by hand, not by fmt: a large session has hundreds of
	// thousands of lines.
	var line []byte
	pad := func(n int) {
		for ; n > 0; n-- {
			line = append(line, ' ')
		}
	}
	for _, s := range d.Stats {
		line = append(line[:0], ' ')
		line = append(line, s.Kind...)
		pad(8 - len(s.Kind))
		line = append(line, ' ')
		line = append(line, s.Path...)
		pad(width - utf8.RuneCountInString(s.Path)) // as fmt pads: by runes
		line = append(line, " | "...)
		switch {
		case s.TooLarge:
			line = append(line, "no text diff (too large: `airlock diff` says why)"...)
		case s.Binary:
			line = append(line, "binary"...)
		case s.Added+s.Removed > 0:
			line = fmt.Appendf(line, "%4d ", s.Added+s.Removed)
			if colored {
				line = append(line, "\x1b[32m"...)
			}
			line = append(line, strings.Repeat("+", min(s.Added, 30))...)
			if colored {
				line = append(line, "\x1b[0m\x1b[31m"...)
			}
			line = append(line, strings.Repeat("-", min(s.Removed, 30))...)
			if colored {
				line = append(line, "\x1b[0m"...)
			}
		}
		line = append(line, flags[s.Path]...)
		w.Write(append(line, '\n'))
		adds += s.Added
		dels += s.Removed
	}
	if len(d.Stats) > 0 {
		fmt.Fprintf(w, " %d path(s) changed, %d insertion(s)(+), %d deletion(s)(-)\n", len(d.Stats), adds, dels)
	}
}
