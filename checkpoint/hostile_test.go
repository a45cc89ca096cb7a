package checkpoint

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFIFO: a FIFO is recorded and restored as one, never opened (an
// open for reading would block the Record until a writer came).
func TestFIFO(t *testing.T) {
	dir := t.TempDir()
	must(t, unix.Mkfifo(filepath.Join(dir, "pipe"), 0o600))
	s := openStore(t)
	c := record(t, s, dir) // returns: the FIFO was not opened
	sameTree(t, "fifo", describe(t, dir), restored(t, s, c.ID))
}

// TestSwappedSymlink: a directory and a symlink to a directory outside
// swapped back and forth during Records: nothing outside is ever read,
// and every checkpoint holds one or the other, whole.
func TestSwappedSymlink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	write(t, filepath.Join(outside, "secret"), "HOST SECRET")
	write(t, filepath.Join(dir, "swap/secret"), "inside")
	must(t, os.Symlink(outside, filepath.Join(dir, "link")))
	s := openStore(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "swap"), unix.AT_FDCWD, filepath.Join(dir, "link"), unix.RENAME_EXCHANGE)
		}
	})
	var ids []ID
	for range 30 {
		c, err := s.RecordDir(context.Background(), dir, RecordOptions{})
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	stop.Store(true)
	wg.Wait()
	err := filepath.WalkDir(filepath.Join(s.Dir(), "objects"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("HOST SECRET")) {
				t.Errorf("object %s holds the host's file", p)
			}
		}
		return err
	})
	must(t, err)
	for _, id := range ids {
		got := restored(t, s, id)
		for _, name := range []string{"swap", "link"} {
			d := got[name]
			switch {
			case d == "":
				// Renamed between the listing and the stat, three times
				// over: left out, as a file deleted meanwhile would be.
			case strings.HasPrefix(d, "type=120000"):
				if !strings.Contains(d, "-> "+outside) {
					t.Errorf("checkpoint %v: the symlink %s is %s", id, name, d)
				}
			case strings.HasPrefix(d, "type=40000"):
				if !strings.Contains(got[name+"/secret"], "size=6 ") {
					t.Errorf("checkpoint %v: %s/secret is %q", id, name, got[name+"/secret"])
				}
			default:
				t.Errorf("checkpoint %v: %s is %s", id, name, d)
			}
		}
	}
}

// TestHugeSparseFile: a 40 GB file holding a few bytes is read, stored
// and restored as those bytes.
func TestHugeSparseFile(t *testing.T) {
	dir := t.TempDir()
	sparseFile(t, filepath.Join(dir, "huge"), 40<<30, 20<<30, "needle")
	s := openStore(t)
	c := record(t, s, dir)
	if c.Stats.BytesRead > 1<<20 || c.Stats.BytesWritten > 1<<20 {
		t.Errorf("a 40 GB sparse file: read %d bytes, wrote %d", c.Stats.BytesRead, c.Stats.BytesWritten)
	}
	target := t.TempDir()
	must(t, s.RestoreDir(context.Background(), c.ID, target))
	var st unix.Stat_t
	must(t, unix.Stat(filepath.Join(target, "huge"), &st))
	if st.Size != 40<<30 || st.Blocks*512 > 1<<20 {
		t.Errorf("restored: %d bytes, %d on disk", st.Size, st.Blocks*512)
	}
	sameTree(t, "sparse", describe(t, dir), describe(t, target))
	if usage, err := s.Usage(); err != nil || usage > 1<<20 {
		t.Errorf("the store holds %d bytes (%v)", usage, err)
	}
}

// TestGrowingFile: a file written to while it is read is read again, and
// if it never holds still, recorded as unstable: its earlier version kept,
// or none — never a mix.
func TestGrowingFile(t *testing.T) {
	for _, earlier := range []bool{false, true} {
		dir := t.TempDir()
		p := filepath.Join(dir, "grow")
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
		must(t, os.WriteFile(p, bytes.Repeat(chunk, 32), 0o644))
		s := openStore(t)
		var before map[string]string
		if earlier {
			before = describe(t, dir)
			record(t, s, dir)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return
			}
			defer w.Close()
			for n := 0; !stop.Load(); n++ {
				w.Write(chunk[:4096])
				if n%8192 == 8191 { // at 64 MiB, back to 32: it shrinks too
					w.Truncate(32 << 20)
				}
			}
		})
		var c *Checkpoint
		for range 20 {
			var err error
			if c, err = s.RecordDir(context.Background(), dir, RecordOptions{Attempts: 2}); err != nil {
				stop.Store(true)
				wg.Wait()
				t.Fatal(err)
			}
			got := restored(t, s, c.ID) // every object matches its digest
			if slices.Contains(c.Unstable, "grow") {
				if earlier && got["grow"] != before["grow"] {
					t.Errorf("an unstable file with an earlier version: %q, want %q", got["grow"], before["grow"])
				}
				if !earlier && got["grow"] != "" {
					t.Errorf("an unstable new file was recorded: %q", got["grow"])
				}
				break
			}
			c = nil
		}
		stop.Store(true)
		wg.Wait()
		if c == nil {
			t.Errorf("a file appended to all the time was never found unstable")
		}
	}
}
