package main

import (
	"fmt"
	"io"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
)

// printIgnored says what a diff of session id did not list because ignore
// rules cover it: how many paths and bytes under which places, and how to
// see them. The session's own rules get their own warning: an agent's
// rule must not hide its work.
func printIgnored(w io.Writer, id string, d api.Diff) {
	if ig := d.Ignored; ig != nil {
		fmt.Fprintf(w, "%s ignored by the project's rules%s: airlock diff %s --ignored lists them\n",
			countPaths(ig), where(ig), id)
		printIgnoredFindings(w, ig)
	}
	if ig := d.SessionIgnored; ig != nil {
		fmt.Fprintf(w, "WARNING: %s ignored only by a rule this session wrote%s%s: review the rule; airlock diff %s --ignored lists them\n",
			countPaths(ig), where(ig), byRules(ig), id)
		printIgnoredFindings(w, ig)
	}
}

// printLeftIgnored says what an accept or discard of everything left in
// the session because ignore rules cover it.
func printLeftIgnored(w io.Writer, verb, id string, o api.Outcomes) {
	if ig := o.Ignored; ig != nil {
		fmt.Fprintf(w, "left %s ignored by the project's rules%s in the session: name them, or %s with --include-ignored (airlock diff %s --ignored lists them)\n",
			countPaths(ig), where(ig), verb, id)
	}
	if ig := o.SessionIgnored; ig != nil {
		fmt.Fprintf(w, "left %s ignored only by a rule this session wrote%s%s: name them, or %s with --include-ignored\n",
			countPaths(ig), where(ig), byRules(ig), verb)
	}
}

func countPaths(ig *api.Ignored) string {
	s := "1 path"
	if ig.Paths != 1 {
		s = fmt.Sprintf("%d paths", ig.Paths)
	}
	return fmt.Sprintf("%s (%sB)", s, bytesText(ig.Bytes))
}

// where names the first places ignored paths are under.
func where(ig *api.Ignored) string {
	if len(ig.Dirs) == 0 {
		return ""
	}
	s := " under "
	shown := min(len(ig.Dirs), 3)
	for i, d := range ig.Dirs[:shown] {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s (%d)", names.Quote(d.Path), d.Paths)
	}
	if len(ig.Dirs) > shown {
		s += fmt.Sprintf(" and %d more", len(ig.Dirs)-shown)
	}
	return s
}

func byRules(ig *api.Ignored) string {
	if len(ig.Rules) == 0 {
		return ""
	}
	r := ig.Rules[0]
	return fmt.Sprintf(" (%s:%d: %s)", names.Quote(r.Source), r.Line, names.Quote(r.Pattern))
}

func printIgnoredFindings(w io.Writer, ig *api.Ignored) {
	if ig.Unscanned > 0 {
		fmt.Fprintf(w, "  %d of them not read for secrets (a --stat reads none; airlock diff without --stat reads them within a budget)\n", ig.Unscanned)
	}
	for _, f := range ig.Findings {
		fmt.Fprintf(w, "  FINDING in ignored %s: %s: %s\n", names.Quote(f.Path), f.Scanner, printable(f.Message))
	}
	if more := ig.FindingCount - int64(len(ig.Findings)); more > 0 {
		fmt.Fprintf(w, "  and %d more finding(s) in ignored paths\n", more)
	}
}

// foldGenerated folds the hunks of generated files (lockfiles, files the
// project's attributes mark generated) into a line, unless show is set
// or a scanner flagged the file: a flagged file is always shown whole.
func foldGenerated(files []api.FileDiff, show bool) []api.FileDiff {
	if show {
		return files
	}
	out := make([]api.FileDiff, len(files))
	for i, f := range files {
		out[i] = f
		if f.Generated == "" || len(f.Findings) > 0 || len(f.Hunks) == 0 || f.Conflict {
			continue
		}
		st := api.Stats([]api.FileDiff{f})[0]
		out[i].Hunks = nil
		out[i].Note = fmt.Sprintf("generated (%s), +%d -%d lines%s: airlock diff --generated shows the hunks", f.Generated, st.Added, st.Removed, sumSuffix(f.Digest))
	}
	return out
}
