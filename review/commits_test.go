package review_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/review"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Host", "-c", "user.email=host@example.com", "-c", "safe.directory=*"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestAgentCommits(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "main.go"), "package main\n", 0o644)
	git(t, p, "init", "-q", "-b", "main")
	git(t, p, "add", "-A")
	git(t, p, "commit", "-qm", "initial")
	hostHead := git(t, p, "rev-parse", "HEAD")
	ws := mountWS(t, p)
	m := ws.Merged()
	// The agent commits twice inside the session, as another author.
	write(t, filepath.Join(m, "feature.go"), "package main\n\nfunc feature() {}\n", 0o644)
	write(t, filepath.Join(m, "sub/dir/deep.txt"), "deep\n", 0o644)
	git(t, m, "add", "-A")
	git(t, m, "-c", "user.name=Agent", "-c", "user.email=agent@example.com", "commit", "-qm", "add feature\n\nbody")
	write(t, filepath.Join(m, "feature.go"), "package main\n\nfunc feature() { println() }\n", 0o644)
	git(t, m, "-c", "user.name=Agent", "-c", "user.email=agent@example.com", "commit", "-qam", "print")
	l := review.Layers{Upper: ws.Upper(), Project: p}

	// .git internals are not changes; the files are.
	diffs, err := review.Review(l)
	must(t, err)
	for _, d := range diffs {
		if strings.HasPrefix(d.Path, ".git") {
			t.Errorf("git internals listed as a change: %s", d.Path)
		}
	}
	commits, err := review.Commits(p, m)
	must(t, err)
	if len(commits) != 2 || commits[0].Subject != "print" || commits[1].Subject != "add feature" || commits[0].Author != "Agent" {
		t.Fatalf("commits: %+v", commits)
	}
	// Bring them in as a branch; the working tree and HEAD stay.
	_, err = review.ImportCommits(p, m, "airlock/s1")
	must(t, err)
	if got := git(t, p, "rev-parse", "HEAD"); got != hostHead {
		t.Errorf("host HEAD moved: %s", got)
	}
	log := git(t, p, "log", "--format=%an %s", "airlock/s1")
	if log != "Agent print\nAgent add feature\nHost initial" {
		t.Errorf("imported branch log:\n%s", log)
	}
	git(t, p, "fsck", "--strict")
	if got := git(t, p, "show", "airlock/s1:sub/dir/deep.txt"); got != "deep" {
		t.Errorf("deep file in the branch: %q", got)
	}
	if st := git(t, p, "status", "--porcelain"); st != "" {
		t.Errorf("working tree changed by the import: %q", st)
	}
	if _, err := review.ImportCommits(p, m, "airlock/s1"); err == nil {
		t.Errorf("importing over an existing branch should fail")
	}
}
