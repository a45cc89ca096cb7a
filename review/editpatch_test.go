package review_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
)

// editScenario is one change of every kind an edited patch carries:
// two text hunks, a mode change, a binary file git writes as a delta and
// one it writes as a literal, a rename with an edit, a copy with an edit,
// a deletion, a new file, a last line without a newline, a new symlink.
func editScenario(t *testing.T, dir string) {
	t.Helper()
	at := func(p string) string { return filepath.Join(dir, p) }
	write(t, at("text.txt"), numbered(30, map[int]string{2: "agent two\n", 28: "agent twenty-eight\n"}), 0o644)
	must(t, os.Chmod(at("script.sh"), 0o755))
	big := bigBinary()
	copy(big[30000:], "agent was here")
	must(t, os.WriteFile(at("img.bin"), big, 0o644))
	must(t, os.WriteFile(at("small.bin"), []byte("\x00\x01agent\x00"), 0o644))
	must(t, os.Remove(at("old.txt")))
	write(t, at("moved/new.txt"), numbered(20, map[int]string{10: "renamed and edited\n"}), 0o644)
	write(t, at("copy.txt"), numbered(25, map[int]string{1: "copied and edited\n"}), 0o644)
	must(t, os.Remove(at("gone.txt")))
	write(t, at("added.txt"), "brand new\n", 0o644)
	write(t, at("noeol.txt"), "first\nsecond, no newline", 0o644)
	must(t, os.Symlink("text.txt", at("link")))
}

// editProject writes the project the scenario starts from.
func editProject(t *testing.T, dir string) {
	t.Helper()
	at := func(p string) string { return filepath.Join(dir, p) }
	write(t, at("text.txt"), numbered(30, nil), 0o644)
	write(t, at("script.sh"), "#!/bin/sh\necho hi\n", 0o644)
	must(t, os.WriteFile(at("img.bin"), bigBinary(), 0o644))
	must(t, os.WriteFile(at("small.bin"), []byte("\x00\x01host\x00"), 0o644))
	write(t, at("old.txt"), numbered(20, nil), 0o644)
	write(t, at("src.txt"), numbered(25, nil), 0o644)
	write(t, at("gone.txt"), "to be deleted\n", 0o644)
	write(t, at("noeol.txt"), "first\nsecond", 0o644)
}

// bigBinary is 64 KiB of binary data that git diffs as a delta when a few
// bytes change.
func bigBinary() []byte {
	b := make([]byte, 64<<10)
	rand.New(rand.NewSource(1)).Read(b)
	b[0] = 0
	return b
}

// gitPatch makes the scenario in a git repository of its own and returns
// what `git diff --binary` with rename and copy detection says of it, and
// the directory with the result.
func gitPatch(t *testing.T) (string, string) {
	g := t.TempDir()
	editProject(t, g)
	git(t, g, "init", "-q")
	git(t, g, "add", "-A")
	git(t, g, "commit", "-qm", "base")
	editScenario(t, g)
	git(t, g, "add", "-A")
	diff := exec.Command("git", "diff", "--cached", "--binary", "-M", "--find-copies-harder")
	diff.Dir = g
	out, err := diff.Output()
	must(t, err)
	return string(out), g
}

// editSession is a session over a fresh project in which the agent made
// the scenario's changes.
func editSession(t *testing.T) (string, review.Layers, []review.FileDiff) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	editProject(t, p)
	ws := mountWS(t, p)
	base, err := review.CaptureBase(p, filepath.Join(t.TempDir(), "base"), ws.Upper(), nil)
	must(t, err)
	editScenario(t, ws.Merged())
	l := review.Layers{Upper: ws.Upper(), Project: p, Base: base}
	diffs, err := review.Review(l)
	must(t, err)
	return p, l, diffs
}

// snapshot is a tree's files, symlinks and modes, for comparing trees.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("%v %q", fi.Mode().Perm(), b)
		}
		return nil
	}))
	return out
}

func sameTrees(t *testing.T, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: got %.80s, want %.80s", p, got[p], w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s should not be there", p)
		}
	}
}

// A patch git made of the same changes (binary delta and literal, rename,
// copy, mode, new, deleted, no newline at the end, symlink) is accepted
// whole and leaves the project exactly as git's own tree.
func TestAcceptGitPatch(t *testing.T) {
	patch, g := gitPatch(t)
	for _, want := range []string{"GIT binary patch\ndelta ", "GIT binary patch\nliteral ", "rename from old.txt", "copy from src.txt", "old mode 100644\nnew mode 100755", "deleted file mode", "new file mode 120000", `\ No newline at end of file`} {
		if !strings.Contains(patch, want) {
			t.Fatalf("git's patch lacks %q, the test does not cover it:\n%s", want, patch)
		}
	}
	p, l, diffs := editSession(t)
	out, err := review.Accept(l, diffs, review.Selection{Patch: patch}, journal(t))
	must(t, err)
	for _, o := range out {
		if !o.Applied {
			t.Errorf("%s not applied: %s", o.Path, o.Error)
		}
	}
	sameTrees(t, snapshot(t, p), snapshot(t, g))
	if after, err := review.Review(l); err != nil || len(after) != 0 {
		t.Errorf("the session still differs from the project: %v %+v", err, after)
	}
}

// The user edits the patch `airlock diff --patch` wrote: drops a hunk,
// keeps a binary file and a rename, leaves other files out. Exactly that
// is written.
func TestAcceptEditedPatchWithBinaryAndRename(t *testing.T) {
	p, l, diffs := editSession(t)
	before := snapshot(t, p)
	changes := make([]review.Change, len(diffs))
	for i, d := range diffs {
		changes[i] = d.Change
	}
	var buf strings.Builder
	must(t, review.Patch(&buf, l, changes))
	keep := map[string]bool{"text.txt": true, "img.bin": true, "moved/new.txt": true}
	var edited strings.Builder
	for _, sec := range strings.SplitAfter(buf.String(), "\ndiff --git ") {
		name := strings.Fields(strings.TrimPrefix(sec, "diff --git "))[1]
		if !keep[strings.TrimPrefix(name, "b/")] {
			continue
		}
		if !strings.HasPrefix(sec, "diff --git ") {
			sec = "diff --git " + sec
		}
		sec = strings.TrimSuffix(sec, "diff --git ")
		if strings.Contains(sec, "agent twenty-eight") {
			// Drop the second hunk of text.txt.
			sec = sec[:strings.LastIndex(sec, "\n@@ ")+1]
		}
		edited.WriteString(sec)
	}
	patch := edited.String()
	if !strings.Contains(patch, "GIT binary patch") || !strings.Contains(patch, "rename from old.txt") || strings.Contains(patch, "agent twenty-eight") {
		t.Fatalf("the edit went wrong:\n%s", patch)
	}
	out, err := review.Accept(l, diffs, review.Selection{Patch: patch}, journal(t))
	must(t, err)
	if len(out) != 3 {
		t.Errorf("want text.txt, img.bin and the rename accepted: %+v", out)
	}
	want := before
	want["text.txt"] = fmt.Sprintf("%v %q", fs.FileMode(0o644), numbered(30, map[int]string{2: "agent two\n"}))
	img, _ := os.ReadFile(filepath.Join(p, "img.bin"))
	wantImg := bigBinary()
	copy(wantImg[30000:], "agent was here")
	if !bytes.Equal(img, wantImg) {
		t.Errorf("img.bin is not the session's")
	}
	want["img.bin"] = snapshot(t, p)["img.bin"]
	delete(want, "old.txt")
	want["moved/new.txt"] = fmt.Sprintf("%v %q", fs.FileMode(0o644), numbered(20, map[int]string{10: "renamed and edited\n"}))
	sameTrees(t, snapshot(t, p), want)
	// The dropped hunk is still the session's, and the next diff shows it alone.
	after, err := review.Review(l)
	must(t, err)
	for _, d := range after {
		if d.Path == "text.txt" && (len(d.Hunks) != 1 || !strings.Contains(strings.Join(d.Hunks[0].Lines, ""), "+agent twenty-eight")) {
			t.Errorf("text.txt after the edited patch: %+v", d.Hunks)
		}
		if d.Path == "img.bin" || d.Path == "moved/new.txt" {
			t.Errorf("%s is still a change after it was accepted", d.Path)
		}
	}
}

// A patch never reads or writes through a symlink in the project, even
// where the session replaced that symlink with a directory.
func TestAcceptPatchThroughSymlink(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	outside := t.TempDir()
	write(t, filepath.Join(outside, "x.txt"), "outside\n", 0o644)
	must(t, os.MkdirAll(p, 0o755))
	must(t, os.Symlink(outside, filepath.Join(p, "lnk")))
	ws := mountWS(t, p)
	m := ws.Merged()
	must(t, os.Remove(filepath.Join(m, "lnk")))
	write(t, filepath.Join(m, "lnk/x.txt"), "session\n", 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	for _, patch := range []string{
		"diff --git a/lnk/x.txt b/lnk/x.txt\n--- a/lnk/x.txt\n+++ b/lnk/x.txt\n@@ -1 +1 @@\n-outside\n+session\n",
		"diff --git a/lnk/x.txt b/lnk/x.txt\nnew file mode 100644\n--- /dev/null\n+++ b/lnk/x.txt\n@@ -0,0 +1 @@\n+session\n",
	} {
		_, err := review.Accept(l, diffs, review.Selection{Patch: patch}, journal(t))
		if err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("a patch through the project's symlink: %v", err)
		}
		if got := read(t, filepath.Join(outside, "x.txt")); got != "outside\n" {
			t.Fatalf("written through the symlink: %q", got)
		}
	}
}

// Hostile and stale patches are refused whole, with an error that says
// which file and what to do, and nothing is written.
func TestAcceptPatchRefused(t *testing.T) {
	patch, _ := gitPatch(t)
	textHunk2 := "@@ -25,6 +25,6 @@"
	if !strings.Contains(patch, textHunk2) {
		t.Fatalf("git's patch of text.txt has no %q:\n%s", textHunk2, patch)
	}
	cases := []struct {
		name   string
		patch  string
		host   func(p string) // the project changes after the patch was made
		class  errdefs.Class
		saying []string
	}{
		{"a hunk no longer matches", patch, func(p string) {
			write(t, filepath.Join(p, "text.txt"), numbered(30, map[int]string{27: "host edit\n"}), 0o644)
		}, errdefs.Conflict, []string{"text.txt", "hunk 2 of 2", textHunk2, "airlock diff ID --patch", "nothing was accepted"}},
		{"binary data made against another file", patch, func(p string) {
			must(t, os.WriteFile(filepath.Join(p, "small.bin"), []byte("\x00host changed"), 0o644))
		}, errdefs.Conflict, []string{"small.bin", "another version"}},
		{"a new file the host made meanwhile", patch, func(p string) {
			write(t, filepath.Join(p, "added.txt"), "host\n", 0o644)
		}, errdefs.Conflict, []string{"added.txt", "already has"}},
		{"damaged binary data", damageBinary(t, patch), nil, errdefs.Invalid, []string{"binary"}},
		{"an inflated binary over the limit", "diff --git a/small.bin b/small.bin\nindex " + blob("\x00\x01host\x00") + ".." + blob("x") + " 100644\nGIT binary patch\nliteral 2000000000\nHcmV?d00001\n\nliteral 0\nHcmV?d00001\n\n", nil, errdefs.Invalid, []string{"small.bin", "64 MiB"}},
		{"a huge hunk header", "diff --git a/text.txt b/text.txt\n--- a/text.txt\n+++ b/text.txt\n@@ -1,2000000000 +1,2000000000 @@\n line B\n-line C\n+x\n", nil, errdefs.Invalid, []string{"miscounts"}},
		{"a path leaving the project", "--- a/../escape.txt\n+++ b/../escape.txt\n@@ -0,0 +1 @@\n+x\n", nil, errdefs.Invalid, []string{"leaves the project"}},
		{"an absolute path", "diff --git a/etc/passwd b/etc/passwd\nrename from /etc/passwd\nrename to text.txt\n", nil, errdefs.Invalid, []string{"absolute"}},
		{"a write into .git", "diff --git a/.git/config b/.git/config\nnew file mode 100644\n--- /dev/null\n+++ b/.git/config\n@@ -0,0 +1 @@\n+[core]\n", nil, errdefs.Invalid, []string{".git"}},
		{"a file the session did not change", "diff --git a/src.txt b/src.txt\n--- a/src.txt\n+++ b/src.txt\n@@ -1 +1 @@\n-line B\n+x\n", nil, errdefs.NotFound, []string{"src.txt", "did not change"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, l, diffs := editSession(t)
			if tc.host != nil {
				tc.host(p)
			}
			before := snapshot(t, p)
			out, err := review.Accept(l, diffs, review.Selection{Patch: tc.patch}, journal(t))
			if err == nil {
				t.Fatalf("accepted: %+v", out)
			}
			if got := classOf(err); got != tc.class {
				t.Errorf("class %q, want %q: %v", got, tc.class, err)
			}
			t.Log(err)
			for _, s := range tc.saying {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q: %v", s, err)
				}
			}
			sameTrees(t, snapshot(t, p), before)
		})
	}
}

// classOf is the class the engine gives err (engine.selectErr and the
// ChangedError mapping).
func classOf(err error) errdefs.Class {
	var pe *review.PathError
	var nf *review.NotFoundError
	switch {
	case errors.As(err, &pe):
		return errdefs.Invalid
	case errors.As(err, &nf):
		return errdefs.NotFound
	}
	return errdefs.ClassOf(err)
}

func blob(s string) string {
	h := exec.Command("git", "hash-object", "--stdin")
	h.Stdin = strings.NewReader(s)
	out, _ := h.Output()
	return strings.TrimSpace(string(out))
}

// damageBinary changes one base85 character in the first binary hunk.
func damageBinary(t *testing.T, patch string) string {
	i := strings.Index(patch, "GIT binary patch\n")
	j := strings.IndexByte(patch[i+len("GIT binary patch\n"):], '\n') + i + len("GIT binary patch\n") + 10
	b := []byte(patch)
	if b[j] == '0' {
		b[j] = '1'
	} else {
		b[j] = '0'
	}
	return string(b)
}
