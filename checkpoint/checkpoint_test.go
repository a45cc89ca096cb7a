package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock/airlock/errdefs"
	"golang.org/x/sys/unix"
)

// upperFixture makes an upper directory with one of everything a
// checkpoint keeps.
func upperFixture(t *testing.T, dir string) {
	write(t, filepath.Join(dir, "src/main.go"), "package main\n")
	write(t, filepath.Join(dir, "src/deep/er/file.txt"), "deep")
	write(t, filepath.Join(dir, "empty"), "")
	write(t, filepath.Join(dir, ".wh.agent-named"), "an agent's own .wh. file")
	write(t, filepath.Join(dir, "secret"), "mode 600")
	must(t, os.Chmod(filepath.Join(dir, "secret"), 0o600))
	write(t, filepath.Join(dir, "tool"), "#!/bin/sh\n")
	must(t, os.Chmod(filepath.Join(dir, "tool"), 0o4755|os.ModeSetuid))
	must(t, os.Chmod(filepath.Join(dir, "src"), 0o1777|os.ModeSticky))
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("../missing", filepath.Join(dir, "src/dangling")))
	must(t, os.Link(filepath.Join(dir, "src/main.go"), filepath.Join(dir, "src/deep/hard")))
	must(t, os.Link(filepath.Join(dir, "src/main.go"), filepath.Join(dir, "zz-hard")))
	must(t, unix.Mkfifo(filepath.Join(dir, "pipe"), 0o640))
	sparseFile(t, filepath.Join(dir, "sparse.img"), 1<<30, 512<<20, "data in the middle")
	if err := unix.Setxattr(filepath.Join(dir, "src/main.go"), "user.origin", []byte("agent\x00\xff"), 0); err != nil {
		t.Logf("no user xattrs here: %v", err)
	}
	must(t, unix.Setxattr(filepath.Join(dir, "src/deep"), "user.dir", []byte("d"), 0))
	if root() {
		must(t, os.Chown(filepath.Join(dir, "secret"), 1000, 1001))
		must(t, os.Lchown(filepath.Join(dir, "abs-link"), 1002, 1003))
		must(t, unix.Mknod(filepath.Join(dir, "deleted.txt"), unix.S_IFCHR, 0))
		must(t, os.MkdirAll(filepath.Join(dir, "replaced"), 0o755))
		write(t, filepath.Join(dir, "replaced/new"), "new")
		must(t, unix.Setxattr(filepath.Join(dir, "replaced"), opaqueXattr, []byte("y"), 0))
	}
}

// TestRoundTrip: a checkpoint holds the directory as it was when
// recorded, whatever changed after, and Restore rebuilds it exactly.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	upperFixture(t, dir)
	s := openStore(t)
	want1 := describe(t, dir)
	c1 := record(t, s, dir)
	sameTree(t, "checkpoint 1", want1, restored(t, s, c1.ID))

	// Change a bit of everything.
	write(t, filepath.Join(dir, "src/main.go"), "package main // changed\n") // all three names
	must(t, os.Remove(filepath.Join(dir, "src/deep/er/file.txt")))
	must(t, os.RemoveAll(filepath.Join(dir, "src/deep/er")))
	must(t, os.Chmod(filepath.Join(dir, "secret"), 0o640))
	must(t, os.Remove(filepath.Join(dir, "abs-link")))
	must(t, os.Mkdir(filepath.Join(dir, "abs-link"), 0o700)) // a symlink became a directory
	write(t, filepath.Join(dir, "new/file"), "new")
	if root() {
		must(t, os.Remove(filepath.Join(dir, "deleted.txt"))) // the lower file is back
		must(t, os.Remove(filepath.Join(dir, "empty")))
		must(t, unix.Mknod(filepath.Join(dir, "empty"), unix.S_IFCHR, 0)) // a file became a deletion
	}
	want2 := describe(t, dir)
	c2 := record(t, s, dir)
	if c2.Parent != c1.ID {
		t.Errorf("checkpoint 2's parent is %v", c2.Parent)
	}
	sameTree(t, "checkpoint 2", want2, restored(t, s, c2.ID))
	sameTree(t, "checkpoint 1 after changes", want1, restored(t, s, c1.ID))

	changes, err := s.Diff(c1.ID, c2.ID)
	must(t, err)
	got := map[string]Kind{}
	for _, c := range changes {
		got[c.Path] = c.Kind
	}
	want := map[string]Kind{
		"src/main.go": Modified, "src/deep/hard": Modified, "zz-hard": Modified,
		"src/deep/er": Deleted, "src/deep/er/file.txt": Deleted, "src/deep": Modified,
		"secret": Modified, "abs-link": Modified, "new": Added, "new/file": Added,
	}
	if root() {
		want["deleted.txt"] = Deleted
		want["empty"] = Modified
	}
	for p, k := range want {
		if got[p] != k {
			t.Errorf("Diff: %s is %q, want %q", p, got[p], k)
		}
	}
	for p, k := range got {
		if _, ok := want[p]; !ok && p != "src" && p != "." {
			t.Errorf("Diff: %s is %q and should be unchanged", p, k)
		}
	}
	// The diff's content comes from the store.
	for _, c := range changes {
		if c.Path == "src/main.go" {
			for e, text := range map[*Entry]string{c.Old: "package main\n", c.New: "package main // changed\n"} {
				r, err := s.OpenContent(e)
				must(t, err)
				b := make([]byte, 100)
				n, _ := r.Read(b)
				r.Close()
				if string(b[:n]) != text {
					t.Errorf("content of %s: %q, want %q", c.Path, b[:n], text)
				}
			}
		}
	}
	// From nothing: everything is added.
	all, err := s.Diff(0, c1.ID)
	must(t, err)
	if len(all) != len(want1)-1 {
		t.Errorf("Diff from nothing lists %d paths, the directory has %d", len(all), len(want1)-1)
	}
	if none, err := s.Diff(c2.ID, c2.ID); err != nil || len(none) != 0 {
		t.Errorf("Diff of a checkpoint with itself: %v, %v", none, err)
	}
}

// TestIncremental: after 10 of 200 files change, a Record reads and
// writes those 10 files, the trees on their way and its record: nothing
// else.
func TestIncremental(t *testing.T) {
	dir := t.TempDir()
	const size = 64 << 10
	for d := range 20 {
		for f := range 10 {
			write(t, filepath.Join(dir, fmt.Sprintf("d%02d/f%02d", d, f)), strings.Repeat(fmt.Sprintf("%02d%02d", d, f), size/4))
		}
	}
	s := openStore(t)
	c1 := record(t, s, dir)
	if c1.Stats.FilesRead != 200 || c1.Stats.BytesRead != 200*size {
		t.Fatalf("first checkpoint read %d files, %d bytes; want 200, %d", c1.Stats.FilesRead, c1.Stats.BytesRead, 200*size)
	}
	unchanged := record(t, s, dir)
	if unchanged.Stats.FilesRead != 0 || unchanged.Stats.BytesRead != 0 || unchanged.Stats.NewObjects != 0 {
		t.Errorf("a checkpoint of an unchanged directory read %d files (%d bytes) and wrote %d objects",
			unchanged.Stats.FilesRead, unchanged.Stats.BytesRead, unchanged.Stats.NewObjects)
	}
	var changed int64
	for i := range 10 {
		data := strings.Repeat(fmt.Sprint("changed", i), 2000)
		write(t, filepath.Join(dir, fmt.Sprintf("d%02d/f%02d", i%2, i)), data)
		changed += int64(len(data))
	}
	c := record(t, s, dir)
	st := c.Stats
	t.Logf("10 changed files (%d bytes): read %d files, %d bytes; wrote %d bytes in %d objects", changed, st.FilesRead, st.BytesRead, st.BytesWritten, st.NewObjects)
	if st.FilesRead != 10 || st.BytesRead != changed {
		t.Errorf("read %d files, %d bytes; want 10 files, %d bytes", st.FilesRead, st.BytesRead, changed)
	}
	// 10 files, 2 directories' trees and the root's (20 entries each
	// at most), the record.
	if st.NewObjects != 13 || st.BytesWritten < changed || st.BytesWritten > changed+16<<10 {
		t.Errorf("wrote %d bytes in %d objects; want the changed %d bytes, 13 objects and a few KiB", st.BytesWritten, st.NewObjects, changed)
	}
	// A file touched without a change is hashed, not stored again.
	now := unix.NsecToTimespec(c.Time.UnixNano() + 1e9)
	must(t, unix.UtimesNano(filepath.Join(dir, "d05/f05"), []unix.Timespec{now, now}))
	c = record(t, s, dir)
	if c.Stats.FilesRead != 1 || c.Stats.BytesRead != size || c.Stats.BytesWritten > 16<<10 {
		t.Errorf("a touched file: read %d files (%d bytes), wrote %d bytes", c.Stats.FilesRead, c.Stats.BytesRead, c.Stats.BytesWritten)
	}
}

// TestPruneAndPins: pruning keeps the newest and pinned checkpoints, and
// their objects.
func TestPruneAndPins(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t)
	var wants []map[string]string
	for i := range 5 {
		write(t, filepath.Join(dir, fmt.Sprint("f", i)), strings.Repeat(fmt.Sprint(i), 10000))
		write(t, filepath.Join(dir, "same"), fmt.Sprint("version ", i))
		wants = append(wants, describe(t, dir))
		record(t, s, dir)
	}
	must(t, s.Pin(2, "snapshot:abc"))
	if err := s.Pin(9, "x"); !errdefs.IsNotFound(err) {
		t.Errorf("pin of a missing checkpoint: %v", err)
	}
	if err := s.Pin(2, "../x"); !errdefs.IsInvalid(err) {
		t.Errorf("pin with a bad name: %v", err)
	}
	res, err := s.Prune(PruneOptions{Keep: 1})
	must(t, err)
	if !slices.Equal(res.Removed, []ID{1, 3, 4}) || res.Objects == 0 {
		t.Errorf("Prune keep 1 removed %v (%d objects)", res.Removed, res.Objects)
	}
	list, err := s.List()
	must(t, err)
	if len(list) != 2 || list[0].ID != 2 || !slices.Equal(list[0].Pins, []string{"snapshot:abc"}) || list[1].ID != 5 {
		t.Fatalf("after prune: %+v", list)
	}
	sameTree(t, "pinned checkpoint 2", wants[1], restored(t, s, 2))
	if err := s.Remove(2); !errdefs.IsConflict(err) {
		t.Errorf("Remove of a pinned checkpoint: %v", err)
	}
	must(t, s.Unpin(2, "snapshot:abc"))
	before, err := s.Usage()
	must(t, err)
	res, err = s.Prune(PruneOptions{MaxBytes: 1})
	must(t, err)
	after, err := s.Usage()
	must(t, err)
	if !slices.Equal(res.Removed, []ID{2}) || after >= before || res.Freed == 0 {
		t.Errorf("Prune to 1 byte removed %v, freed %d: usage %d -> %d", res.Removed, res.Freed, before, after)
	}
	sameTree(t, "newest checkpoint", wants[4], restored(t, s, 5))
	if n, _, err := s.GC(); err != nil || n != 0 {
		t.Errorf("GC after prune found %d objects: %v", n, err)
	}
	if _, err := s.Get(2); !errdefs.IsNotFound(err) {
		t.Errorf("Get of a pruned checkpoint: %v", err)
	}
}

// TestRestoreRefuses: a target that is not empty is refused; a damaged
// object fails the restore.
func TestRestoreRefuses(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a/file"), "content")
	s := openStore(t)
	c := record(t, s, dir)
	target := t.TempDir()
	must(t, os.Symlink("/etc", filepath.Join(target, "a")))
	if err := s.RestoreDir(context.Background(), c.ID, target); !errdefs.IsConflict(err) {
		t.Errorf("restore into a directory holding a symlink: %v", err)
	}
	tree, _ := s.readTree(c.Root.Digest)
	sub, _ := s.readTree(tree.Entries[0].Digest)
	p, _ := s.objectPath(sub.Entries[0].Digest)
	must(t, os.WriteFile(p, []byte("CONTENT"), 0o600))
	if err := s.RestoreDir(context.Background(), c.ID, t.TempDir()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("restore of a damaged object: %v", err)
	}
}

// TestIfChangedAndResolve: a Record with IfChanged writes nothing for a
// directory as the newest checkpoint has it (even one just written,
// whose racy files are read again), and a checkpoint's paths resolve to
// their entries or to the lower layer.
func TestIfChangedAndResolve(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t)
	must(t, os.MkdirAll(filepath.Join(dir, "d/e"), 0o755))
	write(t, filepath.Join(dir, "d/e/f"), "f")
	write(t, filepath.Join(dir, "x"), "x")
	first := record(t, s, dir)
	again, err := s.RecordDir(context.Background(), dir, RecordOptions{IfChanged: true})
	must(t, err)
	if again.ID != first.ID {
		t.Fatalf("an unchanged directory was recorded again as %d", again.ID)
	}
	write(t, filepath.Join(dir, "d/e/g"), "g")
	next, err := s.RecordDir(context.Background(), dir, RecordOptions{IfChanged: true})
	must(t, err)
	if next.ID == first.ID {
		t.Fatal("a new file was not recorded")
	}
	must(t, os.Remove(filepath.Join(dir, "x")))
	if c, _ := s.RecordDir(context.Background(), dir, RecordOptions{IfChanged: true}); c.ID == next.ID {
		t.Fatal("a removed file was not recorded")
	}
	e, lower, err := s.Resolve(next.ID, "d/e/g")
	if err != nil || e == nil || e.Type != File || lower {
		t.Fatalf("d/e/g: %+v %v %v", e, lower, err)
	}
	if e, lower, _ := s.Resolve(next.ID, "d/none"); e != nil || !lower {
		t.Fatalf("d/none: %+v %v: want the lower layer", e, lower)
	}
	if e, lower, _ := s.Resolve(next.ID, "x/below"); e != nil || lower {
		t.Fatalf("x/below: %+v %v: below a file nothing shows", e, lower)
	}
}

// TestTreeOutOfOrder: a stored tree whose names are not in order is a
// damaged store (lookups and diffs rely on the order), not a wrong diff.
func TestTreeOutOfOrder(t *testing.T) {
	s := openStore(t)
	data, err := encodeTree(&tree{Entries: []Entry{{Name: "b", Type: File}, {Name: "a", Type: File}}})
	must(t, err)
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	p, err := s.objectPath(digest)
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(p), 0o700))
	must(t, os.WriteFile(p, data, 0o600))
	if _, err := s.readTree(digest); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a tree out of name order was read: %v", err)
	}
}
