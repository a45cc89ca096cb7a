package review_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/review"
)

func numbered(n int, edit map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := edit[i]; ok {
			b.WriteString(s)
			continue
		}
		b.WriteString("line " + string(rune('A'+i%26)) + "\n")
	}
	return b.String()
}

// session sets up a project with f.txt, captures its base as a session
// start does, and mounts a workspace.
func session(t *testing.T, content string, git bool) (string, review.Layers, string) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "f.txt"), content, 0o644)
	write(t, filepath.Join(p, "other.txt"), "other\n", 0o644)
	if git {
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = p
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
	}
	ws := mountWS(t, p)
	base, err := review.CaptureBase(p, filepath.Join(t.TempDir(), "base"), ws.Upper(), nil)
	must(t, err)
	return p, review.Layers{Upper: ws.Upper(), Project: p, Base: base}, ws.Merged()
}

func fileDiff(t *testing.T, l review.Layers, path string) review.FileDiff {
	t.Helper()
	diffs, err := review.Review(l)
	must(t, err)
	for _, d := range diffs {
		if d.Path == path {
			return d
		}
	}
	t.Fatalf("no diff for %s in %+v", path, diffs)
	return review.FileDiff{}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

func TestPerHunkAcceptAndDiscard(t *testing.T) {
	orig := numbered(30, nil)
	p, l, m := session(t, orig, false)
	agent := numbered(30, map[int]string{2: "TWO\n", 28: "TWENTY-EIGHT\nextra\n"})
	write(t, filepath.Join(m, "f.txt"), agent, 0o644)
	d := fileDiff(t, l, "f.txt")
	if len(d.Hunks) != 2 {
		t.Fatalf("want 2 hunks, got %+v", d.Hunks)
	}
	first, second := d.Hunks[0].ID, d.Hunks[1].ID
	out, err := review.Accept(l, []review.FileDiff{d}, review.Selection{Hunks: []string{second}}, journal(t))
	must(t, err)
	if !out[0].Applied || !out[0].Partial {
		t.Fatalf("outcome %+v", out)
	}
	want := numbered(30, map[int]string{28: "TWENTY-EIGHT\nextra\n"})
	if got := read(t, filepath.Join(p, "f.txt")); got != want {
		t.Fatalf("host after accepting one hunk:\n%s", got)
	}
	// The other hunk stays in the diff, under the same id.
	d = fileDiff(t, l, "f.txt")
	if len(d.Hunks) != 1 || d.Hunks[0].ID != first {
		t.Fatalf("after a partial accept: %+v (want only %s)", d.Hunks, first)
	}
	// Discarding it leaves the session equal to the project.
	_, err = review.Discard(l, m, []review.FileDiff{d}, review.Selection{Hunks: []string{first}})
	must(t, err)
	if diffs, _ := review.Review(l); len(diffs) != 0 {
		t.Fatalf("after discarding the last hunk: %+v", diffs)
	}
	if got := read(t, filepath.Join(m, "f.txt")); got != want {
		t.Fatalf("session after discarding a hunk:\n%s", got)
	}
	// Unknown ids are named.
	if _, err := review.Accept(l, nil, review.Selection{Hunks: []string{"nope"}}, journal(t)); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown hunk: %v", err)
	}
}

func TestAcceptSelectedLines(t *testing.T) {
	p, l, m := session(t, "a\nb\nc\n", false)
	write(t, filepath.Join(m, "f.txt"), "a\nB1\nB2\nc\n", 0o644)
	d := fileDiff(t, l, "f.txt")
	// Lines of the hunk: " a", "-b", "+B1", "+B2", " c": take the removal
	// of b and only B2.
	if len(d.Hunks) != 1 || len(d.Hunks[0].Lines) != 5 {
		t.Fatalf("hunks %+v", d.Hunks)
	}
	id := d.Hunks[0].ID
	_, err := review.Accept(l, []review.FileDiff{d}, review.Selection{Hunks: []string{id}, Lines: map[string][]int{id: {2, 4}}}, journal(t))
	must(t, err)
	if got := read(t, filepath.Join(p, "f.txt")); got != "a\nB2\nc\n" {
		t.Fatalf("host after accepting lines 2 and 4: %q", got)
	}
	if d := fileDiff(t, l, "f.txt"); len(d.Hunks) != 1 || strings.Join(d.Hunks[0].Lines, "") != " a\n+B1\n B2\n c\n" {
		t.Fatalf("left in the diff: %+v", d.Hunks)
	}
}

func TestThreeWay(t *testing.T) {
	for _, git := range []bool{false, true} {
		name := "plain"
		if git {
			name = "git"
		}
		t.Run(name+"/clean merge", func(t *testing.T) {
			p, l, m := session(t, numbered(30, nil), git)
			if !git {
				must(t, l.Base.CaptureContent(context.Background(), l.Upper, 1<<20, 1<<30))
			}
			write(t, filepath.Join(m, "f.txt"), numbered(30, map[int]string{3: "agent\n"}), 0o644)
			write(t, filepath.Join(p, "f.txt"), numbered(30, map[int]string{25: "host\n"}), 0o644)
			d := fileDiff(t, l, "f.txt")
			if d.Conflict || !d.Merged || !d.HostChanged {
				t.Fatalf("want a clean merge: %+v", d.Change)
			}
			_, err := review.Accept(l, []review.FileDiff{d}, review.Selection{}, journal(t))
			must(t, err)
			if got, want := read(t, filepath.Join(p, "f.txt")), numbered(30, map[int]string{3: "agent\n", 25: "host\n"}); got != want {
				t.Fatalf("merged:\n%s", got)
			}
		})
		t.Run(name+"/overlap", func(t *testing.T) {
			p, l, m := session(t, numbered(10, nil), git)
			if !git {
				must(t, l.Base.CaptureContent(context.Background(), l.Upper, 1<<20, 1<<30))
			}
			write(t, filepath.Join(m, "f.txt"), numbered(10, map[int]string{5: "agent five\n", 9: "agent nine\n"}), 0o644)
			hostVersion := numbered(10, map[int]string{5: "host five\n"})
			write(t, filepath.Join(p, "f.txt"), hostVersion, 0o644)
			d := fileDiff(t, l, "f.txt")
			if !d.Conflict || len(d.Conflicts) != 1 || d.Conflicts[0].HostStart != 5 {
				t.Fatalf("want one conflict at line 5: %+v %+v", d.Change, d.Conflicts)
			}
			c := d.Conflicts[0]
			if strings.Join(c.Agent, "") != "agent five\n" || strings.Join(c.Host, "") != "host five\n" || len(c.Base) != 1 {
				t.Fatalf("conflict sides %+v", c)
			}
			// Never silently: without a choice nothing is written.
			out, err := review.Accept(l, []review.FileDiff{d}, review.Selection{}, journal(t))
			must(t, err)
			if out[0].Applied || !strings.Contains(out[0].Error, "--take") {
				t.Fatalf("unresolved conflict accepted: %+v", out)
			}
			if read(t, filepath.Join(p, "f.txt")) != hostVersion {
				t.Fatalf("the host file changed without a choice")
			}
			// Per conflict: the agent's side; the clean hunk (line 9) is
			// a separate choice and stays in the diff.
			_, err = review.Accept(l, []review.FileDiff{d}, review.Selection{Hunks: []string{c.ID}, Take: review.TakeAgent}, journal(t))
			must(t, err)
			if got := read(t, filepath.Join(p, "f.txt")); got != numbered(10, map[int]string{5: "agent five\n"}) {
				t.Fatalf("after taking the agent's side:\n%s", got)
			}
			d = fileDiff(t, l, "f.txt")
			if d.Conflict || len(d.Hunks) != 1 {
				t.Fatalf("after settling the conflict: %+v", d)
			}
		})
	}
	t.Run("markers only when asked", func(t *testing.T) {
		p, l, m := session(t, numbered(5, nil), false)
		must(t, l.Base.CaptureContent(context.Background(), l.Upper, 1<<20, 1<<30))
		write(t, filepath.Join(m, "f.txt"), numbered(5, map[int]string{3: "agent\n"}), 0o644)
		write(t, filepath.Join(p, "f.txt"), numbered(5, map[int]string{3: "host\n"}), 0o644)
		d := fileDiff(t, l, "f.txt")
		_, err := review.Accept(l, []review.FileDiff{d}, review.Selection{Take: review.TakeMarkers}, journal(t))
		must(t, err)
		got := read(t, filepath.Join(p, "f.txt"))
		if !strings.Contains(got, "<<<<<<< host\nhost\n||||||| base\nline D\n=======\nagent\n>>>>>>> session\n") {
			t.Fatalf("markers:\n%s", got)
		}
	})
	t.Run("unknown base is a whole-file conflict", func(t *testing.T) {
		p, l, m := session(t, numbered(5, nil), false) // no content capture
		write(t, filepath.Join(m, "f.txt"), numbered(5, map[int]string{1: "agent\n"}), 0o644)
		write(t, filepath.Join(p, "f.txt"), numbered(5, map[int]string{5: "host\n"}), 0o644)
		d := fileDiff(t, l, "f.txt")
		if !d.Conflict || !strings.Contains(d.ConflictReason, "not captured") {
			t.Fatalf("%+v", d.Change)
		}
		_, err := review.Accept(l, []review.FileDiff{d}, review.Selection{Take: review.TakeHost}, journal(t))
		must(t, err)
		if got := read(t, filepath.Join(p, "f.txt")); got != numbered(5, map[int]string{5: "host\n"}) {
			t.Fatalf("take host changed the file: %q", got)
		}
	})
	t.Run("deleted on the host", func(t *testing.T) {
		p, l, m := session(t, "x\n", false)
		write(t, filepath.Join(m, "f.txt"), "agent edit\n", 0o644)
		must(t, os.Remove(filepath.Join(p, "f.txt")))
		d := fileDiff(t, l, "f.txt")
		if !d.Conflict || !strings.Contains(d.ConflictReason, "deleted on the host") {
			t.Fatalf("%+v", d.Change)
		}
		_, err := review.Accept(l, []review.FileDiff{d}, review.Selection{Take: review.TakeAgent}, journal(t))
		must(t, err)
		if got := read(t, filepath.Join(p, "f.txt")); got != "agent edit\n" {
			t.Fatalf("take agent: %q", got)
		}
	})
	t.Run("deleted in the session", func(t *testing.T) {
		p, l, m := session(t, "x\n", false)
		must(t, os.Remove(filepath.Join(m, "f.txt")))
		write(t, filepath.Join(p, "f.txt"), "host edit\n", 0o644)
		d := fileDiff(t, l, "f.txt")
		if !d.Conflict || d.Kind != review.Deleted {
			t.Fatalf("%+v", d.Change)
		}
		out, _ := review.Accept(l, []review.FileDiff{d}, review.Selection{}, journal(t))
		if out[0].Applied {
			t.Fatalf("deleted a file the host changed without asking")
		}
		if _, err := os.Stat(filepath.Join(p, "f.txt")); err != nil {
			t.Fatalf("host file gone: %v", err)
		}
	})
}

func TestAcceptEditedPatch(t *testing.T) {
	p, l, m := session(t, "a\nb\nc\n", false)
	write(t, filepath.Join(m, "f.txt"), "a\nagent b\nc\nagent d\n", 0o644)
	write(t, filepath.Join(m, "other.txt"), "other changed\n", 0o644)
	diffs, err := review.Review(l)
	must(t, err)
	changes := make([]review.Change, len(diffs))
	for i, d := range diffs {
		changes[i] = d.Change
	}
	var buf strings.Builder
	must(t, review.Patch(&buf, l, changes))
	// The user keeps only f.txt, drops the "agent d" line and rewords the
	// other one, as `git add -e` lets you.
	patch := buf.String()
	patch = patch[:strings.Index(patch, "diff --git a/other.txt")]
	patch = strings.Replace(patch, "+agent b\n", "+edited b\n", 1)
	patch = strings.Replace(patch, "@@ -1,3 +1,4 @@", "@@ -1,3 +1,3 @@", 1)
	patch = strings.Replace(patch, "+agent d\n", "", 1)
	out, err := review.Accept(l, diffs, review.Selection{Patch: patch}, journal(t))
	must(t, err)
	if len(out) != 1 || !out[0].Applied {
		t.Fatalf("%+v\npatch:\n%s", out, patch)
	}
	if got := read(t, filepath.Join(p, "f.txt")); got != "a\nedited b\nc\n" {
		t.Fatalf("host after the edited patch: %q", got)
	}
	if got := read(t, filepath.Join(p, "other.txt")); got != "other\n" {
		t.Fatalf("other.txt was not in the patch but changed: %q", got)
	}
	// A patch touching a file the session did not change is refused.
	bad := "--- a/unrelated.txt\n+++ b/unrelated.txt\n@@ -0,0 +1 @@\n+x\n"
	if _, err := review.Accept(l, diffs, review.Selection{Patch: bad}, journal(t)); err == nil {
		t.Errorf("a patch outside the session's changes was accepted")
	}
}

// TestWalkAfterSessionWrites covers a git project whose background walk
// reaches files the session already wrote: tracked files take their start
// state from the git index, untracked ones become conflicts if the host
// changes them too — never a silent overwrite.
func TestWalkAfterSessionWrites(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "f.txt"), numbered(20, nil), 0o644)
	write(t, filepath.Join(p, "g.txt"), numbered(20, nil), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "f.txt", "g.txt"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = p
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	write(t, filepath.Join(p, "untracked.txt"), "u\n", 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	// The session writes before the walk gets there.
	write(t, filepath.Join(m, "f.txt"), numbered(20, map[int]string{2: "agent\n"}), 0o644)
	write(t, filepath.Join(m, "g.txt"), numbered(20, map[int]string{2: "agent\n"}), 0o644)
	write(t, filepath.Join(m, "untracked.txt"), "agent u\n", 0o644)
	base, err := review.CaptureBase(p, filepath.Join(t.TempDir(), "base"), ws.Upper(), nil)
	must(t, err)
	l := review.Layers{Upper: ws.Upper(), Project: p, Base: base}
	if d := fileDiff(t, l, "f.txt"); d.Conflict || d.HostChanged {
		t.Fatalf("untouched tracked file: %+v", d.Change)
	}
	// Now the host edits g.txt elsewhere and the untracked file.
	write(t, filepath.Join(p, "g.txt"), numbered(20, map[int]string{18: "host\n"}), 0o644)
	write(t, filepath.Join(p, "untracked.txt"), "host u\n", 0o644)
	if d := fileDiff(t, l, "g.txt"); d.Conflict || !d.Merged {
		t.Fatalf("tracked file changed on both sides apart: want a merge from the index's base: %+v", d.Change)
	}
	if d := fileDiff(t, l, "untracked.txt"); !d.Conflict {
		t.Fatalf("untracked file written before the walk and changed on the host: want a conflict: %+v", d.Change)
	}
}

// TestCaptureTouchedFirst: the start content of what the session already
// changed is captured before the rest, so with room for one file only,
// a file the session and then the host changed still merges.
func TestCaptureTouchedFirst(t *testing.T) {
	p, l, m := session(t, "aaaaa\n", false) // f.txt and other.txt, 6 bytes each
	write(t, filepath.Join(m, "other.txt"), "other\nagent\n", 0o644)
	must(t, l.Base.CaptureContent(context.Background(), l.Upper, 1<<20, 6))
	write(t, filepath.Join(p, "other.txt"), "host\nother\n", 0o644)
	if d := fileDiff(t, l, "other.txt"); d.Conflict || !d.Merged {
		t.Fatalf("the session's file was not captured first: %+v", d.Change)
	}
}
