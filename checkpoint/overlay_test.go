package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock/airlock/overlay"
	"golang.org/x/sys/unix"
)

// TestOverlay: a session's overlay written through its merged view,
// checkpointed from its upper directory, restored into the upper
// directory of a new overlay over the same project: both merged views
// are the same, deletions and replaced directories included.
func TestOverlay(t *testing.T) {
	if testing.Short() || !root() {
		t.Skip("mounts a tmpfs and an overlay: needs root (skipped under -short)")
	}
	if err := overlay.Check(); err != nil {
		t.Skipf("no overlay here: %v", err)
	}
	lower := t.TempDir()
	write(t, filepath.Join(lower, "README"), "project\n")
	write(t, filepath.Join(lower, "old.txt"), "to delete")
	write(t, filepath.Join(lower, "lib/a.go"), "package lib\n")
	write(t, filepath.Join(lower, "lib/b.go"), "package lib // b\n")
	write(t, filepath.Join(lower, "keep/x"), "x")

	ws, err := overlay.Mount(lower, t.TempDir(), 256<<20)
	must(t, err)
	defer ws.Unmount()
	m := ws.Merged()
	write(t, filepath.Join(m, "README"), "project, changed\n")
	must(t, os.Remove(filepath.Join(m, "old.txt")))              // a whiteout
	must(t, os.RemoveAll(filepath.Join(m, "lib")))               // a whiteout, then
	write(t, filepath.Join(m, "lib/c.go"), "package lib // c\n") // an opaque directory
	must(t, os.Link(filepath.Join(m, "lib/c.go"), filepath.Join(m, "c-link")))
	must(t, os.Symlink("lib/c.go", filepath.Join(m, "sym")))
	must(t, os.Chmod(filepath.Join(m, "keep/x"), 0o600)) // a copy-up
	must(t, unix.Setxattr(filepath.Join(m, "keep/x"), "user.note", []byte("n"), 0))
	must(t, unix.Mkfifo(filepath.Join(m, "pipe"), 0o644))
	sparseFile(t, filepath.Join(m, "disk.img"), 8<<30, 4<<30, "sector")

	var st unix.Stat_t
	must(t, unix.Lstat(filepath.Join(ws.Upper(), "old.txt"), &st))
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Fatalf("the deletion is not a whiteout in the upper directory: %o", st.Mode)
	}
	want := describe(t, m)
	s := openStore(t)
	c := record(t, s, ws.Upper())
	if c.Stats.BytesRead > 1<<20 {
		t.Errorf("read %d bytes of a workspace of a few bytes and a sparse file", c.Stats.BytesRead)
	}

	ws2, err := overlay.MountFilled(lower, t.TempDir(), 256<<20, func(upper string) error {
		return s.RestoreDir(context.Background(), c.ID, upper)
	})
	must(t, err)
	defer ws2.Unmount()
	got := describe(t, ws2.Merged())
	// The merged roots are each mount's.
	delete(want, ".")
	delete(got, ".")
	sameTree(t, "merged view of the restored overlay", want, got)
	sameTree(t, "upper directory", describe(t, ws.Upper()), describe(t, ws2.Upper()))
}
