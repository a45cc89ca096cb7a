package main_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/ci"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// modules is how many files the fixture package brings into node_modules.
const modules = 150

// nodeProject makes a git project as a new user has one: a .gitignore that
// ignores node_modules/ and the lockfile, a dependency that `npm install`
// installs offline from a tarball in the project (the fixture).
func nodeProject(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "web")
	write := func(rel, content string) {
		t.Helper()
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(p, rel)), 0o755))
		must(t, os.WriteFile(filepath.Join(p, rel), []byte(content), 0o644))
	}
	write(".gitignore", "node_modules/\npackage-lock.json\nnpm-debug.log\ncoverage/\n")
	write("package.json", `{"name":"web","version":"1.0.0","private":true,"dependencies":{"leftish":"file:fixtures/leftish-1.0.0.tgz"}}`+"\n")
	write("src/index.js", "module.exports = require('leftish')\n")
	must(t, os.MkdirAll(filepath.Join(p, "fixtures"), 0o755))
	f, err := os.Create(filepath.Join(p, "fixtures/leftish-1.0.0.tgz"))
	must(t, err)
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	add := func(name, content string) {
		must(t, tw.WriteHeader(&tar.Header{Name: "package/" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(content))
		must(t, err)
	}
	add("package.json", `{"name":"leftish","version":"1.0.0","main":"index.js"}`)
	add("index.js", "module.exports = s => s\n")
	add("lib/config.js", "// a key a package should not ship\nexports.aws = 'AKIAZ7VRSQ5TUBLK3QH2'\n")
	for i := range modules - 3 {
		add(fmt.Sprintf("lib/part%03d.js", i), fmt.Sprintf("exports.n = %d\n", i))
	}
	must(t, tw.Close())
	must(t, gz.Close())
	must(t, f.Close())
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
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "start")
	return p
}

// TestReviewRealProjects runs `npm install` and a one-line fix in a real
// project's session: the review lists the fix, counts node_modules/ and
// the lockfile as ignored, accept of everything leaves them, a named one
// is taken, and `airlock ci` passes with the same work.
func TestReviewRealProjects(t *testing.T) {
	c := newCLI(t)
	img := enginetest.BaseImage(t, enginetest.Require(t))
	p := nodeProject(t)
	work := "npm install --offline --no-audit --no-fund --loglevel=error && node -e \"require('./src/index.js')\" && echo '// fixed' >> src/index.js"
	_, _, errs := c.run("run", "--project", p, "--image", img, "--", "sh", "-c", work)
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no session: %s", errs)
	}
	id := m[1]

	code, stat, errs := c.run("diff", id, "--stat")
	if code != 0 || !strings.Contains(stat, "src/index.js") || strings.Contains(stat, "node_modules") || strings.Contains(stat, "package-lock.json") {
		t.Fatalf("diff --stat (exit %d) lists more than the fix:\n%s\n%s", code, stat, errs)
	}
	if !strings.Contains(errs, "ignored by the project's rules under node_modules/") || !strings.Contains(errs, "--ignored") {
		t.Errorf("diff --stat does not say what it left out:\n%s", errs)
	}
	var d api.Diff
	must(t, json.Unmarshal([]byte(c.ok("diff", id, "--json")), &d))
	if len(d.Files) != 1 || d.Ignored == nil || d.Ignored.Paths < modules+1 || d.Ignored.Dirs[0].Path != "node_modules/" {
		t.Fatalf("diff --json: %d files, ignored %+v", len(d.Files), d.Ignored)
	}
	if len(d.Ignored.Rules) == 0 || d.Ignored.Rules[0].Source != ".gitignore" || d.Ignored.Rules[0].Pattern != "node_modules/" {
		t.Errorf("the rule that ignored them: %+v", d.Ignored.Rules)
	}
	// Not reviewed, but read for secrets all the same.
	found := false
	for _, f := range d.Ignored.Findings {
		found = found || f.Path == "node_modules/leftish/lib/config.js" && f.Scanner == "secrets"
	}
	if !found {
		t.Errorf("the key in an ignored file was not found: %+v", d.Ignored.Findings)
	}
	ignored := c.ok("diff", id, "--ignored", "--stat")
	if n := strings.Count(ignored, "ignored"); int64(n) != d.Ignored.Paths || !strings.Contains(ignored, "node_modules/leftish/index.js") {
		t.Errorf("diff --ignored lists %d marked paths, the summary counts %d:\n%.2000s", n, d.Ignored.Paths, ignored)
	}

	_, out, errs := c.run("accept", id)
	if !strings.Contains(out, "src/index.js") || !strings.Contains(errs, "left ") || !strings.Contains(errs, "--include-ignored") {
		t.Errorf("accept of everything:\n%s\n%s", out, errs)
	}
	for _, left := range []string{"node_modules", "package-lock.json"} {
		if _, err := os.Lstat(filepath.Join(p, left)); err == nil {
			t.Errorf("accept of everything wrote the ignored %s into the project", left)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(p, "src/index.js")); !strings.Contains(string(b), "// fixed") {
		t.Errorf("the fix was not accepted: %q", b)
	}
	c.ok("accept", id, "node_modules/leftish/index.js")
	if _, err := os.Stat(filepath.Join(p, "node_modules/leftish/index.js")); err != nil {
		t.Errorf("a named ignored path was not taken: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p, "node_modules/leftish/package.json")); err == nil {
		t.Error("naming one ignored path took another")
	}

	// The CI path: the project's install before the fix passes.
	out1 := t.TempDir()
	code, _, errs = c.run("ci", "--project", p, "--image", img, "--out", out1, "--", "sh", "-c", work)
	var v ci.Verdict
	b, _ := os.ReadFile(filepath.Join(out1, "verdict.json"))
	if err := json.Unmarshal(b, &v); err != nil || code != 0 || v.Outcome != ci.Success {
		t.Fatalf("airlock ci: exit %d, outcome %q, %v\n%s", code, v.Outcome, err, errs)
	}
	if v.Ignored == nil || v.Ignored.Paths < modules || len(v.Changes) != 1 || v.Ignored.FindingCount == 0 {
		t.Errorf("ci's verdict: %d changes, ignored %+v", len(v.Changes), v.Ignored)
	}
	if patch, _ := os.ReadFile(filepath.Join(out1, "changes.patch")); strings.Contains(string(patch), "node_modules") {
		t.Error("ci's patch holds ignored paths")
	}
}

// TestReviewIgnoresToolchainOutput is a project that is not a git
// checkout, with a .gitignore all the same: a Python virtualenv, caches
// and a Rust-like target/ are counted, a lockfile is folded, and
// --include-ignored takes everything.
func TestReviewIgnoresToolchainOutput(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	p := filepath.Join(t.TempDir(), "tool")
	must(t, os.MkdirAll(filepath.Join(p, "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(p, ".gitignore"), []byte(".venv/\n__pycache__/\n/target\n*.pyc\n!keep.pyc\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(p, "src/main.py"), []byte("print(1)\n"), 0o644))
	work := "mkdir -p .venv/lib __pycache__ target/debug src/__pycache__ && " +
		"for i in 1 2 3 4 5; do echo x > .venv/lib/m$i.py; echo y > target/debug/o$i; done && " +
		"echo c > src/__pycache__/main.cpython.pyc && echo k > keep.pyc && echo '# lock' > Cargo.lock && echo 'print(2)' >> src/main.py"
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", work)
	id := sessionLine.FindStringSubmatch(errs)[1]
	var d api.Diff
	must(t, json.Unmarshal([]byte(c.ok("diff", id, "--json")), &d))
	var paths []string
	for _, f := range d.Files {
		paths = append(paths, f.Path)
		if (f.Path == "Cargo.lock") != (f.Generated == "lockfile") {
			t.Errorf("%s generated %q", f.Path, f.Generated)
		}
	}
	if strings.Join(paths, " ") != "Cargo.lock keep.pyc src/main.py" || d.Ignored == nil || d.Ignored.Paths != 12 {
		t.Fatalf("reviewed %q, ignored %+v", paths, d.Ignored)
	}
	if out := c.ok("diff", id); !strings.Contains(out, "generated (lockfile)") || strings.Contains(out, "+# lock") {
		t.Errorf("the lockfile is not folded:\n%s", out)
	}
	if out := c.ok("diff", id, "--generated"); !strings.Contains(out, "+# lock") {
		t.Errorf("--generated does not show the lockfile's hunk:\n%s", out)
	}
	c.ok("accept", id, "--include-ignored", "--include-flagged")
	for _, rel := range []string{".venv/lib/m1.py", "target/debug/o5", "src/__pycache__/main.cpython.pyc", "Cargo.lock"} {
		if _, err := os.Stat(filepath.Join(p, rel)); err != nil {
			t.Errorf("--include-ignored left %s: %v", rel, err)
		}
	}
}
