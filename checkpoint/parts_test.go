package checkpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bigDir makes n empty files in dir (more than partMax: stored in parts).
func bigDir(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
		must(t, err)
		f.Close()
	}
}

// sameNames restores checkpoint id and compares its names with dir's,
// and the content of one file (describe reads every file: slow for
// thousands).
func sameNames(t *testing.T, s *Store, id ID, dir, file, content string) {
	t.Helper()
	into := t.TempDir()
	must(t, s.RestoreDir(context.Background(), id, into))
	want, err := os.ReadDir(dir)
	must(t, err)
	got, err := os.ReadDir(into)
	must(t, err)
	if len(got) != len(want) {
		t.Fatalf("restored %d names; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name() != want[i].Name() {
			t.Fatalf("restored %q where %q was", got[i].Name(), want[i].Name())
		}
	}
	if data, err := os.ReadFile(filepath.Join(into, file)); err != nil || string(data) != content {
		t.Errorf("restored %s: %q, %v; want %q", file, data, err, content)
	}
}

// A directory of more than partMax names is stored in parts: a file
// added, one changed and one removed rewrite the parts they fall in and
// the list, not the whole directory; Diff, Resolve, restore, and GC after
// a prune read it whole.
func TestLargeDirectoryInParts(t *testing.T) {
	dir := t.TempDir()
	const n = 2*partMax + 3000
	bigDir(t, dir, n)
	s := openStore(t)
	c1 := record(t, s, dir)
	top, err := s.readTree(c1.Root.Digest)
	must(t, err)
	if len(top.Parts) < 3 || top.Entries != nil {
		t.Fatalf("a directory of %d names: %d parts, %d entries in its tree; want parts only", n, len(top.Parts), len(top.Entries))
	}

	write(t, filepath.Join(dir, "f00100"), "changed")
	write(t, filepath.Join(dir, "f07000x"), "added")
	must(t, os.Remove(filepath.Join(dir, "f11000")))
	c2 := record(t, s, dir)
	// Three parts of the first checkpoint's and the list at most.
	t.Logf("%d parts; the first checkpoint wrote %d bytes, the second %d", len(top.Parts), c1.Stats.BytesWritten, c2.Stats.BytesWritten)
	if c2.Stats.BytesWritten*2 > c1.Stats.BytesWritten {
		t.Errorf("3 changes in a directory of %d names wrote %d bytes (the directory: %d)", n, c2.Stats.BytesWritten, c1.Stats.BytesWritten)
	}
	ch, err := s.Diff(c1.ID, c2.ID)
	must(t, err)
	var got []string
	for _, c := range ch {
		got = append(got, string(c.Kind)+" "+c.Path)
	}
	if want := "modified f00100,added f07000x,deleted f11000"; strings.Join(got, ",") != want {
		t.Errorf("Diff = %q; want %q", got, want)
	}
	if e, _, err := s.Resolve(c2.ID, "f07000x"); err != nil || e == nil || e.Size != 5 {
		t.Errorf("Resolve f07000x = %+v, %v", e, err)
	}
	if e, _, err := s.Resolve(c2.ID, "f11000"); err != nil || e != nil {
		t.Errorf("Resolve f11000 = %+v, %v; want none", e, err)
	}
	c3 := record(t, s, dir)
	if c3.Stats.NewObjects != 0 || c3.Stats.FilesRead != 0 {
		t.Errorf("an unchanged directory: %d new objects, %d files read", c3.Stats.NewObjects, c3.Stats.FilesRead)
	}

	_, err = s.Prune(PruneOptions{Keep: 1})
	must(t, err)
	sameNames(t, s, c3.ID, dir, "f07000x", "added")
}

// A large directory's tree written whole, as before parts, is read as it
// was: restored, compared, and the next checkpoint reads only what
// changed.
func TestLargeDirectoryWhole(t *testing.T) {
	dir := t.TempDir()
	const n = partMax + 500
	bigDir(t, dir, n)
	s := openStore(t)
	c1 := record(t, s, dir)
	// Rewrite the checkpoint with the directory as one tree.
	d, err := s.openDir(c1.Root.Digest)
	must(t, err)
	whole := &tree{Entries: []Entry{}}
	for {
		e, err := d.entry()
		must(t, err)
		if e == nil {
			break
		}
		whole.Entries = append(whole.Entries, *e)
	}
	data, err := encodeTree(whole)
	must(t, err)
	r := &recorder{s: s, pendingDigests: map[string]bool{}}
	digest, err := r.putTree(whole)
	must(t, err)
	must(t, r.flush())
	c1.Root.Digest = digest
	rec, err := json.Marshal(c1)
	must(t, err)
	must(t, os.WriteFile(s.recordPath(c1.ID), rec, 0o600))
	if back, err := s.readTree(digest); err != nil || len(back.Entries) != n || len(data) < n*50 {
		t.Fatalf("the whole tree read back: %v", err)
	}

	sameNames(t, s, c1.ID, dir, "f00007", "")
	write(t, filepath.Join(dir, "f00007"), "changed")
	c2, err := s.RecordDir(context.Background(), dir, RecordOptions{})
	must(t, err)
	if c2.Stats.FilesRead != 1 {
		t.Errorf("after one change to a directory stored whole: %d files read; want 1", c2.Stats.FilesRead)
	}
	ch, err := s.Diff(c1.ID, c2.ID)
	must(t, err)
	if len(ch) != 1 || ch[0].Path != "f00007" {
		t.Errorf("Diff = %+v; want f00007 modified", ch)
	}
}
