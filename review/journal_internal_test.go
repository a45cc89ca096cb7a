package review

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// journalLayers is a project of old files and a session that rewrites
// them and adds some, one with a name that is not UTF-8.
func journalLayers(t *testing.T) (Layers, []string) {
	t.Helper()
	dir := t.TempDir()
	l := Layers{Upper: filepath.Join(dir, "upper"), Project: filepath.Join(dir, "project")}
	var names []string
	for i := 0; i < 40; i++ {
		names = append(names, fmt.Sprintf("d%d/f%02d.txt", i%3, i))
	}
	for _, n := range names {
		put(t, filepath.Join(l.Project, n), "old\n")
		put(t, filepath.Join(l.Upper, n), "new "+n+"\n")
	}
	for _, n := range []string{"added/a.txt", "added/bad-\xff.txt"} {
		put(t, filepath.Join(l.Upper, n), "new "+n+"\n")
		names = append(names, n)
	}
	return l, names
}

func put(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// projectState says how many of names are old, new or missing in the
// project, and what an accept left behind.
func projectState(t *testing.T, l Layers, names []string, journal string) (old, new, missing int, left []string) {
	t.Helper()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(l.Project, n))
		switch {
		case err != nil:
			missing++
		case string(b) == "old\n":
			old++
		case string(b) == "new "+n+"\n":
			new++
		default:
			left = append(left, n+" torn: "+string(b))
		}
	}
	entries, _ := os.ReadDir(l.Project)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".airlock") {
			left = append(left, e.Name())
		}
	}
	if _, err := os.Stat(journal); err == nil {
		left = append(left, "the journal")
	}
	return
}

// staged plans and stages every change of l as an accept does, up to the
// commit (commit: the journal committed too), and leaves it there as a
// crash would: nothing rolled back, nothing done.
func staged(t *testing.T, l Layers, journal string, commit bool) {
	t.Helper()
	diffs, err := Review(l)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSelector(l, Selection{}, true)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAccepter(l, journal)
	if err != nil {
		t.Fatal(err)
	}
	for i := range diffs {
		if it, ok := s.pick(&diffs[i]); ok {
			if err := a.add(it, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.finish(); err != nil || a.cause != nil {
		t.Fatal(err, a.cause)
	}
	if commit {
		if err := a.sync(); err != nil {
			t.Fatal(err)
		}
	} else {
		a.stopStagers()
		a.popPlacing("")
	}
	// The crash: the process is gone, its descriptors closed.
	a.journal.close()
	a.scratch.Close()
	a.upper.Close()
	a.t.close()
}

// A crash between staging and the commit: the journal has every
// operation but no commit record (or a torn last line), the staging
// directory every file. Recover leaves the project as it was.
func TestRecoverBeforeCommitRollsBack(t *testing.T) {
	for _, torn := range []bool{false, true} {
		l, names := journalLayers(t)
		journal := filepath.Join(t.TempDir(), "accept.journal")
		staged(t, l, journal, false)
		if torn {
			f, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"op":"replace","path":"d0/f`)
			f.Close()
		}
		if old, _, _, left := projectState(t, l, names, journal); old != 40 || len(left) != 2 {
			t.Fatalf("before recovery: %d old files, left %v; want 40 and the staging directory and the journal", old, left)
		}
		if err := Recover(journal); err != nil {
			t.Fatal(err)
		}
		if old, new, missing, left := projectState(t, l, names, journal); old != 40 || new != 0 || missing != 2 || len(left) > 0 {
			t.Errorf("torn %v: recovered to %d old, %d new, %d missing, left %v; want the project as it was", torn, old, new, missing, left)
		}
	}
}

// A crash after the commit, before any operation or halfway through
// them: Recover finishes the accept, every file new (the name that is not
// UTF-8 too: the journal keeps it exact).
func TestRecoverAfterCommitFinishes(t *testing.T) {
	for _, done := range []int{0, 20} {
		l, names := journalLayers(t)
		journal := filepath.Join(t.TempDir(), "accept.journal")
		staged(t, l, journal, true)
		if done > 0 {
			tr, err := openTree(l.Project, os.Getuid(), os.Getgid())
			if err != nil {
				t.Fatal(err)
			}
			head := readHead(t, journal)
			n := 0
			eachOp(journal, false, func(op jop) error {
				if n < done {
					n++
					return tr.do(op, head.Staging, nil)
				}
				return nil
			})
			tr.close()
		}
		if err := Recover(journal); err != nil {
			t.Fatal(err)
		}
		if old, new, missing, left := projectState(t, l, names, journal); old != 0 || new != len(names) || missing != 0 || len(left) > 0 {
			t.Errorf("%d operations done before the crash: recovered to %d old, %d new, %d missing, left %v; want every file new", done, old, new, missing, left)
		}
	}
}

func readHead(t *testing.T, journal string) journalHead {
	t.Helper()
	f, _, head, err := readJournal(journal)
	if err != nil || f == nil {
		t.Fatal("no journal", err)
	}
	f.Close()
	return head
}

// Recovery does the renames first, whatever their place in the journal:
// a rename's source under a directory the accept deletes moves before the
// directory goes. A journal of the first format (one JSON document) is
// recovered too.
func TestRecoverRenamesFirst(t *testing.T) {
	ops := []jop{
		{Op: "remove", Path: "a", Item: 0},
		{Op: "rename", From: "a/x.txt", Path: "b/x.txt", First: true, Item: 1},
	}
	for _, format := range []string{"lines", "first"} {
		p := filepath.Join(t.TempDir(), "proj")
		put(t, filepath.Join(p, "a/x.txt"), "moved\n")
		put(t, filepath.Join(p, "a/y.txt"), "deleted\n")
		journal := filepath.Join(t.TempDir(), "accept.journal")
		var data []byte
		if format == "lines" {
			head, _ := json.Marshal(journalHead{Version: journalVersion, Project: p, Staging: ".airlock-staging-x"})
			data = append(head, '\n')
			for _, op := range append(ops, jop{Op: opCommit}) {
				b, _ := json.Marshal(op)
				data = append(append(data, b...), '\n')
			}
		} else {
			// The first format's operations are in the order to do them.
			data, _ = json.Marshal(journalHead{State: journalCommitted, Project: p, Staging: ".airlock-staging-x", Ops: []jop{ops[1], ops[0]}})
		}
		if err := os.WriteFile(journal, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Recover(journal); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if b, err := os.ReadFile(filepath.Join(p, "b/x.txt")); string(b) != "moved\n" {
			t.Errorf("%s: the renamed file: %q %v", format, b, err)
		}
		if _, err := os.Stat(filepath.Join(p, "a")); err == nil {
			t.Errorf("%s: the deleted directory is still there", format)
		}
		if _, err := os.Stat(journal); err == nil {
			t.Errorf("%s: the journal is still there", format)
		}
	}
}

// A journal from a newer Airlock is refused with what to do, never
// half-understood.
func TestRecoverRefusesANewerJournal(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "accept.journal")
	if err := os.WriteFile(journal, []byte(fmt.Sprintf(`{"journal":%d,"project":"/nowhere","staging":"s"}`+"\n", journalVersion+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Recover(journal); err == nil || !strings.Contains(err.Error(), "newer Airlock") {
		t.Errorf("recover of a newer journal: %v", err)
	}
}

// A directory new to the project is staged whole and placed by one
// rename; when the host made a directory of that name in the meantime (or
// a recovery finds it half moved), the staged entries are moved into it
// one by one, replacing what stands in their way, and the host's other
// entries stay.
func TestPlaceMergesIntoADirectoryTheHostMade(t *testing.T) {
	l, names := journalLayers(t)
	put(t, filepath.Join(l.Upper, "added/sub/deep.txt"), "new added/sub/deep.txt\n")
	names = append(names, "added/sub/deep.txt")
	journal := filepath.Join(t.TempDir(), "accept.journal")
	staged(t, l, journal, true)
	ops := 0
	if err := eachOp(journal, false, func(op jop) error {
		if op.Op == "place" {
			ops++
			if op.Path != "added" {
				t.Errorf("placed %q, want added", op.Path)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ops != 1 {
		t.Fatalf("%d place operations, want 1 (added/ staged whole)", ops)
	}
	// The host, meanwhile: added/ with a file of its own, a directory
	// where the session has a file, a file where it has a directory.
	put(t, filepath.Join(l.Project, "added/host.txt"), "host\n")
	put(t, filepath.Join(l.Project, "added/a.txt/x"), "host\n")
	put(t, filepath.Join(l.Project, "added/sub"), "host\n")
	if err := os.Chmod(filepath.Join(l.Project, "added"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Recover(journal); err != nil {
		t.Fatal(err)
	}
	if old, new, missing, left := projectState(t, l, names, journal); old != 0 || new != len(names) || missing != 0 || len(left) > 0 {
		t.Errorf("recovered to %d old, %d new, %d missing, left %v; want all %d new", old, new, missing, left, len(names))
	}
	if b, err := os.ReadFile(filepath.Join(l.Project, "added/host.txt")); err != nil || string(b) != "host\n" {
		t.Errorf("the host's own file in the merged directory: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(l.Project, "added")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the merged directory's mode: %v, %v; want the session's 0755", fi, err)
	}
}
