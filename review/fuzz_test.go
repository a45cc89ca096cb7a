package review

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzHunks: the hunks between any two texts rebuild the second from the
// first, and taking any subset of their lines never fails or panics.
func FuzzHunks(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\nd", uint64(5))
	f.Add("", "x\n", uint64(0))
	f.Add("same\n", "same\n", uint64(1))
	f.Fuzz(func(t *testing.T, a, b string, mask uint64) {
		if len(a) > 4096 || len(b) > 4096 {
			return
		}
		hs := Hunks(a, b)
		got, err := applyHunks(a, hs, func(*Hunk, int) bool { return true })
		if err != nil || got != b {
			t.Fatalf("Hunks(%q, %q) rebuild %q, %v", a, b, got, err)
		}
		if _, err := applyHunks(a, hs, func(h *Hunk, i int) bool { return mask>>(uint(i)%64)&1 == 1 }); err != nil {
			t.Fatalf("partial apply: %v", err)
		}
		var es []edit
		for i := range hs {
			es = append(es, hunkEdits(&hs[i], func(h *Hunk, i int) bool { return true })...)
		}
		if got, err := applyEdits(splitLines(a), es); err != nil || got != b {
			t.Fatalf("edits rebuild %q, %v", got, err)
		}
	})
}

// FuzzParsePatch: any input parses or fails cleanly; what parses names
// only clean relative paths outside .git; applying it to a small project
// (text, binary and symlink) fails cleanly or touches only clean paths and
// never writes more than an edited patch may.
func FuzzParsePatch(f *testing.F) {
	f.Add("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	f.Add("--- /dev/null\n+++ \"b/q\\\"n\"\n@@ -0,0 +1,2 @@\n+1\n+2\n\\ No newline at end of file\n")
	f.Add("--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n")
	f.Add("diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to y\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+c\n")
	f.Add("diff --git a/x b/x\nold mode 100644\nnew mode 100755\n")
	f.Add("diff --git a/l b/l\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n")
	var bin bytes.Buffer
	bin.WriteString("diff --git a/b.bin b/b.bin\nindex " + blobID([]byte("\x00\x01")) + ".." + blobID([]byte("\x00\x02")) + " 100644\nGIT binary patch\n")
	binaryLiteral(&bin, []byte("\x00\x02"))
	binaryLiteral(&bin, []byte("\x00\x01"))
	f.Add(bin.String())
	project := map[string]*version{
		"x":     {t: File, mode: 0o644, data: []byte("a\n")},
		"b.bin": {t: File, mode: 0o644, data: []byte("\x00\x01")},
		"l":     {t: Symlink, mode: fs.ModeSymlink | 0o777, data: []byte("x")},
	}
	f.Fuzz(func(t *testing.T, s string) {
		files, err := parsePatch(strings.NewReader(s))
		if err != nil {
			return
		}
		clean := func(p string) {
			if c, err := CleanPath(p); err != nil || c != p || c == "." || strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), ".git") {
				t.Fatalf("unclean path %q from %q", p, s)
			}
		}
		for _, pf := range files {
			for _, p := range []string{pf.OldName, pf.NewName} {
				if p != "" {
					clean(p)
				}
			}
		}
		out, err := applyPatch(files, func(rel string) (*version, error) { return project[rel], nil })
		if err != nil {
			return
		}
		written := 0
		for _, r := range out {
			clean(r.path)
			if r.from != "" {
				clean(r.from)
			}
			if r.now != nil {
				written += len(r.now.data)
			}
		}
		if written > maxPatchedBytes {
			t.Fatalf("the patch wrote %d bytes", written)
		}
	})
}

// FuzzPathResolution: whatever path an accept is asked to write, nothing
// is created outside the project, even with symlinks planted in it.
func FuzzPathResolution(f *testing.F) {
	f.Add("a/b/c.txt")
	f.Add("link/escape.txt")
	f.Add("../up.txt")
	f.Add("dir/../../x")
	f.Add("/abs/path")
	f.Add("file/child")
	f.Fuzz(func(t *testing.T, p string) {
		root := t.TempDir()
		outside := t.TempDir()
		os.Symlink(outside, filepath.Join(root, "link"))
		os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
		clean, err := CleanPath(p)
		if err != nil || clean == "." || strings.ContainsRune(clean, 0) {
			return
		}
		tr, err := openTree(root, os.Getuid(), os.Getgid())
		if err != nil {
			t.Fatal(err)
		}
		defer tr.close()
		if pfd, name, err := tr.parent(clean, func(string) os.FileMode { return 0o755 }); err == nil {
			if fd, err := unix.Openat(pfd, name, unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW, 0o644); err == nil {
				unix.Close(fd)
			}
		}
		entries, _ := os.ReadDir(outside)
		if len(entries) > 0 {
			t.Fatalf("path %q created %s outside the project", p, entries[0].Name())
		}
	})
}
