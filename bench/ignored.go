package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ignoredVsGitStatus is section 23: `airlock diff --stat` of a session
// that installed a node_modules/ of modules files the project's
// .gitignore ignores, beside changed real edits, against `git status
// --porcelain` on the same tree (a native copy with the same work). The
// first call is measured apart: it walks, the rest may read a kept
// summary.
func (b *bench) ignoredVsGitStatus(modules, changed int) {
	project := filepath.Join(b.work, "p23")
	check(os.MkdirAll(filepath.Join(project, "src"), 0o755))
	check(os.WriteFile(filepath.Join(project, ".gitignore"), []byte("node_modules/\npackage-lock.json\n"), 0o644))
	for i := range changed {
		check(os.WriteFile(filepath.Join(project, "src", fmt.Sprintf("m%02d.js", i)), []byte("exports.a = 1\n"), 0o644))
	}
	git := func(dir string, args ...string) {
		c := exec.Command("git", append([]string{"-c", "user.name=b", "-c", "user.email=b@example.com", "-c", "gc.auto=0"}, args...)...)
		c.Dir = dir
		out, err := c.CombinedOutput()
		check(errorf(err, out))
	}
	git(project, "init", "-q")
	git(project, "add", "-A")
	git(project, "commit", "-qm", "gen")
	copyDir := filepath.Join(b.work, "p23-git")
	out, err := exec.Command("cp", "-a", project, copyDir).CombinedOutput()
	check(errorf(err, out))
	// A package every 20 files, a few levels deep, as npm lays them out.
	script := fmt.Sprintf("for i in $(seq 1 %d); do p=node_modules/pkg$((i/20))/lib; mkdir -p $p; echo \"module.exports = $i\" > $p/f$i.js; done; "+
		"echo '{}' > package-lock.json; for f in src/*.js; do echo 'exports.b = 2' >> $f; done", modules)
	t0 := time.Now()
	id := b.newSession(project, "airlock/tiny", script)
	fmt.Printf("session with %d ignored files made in %s\n", modules, time.Since(t0).Round(time.Millisecond))
	sh := exec.Command("sh", "-c", script)
	sh.Dir = copyDir
	out, err = sh.CombinedOutput()
	check(errorf(err, out))

	firstOurs := timeIt(func() { b.must("diff", id, "--stat") })
	status := func() {
		c := exec.Command("git", "status", "--porcelain")
		c.Dir = copyDir
		out, err := c.CombinedOutput()
		check(errorf(err, out))
	}
	// git's first call after the copy refreshes its index: its own cost
	// of a first look, as ours is.
	firstGit := timeIt(status)
	stat := b.must("diff", id, "--stat")
	if n := strings.Count(stat, "modified"); n != changed || strings.Contains(stat, "node_modules/pkg") {
		check(fmt.Errorf("diff --stat lists %d modified files (want %d) or ignored ones:\n%.500s", n, changed, stat))
	}
	var al, gs []time.Duration
	for range 12 {
		al = append(al, timeIt(func() { b.must("diff", id, "--stat") }))
		gs = append(gs, timeIt(status))
	}
	b.compare(fmt.Sprintf("### 23. `diff --stat` of %d real edits beside %d files the project's .gitignore ignores (median of 10)", changed, modules+1),
		"`airlock diff ID --stat`", al[2:], "`git status --porcelain` (same tree, native disk)", gs[2:], "git", 2)
	b.log("First call: airlock %s, git %s (ratio %.2f; target ≤ 2, first call included).", ms(firstOurs), ms(firstGit), float64(firstOurs)/float64(firstGit))
	b.log("")
	b.must("rm", id)
	os.RemoveAll(copyDir)
}
