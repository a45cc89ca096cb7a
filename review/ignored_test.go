package review_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock/airlock/review"
	"github.com/airlock/airlock/testenv"
)

// gitProject makes a git project whose .gitignore ignores node_modules/,
// dist/ and *.log, with dist/keep.js tracked all the same.
func gitProject(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, ".gitignore"), "node_modules/\ndist/\n*.log\n!important.log\n", 0o644)
	write(t, filepath.Join(p, "src/a.js"), "a\n", 0o644)
	write(t, filepath.Join(p, "dist/keep.js"), "kept\n", 0o644)
	write(t, filepath.Join(p, "old.log"), "old\n", 0o644)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = p
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "needs git to make the project's index")
	}
	git("init", "-q")
	git("add", ".gitignore", "src/a.js")
	git("add", "-f", "dist/keep.js")
	git("commit", "-qm", "start")
	return p
}

// sessionWork is what an agent does in a real project: one real edit, an
// install, build output, logs, a rule of its own.
func sessionWork(t *testing.T, m string, modules int) {
	write(t, filepath.Join(m, "src/a.js"), "a2\n", 0o644)
	for i := range modules {
		write(t, filepath.Join(m, "node_modules", "pkg"+string(rune('a'+i%26)), strings.Repeat("f", 1+i/26)+".js"), "module.exports = 1\n", 0o644)
	}
	must(t, os.Symlink("/etc/passwd", filepath.Join(m, "node_modules/escape")))
	write(t, filepath.Join(m, "dist/keep.js"), "kept2\n", 0o644) // tracked: reviewed
	write(t, filepath.Join(m, "dist/new.js"), "new\n", 0o644)    // ignored
	write(t, filepath.Join(m, "debug.log"), "log\n", 0o644)      // ignored
	write(t, filepath.Join(m, "important.log"), "kept\n", 0o644) // re-included by !important.log
	must(t, os.Remove(filepath.Join(m, "old.log")))              // an ignored deletion
	write(t, filepath.Join(m, "web/.gitignore"), "*\n", 0o644)   // the session's own rule
	write(t, filepath.Join(m, "web/app.js"), "app\n", 0o644)
	write(t, filepath.Join(m, "Cargo.lock"), "# lock\n", 0o644) // generated
}

func reviewPaths(t *testing.T, l review.Layers, opts review.Options) ([]string, review.IgnoredSummary, []review.FileDiff) {
	t.Helper()
	var sum review.IgnoredSummary
	opts.OnIgnored = func(s review.IgnoredSummary) { sum = s }
	files, err := review.ReviewContext(context.Background(), l, opts)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	return paths, sum, files
}

func TestIgnoreRulesDecideWhatIsReviewed(t *testing.T) {
	p := gitProject(t)
	ws := mountWS(t, p)
	const modules = 60
	sessionWork(t, ws.Merged(), modules)
	l := review.Layers{Upper: ws.Upper(), Project: p, Ignoring: review.LoadIgnoring(ws.Upper(), p, review.Globals{})}

	got, sum, files := reviewPaths(t, l, review.Options{Hunks: true})
	want := []string{"Cargo.lock", "dist/keep.js", "important.log", "src/a.js", "web/.gitignore"}
	if !slices.Equal(got, want) {
		t.Errorf("reviewed %q, want %q", got, want)
	}
	for _, f := range files {
		if f.Ignored != "" {
			t.Errorf("%s listed as ignored (%s) in a summary", f.Path, f.Ignored)
		}
		if gen := f.Generated; (f.Path == "Cargo.lock") != (gen == "lockfile") {
			t.Errorf("%s generated %q", f.Path, gen)
		}
	}
	// The project's rules: the modules and the link, dist/new.js,
	// debug.log, the deletion of old.log.
	if sum.Project.Paths != modules+4 {
		t.Errorf("project-ignored paths %d, want %d: %+v", sum.Project.Paths, modules+4, sum.Project)
	}
	if len(sum.Project.Dirs) == 0 || sum.Project.Dirs[0].Path != "node_modules/" || sum.Project.Dirs[0].Paths != modules+1 {
		t.Errorf("places %+v: node_modules/ first with %d", sum.Project.Dirs, modules+1)
	}
	if sum.Project.FindingCount != 1 || sum.Project.Findings[0].Path != "node_modules/escape" {
		t.Errorf("an escaping link in an ignored place is still a finding: %+v", sum.Project.Findings)
	}
	if len(sum.Project.Rules) == 0 || sum.Project.Rules[0].Pattern != "node_modules/" || sum.Project.Rules[0].Source != ".gitignore" {
		t.Errorf("rules %+v", sum.Project.Rules)
	}
	// Only the session's rule ignores web/app.js: counted apart.
	if sum.Session.Paths != 1 || len(sum.Session.Rules) != 1 || sum.Session.Rules[0].Source != "web/.gitignore" {
		t.Errorf("session-ignored %+v", sum.Session)
	}

	// Listed alone, marked, counted the same.
	only, sum2, files := reviewPaths(t, l, review.Options{Ignored: review.IgnoredOnly})
	if len(only) != modules+5 || sum2.Project.Paths != sum.Project.Paths || sum2.Session.Paths != 1 {
		t.Errorf("--ignored listed %d (%q…), summary %+v", len(only), only[:min(5, len(only))], sum2.Project)
	}
	for _, f := range files {
		if f.Ignored == "" || f.IgnoredBy == "" {
			t.Errorf("%s listed by --ignored without its mark (%q, %q)", f.Path, f.Ignored, f.IgnoredBy)
		}
	}
	all, _, _ := reviewPaths(t, l, review.Options{Ignored: review.IgnoredAll})
	if len(all) != len(only)+len(want) {
		t.Errorf("--no-ignore listed %d, want %d", len(all), len(only)+len(want))
	}

	// A named ignored path is listed; a named folder does not take the
	// ignored paths under it that a rule below it covers.
	named, _, _ := reviewPaths(t, l, review.Options{Paths: []string{"node_modules/pkga", "web", "debug.log"}})
	if len(named) != 5 || named[0] != "debug.log" || !strings.HasPrefix(named[3], "node_modules/pkga/") || named[4] != "web/.gitignore" {
		t.Errorf("named: %q", named)
	}

	// The session list's count leaves them out.
	n, err := review.CountChanges(context.Background(), l, nil)
	if err != nil || n != len(want) {
		t.Errorf("review.CountChanges = %d, %v; want %d", n, err, len(want))
	}
}

// An agent cannot hide a file by ignoring it: a rule it adds to the
// project's .gitignore covers nothing the project's own copy does not.
func TestSessionRulesHideNothing(t *testing.T) {
	p := gitProject(t)
	ws := mountWS(t, p)
	write(t, filepath.Join(ws.Merged(), ".gitignore"), "*\n", 0o644)
	write(t, filepath.Join(ws.Merged(), "src/backdoor.js"), "evil\n", 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p, Ignoring: review.LoadIgnoring(ws.Upper(), p, review.Globals{})}
	got, sum, files := reviewPaths(t, l, review.Options{})
	if !slices.Contains(got, ".gitignore") {
		t.Errorf("the rule file itself is not reviewed: %q", got)
	}
	for _, f := range files {
		if f.Path == ".gitignore" && (len(f.Findings) != 1 || f.Findings[0].Scanner != "ignore_rule") {
			t.Errorf("the session's hiding rule is not flagged: %+v", f.Findings)
		}
	}
	if sum.Session.Paths != 1 || sum.Project.Paths != 0 {
		t.Errorf("src/backdoor.js must be counted as hidden by the session's rule only: %+v / %+v", sum.Session, sum.Project)
	}
	named, _, _ := reviewPaths(t, l, review.Options{Paths: []string{"src/backdoor.js"}})
	if !slices.Equal(named, []string{"src/backdoor.js"}) {
		t.Errorf("named: %q", named)
	}
}

// A key in an ignored file is not reviewed, but it is found and said.
func TestIgnoredFilesAreScannedForSecrets(t *testing.T) {
	p := gitProject(t)
	ws := mountWS(t, p)
	sessionWork(t, ws.Merged(), 30)
	write(t, filepath.Join(ws.Merged(), "node_modules/pkgb/config.js"), "a\nb\nkey = 'SECRET'\n", 0o644)
	write(t, filepath.Join(ws.Merged(), "node_modules/pkgb/blob.bin"), "\x00SECRET", 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p, Ignoring: review.LoadIgnoring(ws.Upper(), p, review.Globals{})}
	var asked [][]string
	_, sum, _ := reviewPaths(t, l, review.Options{ScanIgnored: lineFinder{&asked}})
	var secrets []review.IgnoredFinding
	for _, f := range sum.Project.Findings {
		if f.Scanner == "secrets" {
			secrets = append(secrets, f)
		}
	}
	if len(secrets) != 1 || secrets[0].Path != "node_modules/pkgb/config.js" || secrets[0].Line != 3 {
		t.Errorf("secrets found in ignored files: %+v", secrets)
	}
	if sum.Project.Unscanned != 1 {
		t.Errorf("the binary file is unscanned: %d", sum.Project.Unscanned)
	}
	_, sum, _ = reviewPaths(t, l, review.Options{})
	if sum.Project.Unscanned != sum.Project.Paths-2 { // all files but the link and the deletion
		t.Errorf("without a scanner every ignored file is unscanned: %d of %d", sum.Project.Unscanned, sum.Project.Paths)
	}
}

// An accept pinned to what a diff showed (the interface's Accept all)
// takes the ignored changes it never showed only when it includes them.
func TestPinnedAcceptIncludesIgnored(t *testing.T) {
	for _, include := range []bool{false, true} {
		p := gitProject(t)
		ws := mountWS(t, p)
		sessionWork(t, ws.Merged(), 5)
		l := review.Layers{Upper: ws.Upper(), Project: p, Ignoring: review.LoadIgnoring(ws.Upper(), p, review.Globals{})}
		_, _, shown := reviewPaths(t, l, review.Options{Hunks: true})
		pins := map[string]string{}
		for _, f := range shown {
			pins[f.ID] = f.Digest
		}
		sel := review.Selection{Digests: pins, IncludeFlagged: true, IncludeIgnored: include}
		opts := review.Options{Hunks: true}
		if include {
			opts.Ignored = review.IgnoredAll
		}
		files, err := review.ReviewContext(context.Background(), l, opts)
		must(t, err)
		out, err := review.Accept(l, files, sel, journal(t))
		must(t, err)
		_, statErr := os.Stat(filepath.Join(p, "dist/new.js"))
		if include != (statErr == nil) {
			t.Errorf("include_ignored %v: dist/new.js in the project: %v (outcomes %d)", include, statErr == nil, len(out))
		}
		if _, err := os.Stat(filepath.Join(p, "src/a.js")); err != nil {
			t.Errorf("include_ignored %v: the pinned change was not taken: %v", include, err)
		}
	}
}
