package snapshot

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/testenv"
	"golang.org/x/sys/unix"
)

// tmpfs mounts a small tmpfs (a session's workspace is one) for the test.
func tmpfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("airlock-test", dir, "tmpfs", 0, "size=64m"); err != nil {
		testenv.Missing(t, "mount a tmpfs: "+err.Error())
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// cacheApply applies layer data (under prefix) into the cache's fresh
// directory.
func cacheApply(data []byte, prefix string) func(*confined.Root) error {
	return func(r *confined.Root) error {
		_, err := ApplyLayer(opener(data), Target{Prefix: prefix, Root: r}, Limits{})
		return err
	}
}

// TestLayerCacheClone: a clone from the cache, on disk and on a tmpfs,
// holds what applying the layer makes (owners, modes, times, xattrs,
// whiteouts, opaque directories, links, fifos, holes), and the layer is
// applied once.
func TestLayerCacheClone(t *testing.T) {
	needRoot(t)
	src := t.TempDir()
	upperFixture(t, src)
	f, err := os.Create(filepath.Join(src, "sparse"))
	must(t, err)
	must(t, f.Truncate(8<<20))
	_, err = f.WriteAt([]byte("middle"), 4<<20)
	must(t, err)
	f.Close()
	data := writeFrom(t, src)
	direct := t.TempDir()
	_, err = applyTo(t, data, direct)
	must(t, err)
	want := strings.Join(describe(t, direct), "\n")

	c, err := OpenLayerCache(t.TempDir())
	must(t, err)
	applied := 0
	apply := func(r *confined.Root) error { applied++; return cacheApply(data, "")(r) }
	for _, dst := range []string{t.TempDir(), tmpfs(t)} {
		must(t, c.Clone("k", apply, root(t, dst)))
		if got := strings.Join(describe(t, dst), "\n"); got != want {
			t.Errorf("the clone in %s differs\nwant:\n%s\ngot:\n%s", dst, want, got)
		}
		var st unix.Stat_t
		must(t, unix.Stat(filepath.Join(dst, "sparse"), &st))
		if st.Blocks*512 >= 1<<20 {
			t.Errorf("the sparse file takes %d bytes in the clone", st.Blocks*512)
		}
	}
	if applied != 1 {
		t.Errorf("the layer was applied %d times", applied)
	}
}

// TestLayerCacheClonesIndependent: a write in one clone, in place or
// through a hard link, reaches neither another clone nor the cache.
func TestLayerCacheClonesIndependent(t *testing.T) {
	needRoot(t)
	src := t.TempDir()
	upperFixture(t, src)
	data := writeFrom(t, src)
	cdir := t.TempDir()
	c, err := OpenLayerCache(cdir)
	must(t, err)
	a, b := t.TempDir(), tmpfs(t)
	must(t, c.Clone("k", cacheApply(data, ""), root(t, a)))
	must(t, c.Clone("k", cacheApply(data, ""), root(t, b)))
	before := strings.Join(describe(t, b), "\n")
	cached := strings.Join(describe(t, filepath.Join(cdir, "k")), "\n")
	w, err := os.OpenFile(filepath.Join(a, "src/hard.go"), os.O_WRONLY, 0)
	must(t, err)
	_, err = w.WriteAt([]byte("PACKAGE"), 0)
	must(t, err)
	w.Close()
	must(t, os.WriteFile(filepath.Join(a, "vendor/only.txt"), []byte("changed"), 0o600))
	if got, _ := os.ReadFile(filepath.Join(a, "src/pkg/new.go")); string(got) != "PACKAGE pkg\n" {
		t.Errorf("the clone's hard links are not one file: %q", got)
	}
	if after := strings.Join(describe(t, b), "\n"); after != before {
		t.Errorf("a write in one clone reached another:\n%s\nwas:\n%s", after, before)
	}
	if after := strings.Join(describe(t, filepath.Join(cdir, "k")), "\n"); after != cached {
		t.Errorf("a write in a clone reached the cache:\n%s\nwas:\n%s", after, cached)
	}
}

// TestLayerCacheRefusesHostileLayer: a layer that writes through a
// symlink is refused as ApplyLayer refuses it; nothing reaches the cache
// (no entry, no leftover), the target or outside.
func TestLayerCacheRefusesHostileLayer(t *testing.T) {
	needRoot(t)
	s := newSandbox(t)
	cdir := t.TempDir()
	c, err := OpenLayerCache(cdir)
	must(t, err)
	layer := craft(t, ent{name: "ws/d/", typ: tar.TypeDir, mode: 0o755}, ent{name: "ws/d", typ: tar.TypeSymlink, link: s.outside},
		ent{name: "ws/d/pwned", typ: tar.TypeReg, data: "x"}, ent{name: "ws/d/.wh.secret", typ: tar.TypeReg})
	err = c.Clone("k", cacheApply(layer, "ws/"), root(t, s.target))
	if !errors.Is(err, ErrUnsafe) {
		t.Errorf("cloned with %v; want ErrUnsafe", err)
	}
	s.untouched(t)
	if ents, _ := os.ReadDir(cdir); len(ents) != 0 {
		t.Errorf("the cache holds %v after a refused layer", ents)
	}
	if ents, _ := os.ReadDir(s.target); len(ents) != 0 {
		t.Errorf("the target holds %v after a refused layer", ents)
	}
}

// TestCloneTreeNeverFollowsSymlinks: a symlink in the cache is copied as
// one, and a symlink where the destination should get a directory is
// refused, never written through.
func TestCloneTreeNeverFollowsSymlinks(t *testing.T) {
	needRoot(t)
	s := newSandbox(t)
	src := t.TempDir()
	must(t, os.Symlink(s.outside, filepath.Join(src, "l")))
	must(t, os.Mkdir(filepath.Join(src, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "d/secret"), []byte("pwned"), 0o644))
	must(t, CloneTree(root(t, src), root(t, s.target)))
	if l, err := os.Readlink(filepath.Join(s.target, "l")); err != nil || l != s.outside {
		t.Errorf("the symlink was not copied as one: %q %v", l, err)
	}
	s.untouched(t)

	dst := t.TempDir()
	must(t, os.Symlink(s.outside, filepath.Join(dst, "d")))
	if err := CloneTree(root(t, src), root(t, dst)); err == nil {
		t.Errorf("cloned through a symlink in the destination")
	}
	s.untouched(t)
}
