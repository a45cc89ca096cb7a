package ci

import (
	"fmt"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
)

var outcomeTitle = map[string]string{
	Success:        "✅ Airlock: done",
	AgentFailed:    "❌ Airlock: the agent or command failed",
	Held:           "✋ Airlock: changes need a human",
	Violation:      "⛔ Airlock: policy violation",
	Infrastructure: "⚠️ Airlock: infrastructure error",
	InvalidInput:   "⚠️ Airlock: invalid input",
	OutputFailed:   "⚠️ Airlock: could not write the output",
}

// Summary is the verdict as markdown for a CI job's summary page.
func Summary(v *Verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n%s\n\n", outcomeTitle[v.Outcome], escape(v.Message))
	if v.Agent != nil {
		fmt.Fprintf(&b, "**Agent** %s", v.Agent.Agent)
		if v.Agent.Model != "" {
			fmt.Fprintf(&b, " (%s)", v.Agent.Model)
		}
		fmt.Fprintf(&b, ": turn %s · %d tokens in, %d out", v.Agent.State, v.Agent.Tokens.InputTokens, v.Agent.Tokens.OutputTokens)
		if v.Agent.Tokens.CostUSD > 0 {
			fmt.Fprintf(&b, " · $%.4f", v.Agent.Tokens.CostUSD)
		}
		b.WriteString("\n\n")
		if v.Agent.Final != "" {
			fmt.Fprintf(&b, "> %s\n\n", strings.ReplaceAll(escape(trim(v.Agent.Final, 600)), "\n", "\n> "))
		}
	}
	if v.Command != nil {
		fmt.Fprintf(&b, "**Command** `%s` exited %d\n\n", strings.Join(v.Command.Argv, " "), v.Command.ExitCode)
	}
	if v.Project.Dirty {
		b.WriteString("The checkout had uncommitted changes: the session started from them, and the patch is relative to them.\n\n")
	}
	if len(v.Changes) > 0 {
		b.WriteString("| file | change | +/- | status |\n|---|---|---|---|\n")
		for _, c := range v.Changes {
			status := "ready"
			switch {
			case c.Applied:
				status = "applied"
			case c.Flagged:
				status = "⛔ flagged"
			case c.Conflict:
				status = "conflict"
			case c.Held:
				status = "held"
			}
			path := code(c.Path)
			if c.From != "" {
				path = code(c.From) + " → " + code(c.Path)
			}
			lines := fmt.Sprintf("+%d −%d", c.Added, c.Removed)
			if c.Binary {
				lines = "binary"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", path, c.Kind, lines, status)
		}
		b.WriteString("\n")
	} else if v.Outcome == Success || v.Outcome == AgentFailed {
		b.WriteString("No changes.\n\n")
	}
	notReviewed(&b, "the project's ignore rules", v.Ignored)
	notReviewed(&b, "a rule only the session wrote", v.SessionIgnored)
	for _, h := range v.Held {
		fmt.Fprintf(&b, "- held: %s: %s\n", code(h.Path), escape(h.Reason))
	}
	for _, f := range v.Findings {
		fmt.Fprintf(&b, "- %s in %s: %s\n", f.Scanner, code(f.Path), escape(f.Message))
	}
	for _, c := range v.Conflicts {
		fmt.Fprintf(&b, "- conflict in %s: %s\n", code(c.Path), escape(c.Reason))
	}
	if len(v.Held)+len(v.Findings)+len(v.Conflicts) > 0 {
		b.WriteString("\n")
	}
	if len(v.Egress.Blocked) > 0 {
		fmt.Fprintf(&b, "**Blocked connections** (%d):", len(v.Egress.Blocked))
		for i, x := range v.Egress.Blocked {
			if i == 10 {
				fmt.Fprintf(&b, " and %d more", len(v.Egress.Blocked)-10)
				break
			}
			fmt.Fprintf(&b, " `%s:%d`", escape(x.Host), x.Port)
		}
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "Active CPU %.1f s ($%.4f) · %d connection(s) to %d host(s) · %.1f s in all\n", v.Usage.CPUSeconds, v.Usage.CostUSD, v.Egress.Connections, len(v.Egress.Hosts), v.Timings.Total)
	return b.String()
}

// escape makes text the session may have written safe in markdown: no
// table cell ends early, no HTML, and no control, escape, bidirectional
// or invisible character (names.SafeLines: lines stay lines).
func escape(s string) string {
	return strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;").Replace(names.SafeLines(s))
}

// code is a path as a code span: quoted by names.Quote (so it is one
// line and shows as it is), fenced with more backticks than it holds.
func code(p string) string {
	q := strings.ReplaceAll(names.Quote(p), "|", "\\|")
	if !strings.Contains(q, "`") {
		return "`" + q + "`"
	}
	return "`` " + q + " ``"
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// notReviewed says what ignore rules kept out of the review and the patch.
func notReviewed(b *strings.Builder, by string, ig *api.Ignored) {
	if ig == nil {
		return
	}
	fmt.Fprintf(b, "**Not reviewed**: %d path(s), %d bytes ignored by %s", ig.Paths, ig.Bytes, by)
	for i, d := range ig.Dirs[:min(len(ig.Dirs), 3)] {
		sep := ", "
		if i == 0 {
			sep = " under "
		}
		fmt.Fprintf(b, "%s%s (%d)", sep, code(d.Path), d.Paths)
	}
	b.WriteString(": not in the patch, never applied.\n\n")
	for _, f := range ig.Findings {
		fmt.Fprintf(b, "- %s in ignored %s: %s\n", f.Scanner, code(f.Path), escape(f.Message))
	}
}
