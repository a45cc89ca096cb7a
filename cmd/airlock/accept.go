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
	"github.com/airlock/airlock/names"
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
	var f outcomeFlags
	long, example := outcomeHelp(verb, short)
	cmd := &cobra.Command{
		Use:     verb + " ID [PATH...]",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, nothing, err := f.selection(args[1:])
			if err != nil || nothing {
				return err
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
			everything := len(sel.Paths) == 0 && len(sel.RawPaths) == 0 && len(sel.Hunks) == 0 && sel.Patch == ""
			if everything && !f.asJSON {
				defer printLeftIgnored(os.Stderr, verb, args[0], res)
			}
			return printOutcomes(res, verb, done, f.asJSON, f.commits)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the per-path outcomes as JSON")
	fl.StringArrayVar(&f.hunks, "hunk", nil, "a hunk, conflict or file id from `airlock diff` (repeatable)")
	fl.StringArrayVar(&f.lines, "lines", nil, "HUNK:RANGES, only these lines of a hunk (repeatable)")
	fl.BoolVar(&f.includeIgnored, "include-ignored", false, "let everything (or a directory) take the changes ignore rules cover (node_modules/, build output: by default they stay in the session unless named)")
	if verb == "accept" {
		fl.StringVar(&f.take, "take", "", "settle conflicts: agent, host, or markers (writes conflict markers)")
		fl.StringVar(&f.patchFile, "patch", "", "accept an edited version of `airlock diff ID --patch` (a file, or - for stdin)")
		fl.BoolVar(&f.commits, "commits", false, "import the session's git commits into the project's repository as a branch (working tree untouched)")
		fl.StringVar(&f.branch, "branch", "", "branch name for --commits (default airlock/ID)")
		fl.BoolVar(&f.auto, "auto", false, "accept only what the project's policy auto-accepts (.airlock/policy.yaml on the host)")
		fl.StringVar(&f.reviewed, "reviewed", "", "accept only what this saved `airlock diff ID --json` shows, by its digests (a file, or - for stdin)")
		fl.StringArrayVar(&f.digests, "digest", nil, "ID=sha256:HEX: accept this file (id or path) or hunk only as that digest (repeatable)")
		fl.BoolVar(&f.includeFlagged, "include-flagged", false, "let everything (or a directory) take changes the policy holds or a scanner flagged")
	}
	return cmd
}

// outcomeHelp is the long help and the examples of accept or discard.
func outcomeHelp(verb, short string) (long, example string) {
	long = short + ".\n\nWith no PATH and no --hunk, everything. Hunk and conflict ids come from `airlock diff ID` (shown as #id) or --json.\n" +
		"--lines ID:2-4,7 takes only those lines (counted from 1 within the hunk).\n" +
		"Conflicts (the host changed the same lines since the session started) need --take agent or --take host;\n" +
		"--take markers writes git-style conflict markers instead, only when you ask for it."
	example = "  airlock " + verb + " 3f2a src/ README.md\n  airlock " + verb + " 3f2a --hunk 9c1d2e3f4a --lines 0a1b2c3d4e:2-3"
	if verb == "accept" {
		long += "\n\nWhat is accepted is exactly what the engine's diff shows at that moment; each accepted file is printed with its digest.\n" +
			"To accept exactly what you reviewed, save the diff you read and accept by its digests:\n" +
			"`airlock diff ID --json > r.json`, read it, then `airlock accept ID --reviewed r.json [PATH...]`: a file that changed\n" +
			"since is refused (nothing is accepted, exit 75) and files added since are left in the session.\n" +
			"Everything (or a directory) never takes what the policy holds or a scanner flagged; name those paths,\n" +
			"or add --include-flagged. What is left is named on stderr with its reason (exit 1).\n" +
			"Everything (or a directory) leaves the changes the project's ignore rules cover (node_modules/, build output)\n" +
			"in the session: name them, or add --include-ignored.\n\n" +
			"--patch FILE applies an edited `airlock diff ID --patch` to the project like `git apply`: text hunks, binary files,\n" +
			"renames, copies, mode changes, new and deleted files, each one the session changed. It is all or nothing: a hunk\n" +
			"that no longer matches the project refuses the whole patch (exit 75); make it again and redo your edits."
		example += "\n  airlock accept 3f2a config.yaml --take agent\n  airlock diff 3f2a --json > r.json && airlock accept 3f2a --reviewed r.json" +
			"\n  airlock diff 3f2a --patch > s.patch && $EDITOR s.patch && airlock accept 3f2a --patch s.patch"
	}
	return long, example
}

// outcomeFlags are accept's and discard's flags.
type outcomeFlags struct {
	asJSON                        bool
	hunks, lines, digests         []string
	take, branch, patchFile       string
	reviewed                      string
	auto, commits, includeFlagged bool
	includeIgnored                bool
}

// selection turns the flags and paths into what to take; nothing is set
// when a reviewed diff has no changes (said on stderr).
func (f *outcomeFlags) selection(paths []string) (sel api.Selection, nothing bool, err error) {
	sel = api.Selection{Hunks: f.hunks, Take: f.take, Auto: f.auto, Commits: f.commits, Branch: f.branch, IncludeFlagged: f.includeFlagged, IncludeIgnored: f.includeIgnored}
	for _, p := range paths {
		if utf8.ValidString(p) {
			sel.Paths = append(sel.Paths, p)
		} else {
			sel.RawPaths = append(sel.RawPaths, []byte(p)) // JSON strings would mangle it
		}
	}
	for _, l := range f.lines {
		id, ranges, ok := strings.Cut(l, ":")
		if !ok {
			return sel, false, usageErr("--lines %q: write it as HUNK:2-4,7", l)
		}
		n, err := review.LineRanges(ranges)
		if err != nil {
			return sel, false, usageErr("%v", err)
		}
		if sel.Lines == nil {
			sel.Lines = map[string][]int{}
		}
		sel.Lines[id] = append(sel.Lines[id], n...)
	}
	if f.patchFile != "" {
		var data []byte
		if f.patchFile == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(f.patchFile)
		}
		if err != nil {
			return sel, false, usageErr("--patch: %v", err)
		}
		sel.Patch = string(data)
	}
	if f.reviewed != "" {
		n, err := pinReviewed(&sel, f.reviewed)
		if err != nil {
			return sel, false, err
		}
		if n == 0 {
			fmt.Fprintln(os.Stderr, "nothing to accept: the reviewed diff has no changes")
			return sel, true, nil
		}
	}
	for _, d := range f.digests {
		key, digest, ok := strings.Cut(d, "=")
		if !ok || key == "" || !strings.HasPrefix(digest, "sha256:") {
			return sel, false, usageErr("--digest %q: write it as ID=sha256:HEX (a file's id or path, or a hunk id, with the digest `airlock diff ID --json` gave it)", d)
		}
		if sel.Digests == nil {
			sel.Digests = map[string]string{}
		}
		sel.Digests[key] = digest
	}
	return sel, false, nil
}

// printOutcomes prints what was accepted or discarded (as JSON with
// asJSON), names on stderr what was not and why, and fails (exit 1) when
// anything was not.
func printOutcomes(res api.Outcomes, verb, done string, asJSON, commits bool) error {
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
				if o.Digest != "" {
					part += "  " + shortDigest(o.Digest)
				}
				fmt.Printf("%s %-8s %s%s\n", done, o.Kind, names.Quote(o.Path), part)
			}
			continue
		}
		failed++
		if o.Left != "" {
			fmt.Fprintf(os.Stderr, "airlock: left in the session: %s: %s\n", names.Quote(o.Path), names.Safe(o.Reason))
			continue
		}
		fmt.Fprintf(os.Stderr, "airlock: not %s: %s: %s\n", done, names.Quote(o.Path), names.Safe(o.Error))
	}
	if len(res.Outcomes) == 0 && !asJSON && !commits && res.Ignored == nil && res.SessionIgnored == nil { // what ignore rules left is said apart
		fmt.Fprintf(os.Stderr, "nothing to %s: the session has no changes\n", verb)
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "airlock: %d of %d change(s) not %s; they stay in the session\n", failed, len(res.Outcomes), done)
		return &exitError{code: 1}
	}
	return nil
}

// pinReviewed pins sel to the digests of a saved `airlock diff --json`: its
// files, and its hunks when hunks are selected. It returns how many files
// the diff has.
func pinReviewed(sel *api.Selection, file string) (int, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return 0, usageErr("--reviewed: %v", err)
	}
	var d api.Diff
	if err := json.Unmarshal(data, &d); err != nil {
		return 0, usageErr("--reviewed %s: not the output of `airlock diff ID --json`: %v", file, err)
	}
	if sel.Digests == nil {
		sel.Digests = map[string]string{}
	}
	for _, f := range d.Files {
		sel.Digests[f.ID] = f.Digest
		if len(sel.Hunks) > 0 || len(sel.Lines) > 0 {
			for _, h := range f.Hunks {
				sel.Digests[h.ID] = h.Digest
			}
		}
	}
	return len(d.Files), nil
}

// shortDigest abbreviates a digest for a line of output.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
