package main

import (
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

func acceptCmd(g *globals) *cobra.Command {
	return outcomeCmd(g, "accept", "Write a session's changes (all, some paths, hunks or lines) into the project",
		"accepted", func(ctx context.Context, c clientAPI, id string, sel api.Selection) (api.Outcomes, error) {
			return c.Accept(ctx, id, sel)
		})
}

func discardCmd(g *globals) *cobra.Command {
	return outcomeCmd(g, "discard", "Drop a session's changes (all, some paths, hunks or lines); the project is not touched",
		"discarded", func(ctx context.Context, c clientAPI, id string, sel api.Selection) (api.Outcomes, error) {
			return c.Discard(ctx, id, sel)
		})
}

type clientAPI interface {
	Accept(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error)
	Discard(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error)
}

func outcomeCmd(g *globals, verb, short, done string, do func(context.Context, clientAPI, string, api.Selection) (api.Outcomes, error)) *cobra.Command {
	var asJSON bool
	var hunks, lines []string
	var take, branch, patchFile string
	var auto, commits bool
	cmd := &cobra.Command{
		Use:   verb + " ID [PATH...]",
		Short: short,
		Long: short + ".\n\nWith no PATH and no --hunk, everything. Hunk and conflict ids come from `airlock diff ID` (shown as #id) or --json.\n" +
			"--lines ID:2-4,7 takes only those lines (counted from 1 within the hunk).\n" +
			"Conflicts (the host changed the same lines since the session started) need --take agent or --take host;\n" +
			"--take markers writes git-style conflict markers instead, only when you ask for it.",
		Example: "  airlock " + verb + " 3f2a src/ README.md\n  airlock " + verb + " 3f2a --hunk 9c1d2e3f4a --lines 0a1b2c3d4e:2-3\n  airlock accept 3f2a config.yaml --take agent",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel := api.Selection{Hunks: hunks, Take: review.Resolution(take), Auto: auto, Commits: commits, Branch: branch}
			for _, p := range args[1:] {
				if utf8.ValidString(p) {
					sel.Paths = append(sel.Paths, p)
				} else {
					sel.RawPaths = append(sel.RawPaths, []byte(p)) // JSON strings would mangle it
				}
			}
			for _, l := range lines {
				id, ranges, ok := strings.Cut(l, ":")
				if !ok {
					return usageErr("--lines %q: write it as HUNK:2-4,7", l)
				}
				n, err := review.LineRanges(ranges)
				if err != nil {
					return usageErr("%v", err)
				}
				if sel.Lines == nil {
					sel.Lines = map[string][]int{}
				}
				sel.Lines[id] = append(sel.Lines[id], n...)
			}
			if patchFile != "" {
				var data []byte
				var err error
				if patchFile == "-" {
					data, err = io.ReadAll(os.Stdin)
				} else {
					data, err = os.ReadFile(patchFile)
				}
				if err != nil {
					return usageErr("--patch: %v", err)
				}
				sel.Patch = string(data)
			}
			ctx := cmd.Context()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			res, err := do(ctx, c, args[0], sel)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				enc.Encode(res)
			}
			if len(res.Commits) > 0 && !asJSON {
				fmt.Printf("imported %d commit(s) as branch %s (the working tree is unchanged)\n", len(res.Commits), res.Branch)
			}
			failed := 0
			for _, o := range res.Outcomes {
				if o.Applied {
					if !asJSON {
						part := ""
						if o.Partial {
							part = " (part)"
						}
						fmt.Printf("%s %-8s %s%s\n", done, o.Kind, o.Path, part)
					}
					continue
				}
				failed++
				fmt.Fprintf(os.Stderr, "airlock: not %s: %s: %s\n", done, o.Path, o.Error)
			}
			if len(res.Outcomes) == 0 && !asJSON && !commits {
				fmt.Fprintf(os.Stderr, "nothing to %s: the session has no changes\n", verb)
			}
			if failed > 0 {
				fmt.Fprintf(os.Stderr, "airlock: %d of %d change(s) not %s; they stay in the session\n", failed, len(res.Outcomes), done)
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the per-path outcomes as JSON")
	cmd.Flags().StringArrayVar(&hunks, "hunk", nil, "a hunk, conflict or file id from `airlock diff` (repeatable)")
	cmd.Flags().StringArrayVar(&lines, "lines", nil, "HUNK:RANGES, only these lines of a hunk (repeatable)")
	if verb == "accept" {
		cmd.Flags().StringVar(&take, "take", "", "settle conflicts: agent, host, or markers (writes conflict markers)")
		cmd.Flags().StringVar(&patchFile, "patch", "", "accept an edited version of `airlock diff ID --patch` (a file, or - for stdin)")
		cmd.Flags().BoolVar(&commits, "commits", false, "import the session's git commits into the project's repository as a branch (working tree untouched)")
		cmd.Flags().StringVar(&branch, "branch", "", "branch name for --commits (default airlock/ID)")
		cmd.Flags().BoolVar(&auto, "auto", false, "accept only what the project's policy auto-accepts (.airlock/policy.yaml on the host)")
	}
	return cmd
}
