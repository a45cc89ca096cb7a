package snapshot

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/testenv"
	"golang.org/x/sys/unix"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	testenv.Root(t, "whiteouts and trusted xattrs")
}

// describe lists a tree: each path with its type, mode, owner, size,
// content digest, device, link target, xattrs and mtime.
func describe(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if p == root {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s %o %d:%d rdev=%d", p[len(root):], st.Mode, st.Uid, st.Gid, st.Rdev)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %q nlink=%d", b, st.Nlink)
		case unix.S_IFLNK:
			l, _ := os.Readlink(p)
			line += " -> " + l
		}
		// Directories' times change as they fill; a whiteout's time is not
		// carried (a deletion has none worth keeping).
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFDIR && t != unix.S_IFCHR {
			line += " mtime=" + time.Unix(st.Mtim.Sec, st.Mtim.Nsec).UTC().Format(time.RFC3339Nano)
		}
		xs := lxattrs(t, p)
		var keys []string
		for k, v := range xs {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		line += " " + strings.Join(keys, ",")
		out = append(out, line)
		return nil
	})
	return out
}

// lxattrs lists a file's extended attributes (not following symlinks).
func lxattrs(t *testing.T, p string) map[string]string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, k := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if k == "" {
			continue
		}
		v := make([]byte, 64<<10)
		if m, err := unix.Lgetxattr(p, k, v); err == nil {
			out[k] = string(v[:m])
		}
	}
	return out
}

// upperFixture writes what an overlay upper directory holds after a
// session: new and changed files, a deletion, an opaque directory, links.
func upperFixture(t testing.TB, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "src/pkg"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "src/pkg/new.go"), []byte("package pkg\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chown(filepath.Join(dir, "run.sh"), 1000, 1000))
	must(unix.Chmod(filepath.Join(dir, "run.sh"), 0o4755))
	must(os.Symlink("src/pkg/new.go", filepath.Join(dir, "link")))
	must(os.Link(filepath.Join(dir, "src/pkg/new.go"), filepath.Join(dir, "src/hard.go")))
	must(unix.Mknod(filepath.Join(dir, "README.md"), unix.S_IFCHR, 0))
	must(os.Mkdir(filepath.Join(dir, "vendor"), 0o750))
	must(unix.Lsetxattr(filepath.Join(dir, "vendor"), opaqueXattr, []byte("y"), 0))
	must(os.WriteFile(filepath.Join(dir, "vendor/only.txt"), []byte("only"), 0o600))
	must(unix.Lsetxattr(filepath.Join(dir, "src/pkg/new.go"), "user.origin", []byte("agent"), 0))
	must(unix.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	old := time.Date(2020, 1, 2, 3, 4, 5, 6000, time.UTC)
	must(os.Chtimes(filepath.Join(dir, "run.sh"), old, old))
	// Every time set in the past: one not carried over shows as "now".
	past := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, n := range []string{"src/pkg/new.go", "vendor/only.txt", "README.md", "link", "pipe"} {
		ts := []unix.Timespec{unix.NsecToTimespec(past.UnixNano()), unix.NsecToTimespec(past.UnixNano())}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, n), ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

func TestLayerRoundTrip(t *testing.T) {
	needRoot(t)
	src, dst := t.TempDir(), t.TempDir()
	upperFixture(t, src)
	var buf bytes.Buffer
	st, err := WriteLayer(&buf, Source{Root: root(t, src), Prefix: "workspace/"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Whiteouts != 2 || st.Dirs != 3 {
		t.Errorf("stats %+v: want 2 whiteouts (a deletion, an opaque dir) and 3 dirs", st)
	}
	// In the layer: OCI whiteouts, no overlay xattrs.
	names := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names[h.Name] = h
	}
	for _, n := range []string{"workspace/", "workspace/.wh.README.md", "workspace/vendor/.wh..wh..opq", "workspace/src/pkg/new.go"} {
		if names[n] == nil {
			t.Errorf("the layer has no %s", n)
		}
	}
	if h := names["workspace/src/hard.go"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "workspace/src/pkg/new.go" {
		if h2 := names["workspace/src/pkg/new.go"]; h2 == nil || h2.Typeflag != tar.TypeLink {
			t.Errorf("the hard link is not a link entry: %+v", h)
		}
	}
	for n, h := range names {
		for k := range h.PAXRecords {
			if strings.Contains(k, "trusted.overlay") {
				t.Errorf("%s carries %s", n, k)
			}
		}
	}

	if h := names["workspace/run.sh"]; h == nil || h.Mode != 0o4755 {
		t.Errorf("the layer does not record run.sh's set-uid bit: %+v", h)
	}
	if _, err := ApplyLayer(opener(buf.Bytes()), Target{Prefix: "workspace/", Root: root(t, dst)}, Limits{}); err != nil {
		t.Fatal(err)
	}
	// Applied, set-id bits are cleared.
	must(t, os.Chmod(filepath.Join(src, "run.sh"), 0o755))
	want, got := describe(t, src), describe(t, dst)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Errorf("applied tree differs\nwant:\n%s\ngot:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// TestLayerUnderOverlay mounts the applied layer as the upper of a real
// overlay: the merged view equals the original one.
func TestLayerUnderOverlay(t *testing.T) {
	needRoot(t)
	lower := t.TempDir()
	os.WriteFile(filepath.Join(lower, "README.md"), []byte("readme"), 0o644)
	os.MkdirAll(filepath.Join(lower, "vendor/lib"), 0o755)
	os.WriteFile(filepath.Join(lower, "vendor/lib/a.go"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(lower, "keep.txt"), []byte("keep"), 0o644)
	merged := func(upper string) []string {
		base := t.TempDir()
		work, mnt := filepath.Join(base, "work"), filepath.Join(base, "mnt")
		os.Mkdir(work, 0o700)
		os.Mkdir(mnt, 0o700)
		if err := unix.Mount("overlay", mnt, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
			testenv.Missing(t, "overlay mount: "+err.Error())
		}
		defer unix.Unmount(mnt, 0)
		return describe(t, mnt)
	}
	src, dst := t.TempDir(), t.TempDir()
	upperFixture(t, src)
	if _, err := applyTo(t, writeFrom(t, src), dst); err != nil {
		t.Fatal(err)
	}
	must(t, os.Chmod(filepath.Join(src, "run.sh"), 0o755)) // set-id bits are not applied
	want, got := merged(src), merged(dst)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Errorf("merged views differ\nwant:\n%s\ngot:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	for _, l := range got {
		if strings.HasPrefix(l, "/README.md ") || strings.HasPrefix(l, "/vendor/lib") {
			t.Errorf("a deleted or hidden lower file shows: %s", l)
		}
	}
}

func TestApplyLayerSkipsAndRoutes(t *testing.T) {
	needRoot(t)
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "home/airlock/.cache"), 0o755)
	os.WriteFile(filepath.Join(src, "home/airlock/.cache/x"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(src, "usr/bin"), 0o755)
	os.WriteFile(filepath.Join(src, "usr/bin/tool"), []byte("tool"), 0o755)
	data := writeFrom(t, src)
	top, home := t.TempDir(), t.TempDir()
	homeOnly := func(rel string) bool { return rel == "home/airlock" || strings.HasPrefix(rel, "home/airlock/") }
	if _, err := ApplyLayer(opener(data), Target{Root: root(t, top), Skip: homeOnly}, Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyLayer(opener(data), Target{Prefix: "home/airlock/", Root: root(t, home)}, Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(top, "home/airlock")); err == nil {
		t.Error("the skipped path was written")
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".cache/x")); string(b) != "x" {
		t.Error("the routed path was not written")
	}
	if b, _ := os.ReadFile(filepath.Join(top, "usr/bin/tool")); string(b) != "tool" {
		t.Error("the root path was not written")
	}
}
