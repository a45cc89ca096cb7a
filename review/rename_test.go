package review_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock/airlock/review"
)

func TestRenames(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	long := strings.Repeat("some line of code\n", 40)
	write(t, filepath.Join(p, "a.txt"), "exactly the same\n"+long, 0o644)
	write(t, filepath.Join(p, "c.txt"), "first\n"+long, 0o644)
	write(t, filepath.Join(p, "pkg/x.go"), "package x\n"+long, 0o644)
	write(t, filepath.Join(p, "pkg/y.go"), "package y\n"+long+"y\n", 0o644)
	write(t, filepath.Join(p, "keep.txt"), "unrelated\n", 0o644)
	pristine := filepath.Join(t.TempDir(), "pristine")
	must(t, exec.Command("cp", "-a", p, pristine).Run())
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(p, "a.txt"), &st))
	inode := st.Ino

	ws := mountWS(t, p)
	m := ws.Merged()
	must(t, os.Rename(filepath.Join(m, "a.txt"), filepath.Join(m, "b.txt")))
	must(t, os.Rename(filepath.Join(m, "c.txt"), filepath.Join(m, "d.txt")))
	write(t, filepath.Join(m, "d.txt"), "FIRST, edited\n"+long, 0o644)
	// A directory move: overlay refuses rename(2) of a lower directory
	// (EXDEV), so mv copies and deletes, as agents' tools do.
	if out, err := exec.Command("mv", filepath.Join(m, "pkg"), filepath.Join(m, "lib")).CombinedOutput(); err != nil {
		t.Fatalf("mv: %v %s", err, out)
	}
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	got := map[string]string{}
	for _, d := range diffs {
		got[d.Path] = string(d.Kind) + " " + d.From
	}
	for path, want := range map[string]string{
		"b.txt":    "renamed a.txt",
		"d.txt":    "renamed c.txt",
		"lib/x.go": "renamed pkg/x.go",
		"lib/y.go": "renamed pkg/y.go",
	} {
		if got[path] != want {
			t.Errorf("%s: %q, want %q (all %v)", path, got[path], want, got)
		}
	}
	// The patch applies with git apply and renames.
	var buf bytes.Buffer
	allChanges := make([]review.Change, len(diffs))
	for i, d := range diffs {
		allChanges[i] = d.Change
	}
	must(t, review.Patch(&buf, l, allChanges))
	if !strings.Contains(buf.String(), "rename from a.txt\nrename to b.txt") {
		t.Errorf("patch lacks the rename:\n%s", buf.String())
	}
	apply := exec.Command("git", "apply", "-")
	apply.Dir = pristine
	apply.Stdin = &buf
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(pristine, "d.txt")); !strings.HasPrefix(string(b), "FIRST, edited") {
		t.Errorf("patched d.txt = %q", b)
	}
	// Accept performs the renames.
	out, err := review.Accept(l, diffs, review.Selection{}, journal(t))
	must(t, err)
	for _, o := range out {
		if !o.Applied {
			t.Errorf("%s: %s", o.Path, o.Error)
		}
	}
	must(t, syscall.Stat(filepath.Join(p, "b.txt"), &st))
	if st.Ino != inode {
		t.Errorf("b.txt was copied, not renamed (inode %d, was %d)", st.Ino, inode)
	}
	for _, gone := range []string{"a.txt", "c.txt", "pkg"} {
		if _, err := os.Lstat(filepath.Join(p, gone)); err == nil {
			t.Errorf("%s still in the project after accepting its rename", gone)
		}
	}
	if left, _ := review.Review(l); len(left) != 0 {
		t.Errorf("left after accepting renames: %+v", left)
	}
}
