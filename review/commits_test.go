package review_test

import (
	"errors"
	"fmt"
	"os"
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

// TestAgentCommitsReadBack: the session's repository as agents leave it —
// loose objects, packed by git gc (deltas against the project's objects,
// by offset or by name), its git directory moved behind a relative .git
// file, or a worktree's with a commondir — is read whole and imported
// exactly: git fsck --strict passes and the branch has the agent's files.
func TestAgentCommitsReadBack(t *testing.T) {
	cases := []struct {
		name  string
		after func(t *testing.T, m string)
	}{
		{"loose", func(t *testing.T, m string) {}},
		{"gc", func(t *testing.T, m string) { git(t, m, "gc", "-q", "--aggressive") }},
		{"repack with deltas by name", func(t *testing.T, m string) {
			git(t, m, "-c", "repack.useDeltaBaseOffset=false", "repack", "-q", "-a", "-d", "-f", "--depth=50")
		}},
		{"relative .git file", func(t *testing.T, m string) {
			must(t, os.MkdirAll(filepath.Join(m, "meta"), 0o755))
			must(t, os.Rename(filepath.Join(m, ".git"), filepath.Join(m, "meta/repo")))
			write(t, filepath.Join(m, ".git"), "gitdir: meta/repo\n", 0o644)
		}},
		{"worktree with commondir", func(t *testing.T, m string) {
			// .git names a worktree's git directory, whose commondir is
			// the repository: HEAD is the worktree's, the rest common.
			branch := git(t, m, "rev-parse", "HEAD")
			git(t, m, "update-ref", "refs/heads/wt", branch)
			git(t, m, "reset", "-q", "--hard", "HEAD~2")
			must(t, os.Rename(filepath.Join(m, ".git"), filepath.Join(m, ".repo")))
			write(t, filepath.Join(m, ".repo/worktrees/w/HEAD"), "ref: refs/heads/wt\n", 0o644)
			write(t, filepath.Join(m, ".repo/worktrees/w/commondir"), "../..\n", 0o644)
			write(t, filepath.Join(m, ".git"), "gitdir: .repo/worktrees/w\n", 0o644)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p, m := filepath.Join(dir, "project"), filepath.Join(dir, "merged")
			var big strings.Builder
			for i := 0; i < 3000; i++ {
				fmt.Fprintf(&big, "line %d of a file large enough to be stored as a delta\n", i)
			}
			write(t, filepath.Join(p, "big.txt"), big.String(), 0o644)
			git(t, p, "init", "-q", "-b", "main")
			git(t, p, "add", "-A")
			git(t, p, "commit", "-qm", "initial")
			if out, err := exec.Command("cp", "-a", p, m).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v\n%s", err, out)
			}
			for i := 1; i <= 3; i++ {
				write(t, filepath.Join(m, "big.txt"), strings.Replace(big.String(), fmt.Sprintf("line %d ", i*100), fmt.Sprintf("LINE %d ", i*100), 1), 0o644)
				write(t, filepath.Join(m, fmt.Sprintf("dir%d/sub/f.txt", i)), fmt.Sprintf("file %d\n", i), 0o755)
				git(t, m, "add", "-A")
				git(t, m, "-c", "user.name=Agent", "-c", "user.email=agent@example.com", "commit", "-qm", fmt.Sprintf("change %d", i))
			}
			want := git(t, m, "rev-parse", "HEAD")
			c.after(t, m)
			commits, err := review.Commits(p, m)
			must(t, err)
			if len(commits) != 3 || commits[0].Hash != want || commits[2].Subject != "change 1" {
				t.Fatalf("commits: %+v", commits)
			}
			_, err = review.ImportCommits(p, m, "airlock/s1")
			must(t, err)
			git(t, p, "fsck", "--strict", "--no-dangling")
			if got := git(t, p, "rev-parse", "airlock/s1"); got != want {
				t.Errorf("branch at %s, want %s", got, want)
			}
			if got := git(t, p, "show", "airlock/s1:dir3/sub/f.txt"); got != "file 3" {
				t.Errorf("dir3/sub/f.txt in the branch: %q", got)
			}
			if got := git(t, p, "show", "airlock/s1:big.txt"); !strings.Contains(got, "LINE 300 ") {
				t.Errorf("big.txt in the branch lacks the agent's change")
			}
		})
	}
}

// TestImportBranchNames: the branch name is the user's, but it becomes a
// path in the project's repository: only names git accepts.
func TestImportBranchNames(t *testing.T) {
	dir := t.TempDir()
	p, m := filepath.Join(dir, "project"), filepath.Join(dir, "merged")
	write(t, filepath.Join(p, "a.txt"), "a\n", 0o644)
	git(t, p, "init", "-q", "-b", "main")
	git(t, p, "add", "-A")
	git(t, p, "commit", "-qm", "initial")
	if out, err := exec.Command("cp", "-a", p, m).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	git(t, m, "commit", "-q", "--allow-empty", "-m", "agent")
	for _, b := range []string{"", "../../config", "a/../../b", "a..b", "-x", "a b", "x\x1b[31m", "a\nb", "a/.hidden",
		"a.lock", "a//b", "a/", "a.", "@", "HEAD", "a@{1}", "a~1", "a^", "a:b", "a?b", "a*b", "a[b", `a\b`, "/abs"} {
		_, err := review.ImportCommits(p, m, b)
		var pe *review.PathError
		if !errors.As(err, &pe) {
			t.Errorf("branch %q: %v, want a refusal", b, err)
		}
	}
	if refs := git(t, p, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/main" {
		t.Errorf("refs after refused names:\n%s", refs)
	}
	_, err := review.ImportCommits(p, m, "feature/x-1_2.3")
	must(t, err)
}
