package index

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock/airlock/testenv"
	"golang.org/x/sys/unix"
)

// workspace mounts a tmpfs at dir/ws holding an overlay's upper and work
// directories, over an empty lower, merged at dir/merged: a session's
// workspace in small.
func workspace(t *testing.T) (tmpfs, merged string) {
	t.Helper()
	testenv.Root(t, "mounts")
	dir := t.TempDir()
	tmpfs, merged = filepath.Join(dir, "ws"), filepath.Join(dir, "merged")
	lower := filepath.Join(dir, "lower")
	for _, d := range []string{tmpfs, merged, lower} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(tmpfs, unix.MNT_DETACH) })
	for _, d := range []string{"upper", "work"} {
		if err := os.Mkdir(filepath.Join(tmpfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := "lowerdir=" + lower + ",upperdir=" + tmpfs + "/upper,workdir=" + tmpfs + "/work"
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	return tmpfs, merged
}

func TestWatchSeesEveryKindOfChange(t *testing.T) {
	tmpfs, m := workspace(t)
	w, err := Start(tmpfs)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(m, "a"), []byte("a"), 0o644))
	f, err := os.OpenFile(filepath.Join(m, "a"), os.O_WRONLY, 0)
	must(err)
	defer f.Close()
	changes := []struct {
		name string
		do   func() error
	}{
		{"write on an open file", func() error { _, err := f.Write([]byte("more")); return err }},
		{"truncate", func() error { return os.Truncate(filepath.Join(m, "a"), 1) }},
		{"chmod", func() error { return os.Chmod(filepath.Join(m, "a"), 0o600) }},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(m, "d"), 0o755) }},
		{"create in a subdirectory", func() error { return os.WriteFile(filepath.Join(m, "d", "b"), nil, 0o644) }},
		{"rename", func() error { return os.Rename(filepath.Join(m, "d", "b"), filepath.Join(m, "c")) }},
		{"remove", func() error { return os.Remove(filepath.Join(m, "c")) }},
		{"symlink", func() error { return os.Symlink("/etc", filepath.Join(m, "l")) }},
		{"xattr", func() error { return unix.Setxattr(filepath.Join(m, "a"), "user.x", []byte("1"), 0) }},
		{"remove a directory", func() error { return os.Remove(filepath.Join(m, "d")) }},
	}
	for _, c := range changes {
		before := w.Mark()
		if before != w.Mark() {
			t.Fatalf("%s: the mark moved with nothing done", c.name)
		}
		must(c.do())
		if w.Mark() == before {
			t.Errorf("%s through the overlay: the mark did not move", c.name)
		}
	}
	before := w.Mark()
	if _, err := os.ReadFile(filepath.Join(m, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(m); err != nil {
		t.Fatal(err)
	}
	if w.Mark() != before {
		t.Errorf("reading moved the mark")
	}
}

// A mark is only worth something under the watch that made it.
func TestWatchesDoNotShareMarks(t *testing.T) {
	tmpfs, _ := workspace(t)
	a, err := Start(tmpfs)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Start(tmpfs)
	if err != nil {
		t.Fatal(err)
	}
	if a.Mark() == b.Mark() {
		t.Errorf("two watches gave the same mark")
	}
	b.Close()
	if m := b.Mark(); m == b.Mark() {
		t.Errorf("a closed watch gave the same mark twice: %s", m)
	}
}

func TestStartRefusesWhatIsNotATmpfsMountPoint(t *testing.T) {
	tmpfs, m := workspace(t)
	for _, p := range []string{filepath.Join(tmpfs, "upper"), m, t.TempDir()} {
		if w, err := Start(p); err == nil {
			w.Close()
			t.Errorf("Start(%s) watched a directory that is not a tmpfs mount point", p)
		}
	}
}

// A write through a shared mapping makes no event: WritableMappings is
// what tells the engine not to trust a summary while one exists.
func TestWritableMappingsFindsASharedMapping(t *testing.T) {
	tmpfs, m := workspace(t)
	p := filepath.Join(m, "mapped")
	if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	devs := func() []uint64 {
		var a, b unix.Stat_t
		unix.Stat(tmpfs, &a)
		unix.Stat(m, &b)
		return []uint64{a.Dev, b.Dev}
	}()
	self := []int{os.Getpid()}
	if found, err := WritableMappings(self, devs...); err != nil || found {
		t.Fatalf("before mapping: %v, %v", found, err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if found, _ := WritableMappings(self, devs...); found {
		t.Errorf("a read-only mapping counted as writable")
	}
	unix.Munmap(ro)
	b, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if found, err := WritableMappings(self, devs...); err != nil || !found {
		t.Errorf("a shared writable mapping of a workspace file was not found (%v)", err)
	}
	unix.Munmap(b)
	if found, _ := WritableMappings(self, devs...); found {
		t.Errorf("found a mapping after munmap")
	}
}
