package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/names"
)

// namesThatLie are names a session gives files to forge lines of a
// summary, hide a real extension, drive the terminal or pass for a file
// the project has; mkNames is the busybox shell that makes them.
var namesThatLie = []string{"x\n--- a\ta.txt", "n\n+++ b\n@@ -0,0 +1 @@", "uni\u202egnp.exe", "esc\x1b[31mred", "README.md\u200b"}

const mkNames = `for n in 'x\n--- a\ta.txt' 'n\n+++ b\n@@ -0,0 +1 @@' 'uni\342\200\256gnp.exe' 'esc\033[31mred' 'README.md\342\200\213'; do ` +
	`f=$(printf "$n"); echo hi > "$f"; done`

// TestNamesThatLie: whatever a session names its files, `diff --stat`,
// `accept`'s output and `airlock ci`'s markdown show the names quoted,
// with no raw control, escape or bidirectional character, each on its own
// line; the names scanner flags each one.
func TestNamesThatLie(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	p := sampleProject(t)
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", mkNames)
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no session: %s", errs)
	}
	id := m[1]

	// shownQuoted: out holds each name as names.Quote shows it, one line
	// per name, and nothing deceptive.
	shownQuoted := func(what, out string, lines int) {
		t.Helper()
		for _, n := range namesThatLie {
			if !strings.Contains(out, names.Quote(n)) {
				t.Errorf("%s does not show %s:\n%s", what, names.Quote(n), out)
			}
		}
		if got := strings.Count(out, "\n"); lines > 0 && got != lines {
			t.Errorf("%s has %d lines, want %d (a name broke one):\n%s", what, got, lines, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if ps := names.Check(line); len(ps) > 0 {
				t.Errorf("%s holds %v: %q", what, ps, line)
			}
		}
	}

	stat := c.ok("diff", id, "--stat")
	shownQuoted("diff --stat", stat, len(namesThatLie)+1)
	shownQuoted("diff", c.ok("diff", id), 0)

	var d api.Diff
	must(t, json.Unmarshal([]byte(c.ok("diff", id, "--json")), &d))
	flagged := map[string][]string{}
	for _, f := range d.Files {
		for _, x := range f.Findings {
			if x.Scanner == "names" {
				flagged[f.Path] = append(flagged[f.Path], x.Rule)
			}
		}
	}
	for n, want := range map[string][]string{
		namesThatLie[0]: {"control"}, namesThatLie[1]: {"control"}, namesThatLie[2]: {"bidi"},
		namesThatLie[3]: {"escape"}, namesThatLie[4]: {"invisible", "lookalike"},
	} {
		if strings.Join(flagged[n], ",") != strings.Join(want, ",") {
			t.Errorf("%s: names findings %v, want %v", names.Quote(n), flagged[n], want)
		}
	}

	// Accepting everything leaves the flagged names, each said on stderr;
	// naming them takes them.
	code, out, errs := c.run("accept", id)
	if code != 1 || out != "" {
		t.Errorf("accept: exit %d, stdout %q; want 1 and nothing taken", code, out)
	}
	shownQuoted("accept's stderr", errs, len(namesThatLie)+1)
	out = c.ok("accept", id, "--include-flagged")
	shownQuoted("accept --include-flagged", out, len(namesThatLie))
	for _, n := range namesThatLie {
		if _, err := os.Lstat(filepath.Join(p, n)); err != nil {
			t.Errorf("accept did not write %s: %v", names.Quote(n), err)
		}
	}

	// airlock ci: the markdown summary and its progress lines.
	ciOut := filepath.Join(t.TempDir(), "out")
	code, _, errs = c.run("ci", "--project", sampleProject(t), "--image", enginetest.Image, "--out", ciOut, "--", "sh", "-c", mkNames)
	if code != 3 {
		t.Errorf("ci: exit %d, want 3 (the names are findings)\n%s", code, errs)
	}
	md, err := os.ReadFile(filepath.Join(ciOut, "summary.md"))
	must(t, err)
	shownQuoted("summary.md", string(md), 0)
	for _, line := range strings.Split(errs, "\n") {
		if ps := names.Check(line); len(ps) > 0 {
			t.Errorf("ci's stderr holds %v: %q", ps, line)
		}
	}
}
