package review

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// What accepts record in the session's base is found again for every
// path, by this Base and by one opened later: the last accept that wrote a
// path wins, and within one accept the last record of it. An accept's
// records come in any order and more than fit in one sorted chunk (so
// they are spilled and merged), and nothing is left beside the table.
func TestAcceptedOverridesOnDisk(t *testing.T) {
	dir := t.TempDir()
	project, bdir := filepath.Join(dir, "proj"), filepath.Join(dir, "base")
	put(t, filepath.Join(project, "kept.txt"), "start\n")
	put(t, filepath.Join(project, "written.txt"), "accepted\n")
	b, err := CaptureBase(project, bdir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Ready())
	keptStart, _ := b.start("kept.txt")

	const n = 40000 // > overrideChunk's worth of records
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("gone/%05d\xff", i) // not UTF-8 either
		if i%20 == 0 {
			paths[i] = fmt.Sprintf("real/%05d", i)
			put(t, filepath.Join(project, paths[i]), "")
		}
	}
	rand.New(rand.NewSource(1)).Shuffle(n, func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	real := func(p string) bool { return strings.HasPrefix(p, "real/") }
	again := paths[slices.IndexFunc(paths, real)] // accepted twice
	sum := func(p string, round int) string { return fmt.Sprintf("%s@%d", p, round) }
	t0 := time.Now()
	must(b.Accepted(func(record func(AcceptedFile) error) error {
		for _, p := range paths {
			if err := record(AcceptedFile{Path: p, SessionSum: sum(p, 1)}); err != nil {
				return err
			}
		}
		// Given twice in one accept: the later counts.
		return record(AcceptedFile{Path: "written.txt", SessionSum: "second"})
	}))
	t.Logf("recorded %d accepted paths in %v", n, time.Since(t0))
	// A later accept overrides some of them again.
	content := "merged\n"
	must(b.Accepted(func(record func(AcceptedFile) error) error {
		must(record(AcceptedFile{Path: "written.txt", Content: &content}))
		must(record(AcceptedFile{Path: paths[7], SessionSum: sum(paths[7], 2)}))
		return record(AcceptedFile{Path: again, SessionSum: sum(again, 2)})
	}))

	check := func(b *Base) {
		t.Helper()
		for _, p := range paths {
			o, ok := b.override(p)
			want := sum(p, 1)
			if p == again {
				want = sum(p, 2)
			}
			switch {
			case real(p) && (!ok || o.Gone || o.Path != p || o.Session != want):
				t.Fatalf("%q: override %+v, %v; want session file %s", p, o, ok, want)
			case !real(p) && (!ok || !o.Gone || o.Path != p || o.Session != ""):
				t.Fatalf("%q: override %+v, %v; want gone", p, o, ok)
			}
		}
		o, ok := b.override("written.txt")
		if !ok || o.Gone || o.Object != sha256hex([]byte(content)) || o.Session != "" {
			t.Errorf("written.txt: override %+v, %v; want the later accept's content", o, ok)
		}
		if data, ok, err := b.Content("written.txt", nil, 1<<20); err != nil || !ok || string(data) != content {
			t.Errorf("written.txt: base content %q, %v, %v", data, ok, err)
		}
		if _, ok := b.override("kept.txt"); ok {
			t.Error("kept.txt has an override it was never given")
		}
		if e, ok := b.start("kept.txt"); !ok || e != keptStart {
			t.Errorf("kept.txt: start %+v, %v; want the manifest's %+v", e, ok, keptStart)
		}
		gone := paths[slices.IndexFunc(paths, func(p string) bool { return !real(p) })]
		if _, had := b.start(gone); had {
			t.Errorf("%q: accepted as deleted, but its base exists", gone)
		}
	}
	check(b)
	reopened := OpenBase(project, bdir)
	defer reopened.Close()
	must(reopened.Ready())
	check(reopened)

	names, err := os.ReadDir(bdir)
	must(err)
	var got []string
	for _, e := range names {
		got = append(got, e.Name())
	}
	if want := []string{manifestName, objectsDir, overridesTableName}; !slices.Equal(got, want) {
		t.Errorf("base directory holds %v, want %v", got, want)
	}
}

// A base whose accepts were recorded in the earlier format (JSON lines,
// appended; a torn last line after a crash) reads them as before, in the
// table from then on.
func TestAcceptedOverridesOfEarlierFormat(t *testing.T) {
	dir := t.TempDir()
	project, bdir := filepath.Join(dir, "proj"), filepath.Join(dir, "base")
	put(t, filepath.Join(project, "a.txt"), "start\n")
	b, err := CaptureBase(project, bdir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	var lines []byte
	for _, o := range []override{
		{Path: "a.txt", Session: "first"},
		{Path: "b.txt", Gone: true},
		{Path: "a.txt", Session: "second", Stat: statEntry{Size: 3, Mode: 0o644}},
	} {
		line, _ := json.Marshal(o)
		lines = append(append(lines, line...), '\n')
	}
	lines = append(lines, `{"path":"c.txt","sess`...)
	if err := os.WriteFile(filepath.Join(bdir, overridesName), lines, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 { // converting, then converted
		b := OpenBase(project, bdir)
		if err := b.Ready(); err != nil {
			t.Fatal(err)
		}
		if o, ok := b.override("a.txt"); !ok || o.Session != "second" || o.Stat.Size != 3 {
			t.Errorf("a.txt: %+v, %v; want the later record", o, ok)
		}
		if o, ok := b.override("b.txt"); !ok || !o.Gone {
			t.Errorf("b.txt: %+v, %v; want gone", o, ok)
		}
		if _, ok := b.override("c.txt"); ok {
			t.Error("c.txt: the torn record was read")
		}
		b.Close()
		if _, err := os.Stat(filepath.Join(bdir, overridesName)); !os.IsNotExist(err) {
			t.Errorf("the earlier format's file is still there: %v", err)
		}
	}
}
