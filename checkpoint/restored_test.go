package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordAfterRestore: the first Record of a restored directory (a
// woken session's workspace) reads only the files changed after the
// restore, even one rewritten with as many bytes right after it, and
// writes no file content again.
func TestRecordAfterRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const size = 16 << 10
	for d := range 5 {
		for f := range 10 {
			write(t, filepath.Join(dir, fmt.Sprintf("d%d/f%d", d, f)), strings.Repeat(fmt.Sprintf("%d%d", d, f), size/2))
		}
	}
	must(t, os.Link(filepath.Join(dir, "d0/f0"), filepath.Join(dir, "d0/link")))
	s := openStore(t)
	c1 := record(t, s, dir)

	// Unchanged since the restore: nothing read, no content written.
	woken := t.TempDir()
	must(t, s.RestoreDir(ctx, c1.ID, woken))
	c2, err := s.RecordDir(ctx, woken, RecordOptions{})
	must(t, err)
	// The hard-linked file is the one read: linking moved its ctime.
	if c2.Stats.FilesRead > 1 || c2.Stats.BytesRead > size {
		t.Errorf("a checkpoint right after a restore read %d files (%d bytes); want at most the hard-linked one", c2.Stats.FilesRead, c2.Stats.BytesRead)
	}
	if _, err := os.Stat(s.restoredPath()); err == nil {
		t.Error("the restore's stat keys are kept after a checkpoint carried them on")
	}
	if c3 := record(t, s, woken); c3.Stats.FilesRead != 0 || c3.Stats.NewObjects != 0 {
		t.Errorf("the next checkpoint read %d files, wrote %d objects; want none", c3.Stats.FilesRead, c3.Stats.NewObjects)
	}

	// One file rewritten with as many bytes the moment the restore
	// returns: read (its stat key moved), and recorded as it is now.
	again := t.TempDir()
	must(t, s.RestoreDir(ctx, c1.ID, again))
	write(t, filepath.Join(again, "d3/f7"), strings.Repeat("x", size))
	c4, err := s.RecordDir(ctx, again, RecordOptions{})
	must(t, err)
	// A file of its old size is hashed, then stored: read twice.
	if c4.Stats.FilesRead != 2 || c4.Stats.BytesRead > 3*size {
		t.Errorf("after 1 file changed (and 1 hard link) read %d files (%d bytes); want 2 (at most %d bytes)", c4.Stats.FilesRead, c4.Stats.BytesRead, 3*size)
	}
	sameTree(t, "the checkpoint after the restore", describe(t, again), restored(t, s, c4.ID))
}

// TestRestoredKeysOtherDir: a restore's keys serve only the directory
// restored into, and not once its checkpoint is gone.
func TestRestoredKeysOtherDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for f := range 10 {
		write(t, filepath.Join(dir, fmt.Sprint("f", f)), strings.Repeat("a", 4096+f))
	}
	s := openStore(t)
	c1 := record(t, s, dir)
	must(t, s.RestoreDir(ctx, c1.ID, t.TempDir()))
	// Another directory: its own files, all read.
	other := t.TempDir()
	for f := range 10 {
		write(t, filepath.Join(other, fmt.Sprint("f", f)), strings.Repeat("a", 4096+f))
	}
	c2 := record(t, s, other)
	if c2.Stats.FilesRead != 10 {
		t.Errorf("a directory the store did not restore into: read %d files; want 10", c2.Stats.FilesRead)
	}
}
