package review_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock/airlock/review"
	"github.com/airlock/airlock/testenv"
)

func acceptAll(t *testing.T, l review.Layers, paths ...string) []review.Outcome {
	t.Helper()
	diffs, err := review.Review(l)
	must(t, err)
	out, err := review.Accept(l, diffs, review.Selection{Paths: paths}, journal(t))
	must(t, err)
	return out
}

func TestOddNames(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	ws := mountWS(t, p)
	names := []string{"new\nline.txt", "bad-\xff\xfe-utf8.txt", "tab\tand \"quote\".txt"}
	long := strings.Repeat("d", 200)
	deep := filepath.Join(long, long, long, long, long, long, long, long, long, long, long, long, "leaf.txt") // ~2,400 bytes
	names = append(names, deep)
	for _, n := range names {
		write(t, filepath.Join(ws.Merged(), n), "content of "+n+"\n", 0o644)
	}
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	if len(diffs) != len(names) {
		t.Fatalf("%d changes for %d names", len(diffs), len(names))
	}
	// JSON keeps a non-UTF-8 name recoverable, and its id selects it.
	var bad review.FileDiff
	for _, d := range diffs {
		if strings.HasPrefix(d.Path, "bad-") {
			bad = d
		}
	}
	js, _ := json.Marshal(bad)
	var back review.FileDiff
	must(t, json.Unmarshal(js, &back))
	if string(back.RawPath) != names[1] || back.ID == "" {
		t.Fatalf("raw path lost in JSON: %s", js)
	}
	out, err := review.Accept(l, diffs, review.Selection{Hunks: []string{back.ID}}, journal(t))
	must(t, err)
	if len(out) != 1 || !out[0].Applied {
		t.Fatalf("accept by file id: %+v", out)
	}
	out = acceptAll(t, l)
	for _, o := range out {
		if !o.Applied {
			t.Errorf("%q: %s", o.Path, o.Error)
		}
	}
	for _, n := range names {
		if b, err := os.ReadFile(filepath.Join(p, n)); err != nil || string(b) != "content of "+n+"\n" {
			t.Errorf("%q on the host: %q %v", n, b, err)
		}
	}
	// The patch quotes them so git applies it.
	var buf bytes.Buffer
	must(t, os.RemoveAll(filepath.Join(p, long)))
	for _, n := range names[:3] {
		os.Remove(filepath.Join(p, n))
	}
	changes, _ := review.Changes(l)
	must(t, review.Patch(&buf, l, changes))
	apply := exec.Command("git", "apply", "--check", "-")
	apply.Dir = p
	apply.Stdin = &buf
	if out, err := apply.CombinedOutput(); err != nil {
		t.Errorf("git apply --check: %v %s", err, out)
	}
}

func TestPathTooLongIsListedNotFatal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	ws := mountWS(t, p)
	write(t, filepath.Join(ws.Merged(), "ok.txt"), "fine\n", 0o644)
	// Build a path longer than PATH_MAX one directory at a time.
	seg := strings.Repeat("x", 250)
	dir := ws.Merged()
	must(t, os.Chdir(dir))
	defer os.Chdir("/")
	for i := 0; i < 20; i++ {
		must(t, os.Mkdir(seg, 0o755))
		must(t, os.Chdir(seg))
	}
	must(t, os.WriteFile("deep.txt", []byte("deep\n"), 0o644))
	os.Chdir("/")
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	if err != nil {
		t.Fatalf("a too-long path broke the whole review: %v", err)
	}
	var ok, noted bool
	for _, d := range diffs {
		if d.Path == "ok.txt" {
			ok = true
		}
		if strings.Contains(d.Note, "cannot be reviewed") {
			noted = true
		}
	}
	if !ok || !noted {
		t.Errorf("want ok.txt reviewed and the deep path noted: %+v", diffs)
	}
}

func sum(t *testing.T, p string) [32]byte {
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

func TestLargeSparseAndHardlinkedFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	ws, err := mountWSSize(t, p, 256<<20)
	must(t, err)
	m := ws.Merged()
	// 1 GiB, sparse: data at both ends, a hole between.
	f, err := os.Create(filepath.Join(m, "big.img"))
	must(t, err)
	f.Write([]byte("start"))
	f.WriteAt([]byte("end"), 1<<30-3)
	f.Close()
	write(t, filepath.Join(m, "a.txt"), "shared\n", 0o644)
	must(t, os.Link(filepath.Join(m, "a.txt"), filepath.Join(m, "b.txt")))
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	for _, d := range diffs {
		if d.Path == "big.img" && (!d.Binary || d.Size != 1<<30 || len(d.Hunks) != 0) {
			t.Errorf("big.img: %+v", d.Change)
		}
	}
	out := acceptAll(t, l)
	for _, o := range out {
		if !o.Applied {
			t.Errorf("%s: %s", o.Path, o.Error)
		}
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(p, "big.img"), &st))
	if st.Size != 1<<30 || st.Blocks*512 > 1<<20 {
		t.Errorf("big.img on the host: size %d, %d bytes allocated (want 1 GiB, still sparse)", st.Size, st.Blocks*512)
	}
	if sum(t, filepath.Join(p, "big.img")) != sum(t, filepath.Join(m, "big.img")) {
		t.Errorf("big.img content differs")
	}
	for _, n := range []string{"a.txt", "b.txt"} {
		if b, _ := os.ReadFile(filepath.Join(p, n)); string(b) != "shared\n" {
			t.Errorf("%s = %q", n, b)
		}
	}
}

func TestReadOnlyHostFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "ro.txt"), "old\n", 0o444)
	ws := mountWS(t, p)
	must(t, os.Chmod(filepath.Join(ws.Merged(), "ro.txt"), 0o644))
	write(t, filepath.Join(ws.Merged(), "ro.txt"), "new\n", 0o644)
	must(t, os.Chmod(filepath.Join(ws.Merged(), "ro.txt"), 0o444))
	out := acceptAll(t, review.Layers{Upper: ws.Upper(), Project: p})
	if len(out) != 1 || !out[0].Applied {
		t.Fatalf("%+v", out)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "ro.txt")); string(b) != "new\n" {
		t.Errorf("ro.txt = %q", b)
	}
}

func TestFullHostDiskRollsBack(t *testing.T) {
	testenv.Root(t, "mounts a small file system for the project")
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	must(t, syscall.Mount("small", p, "tmpfs", 0, "size=1m"))
	defer syscall.Unmount(p, syscall.MNT_DETACH)
	write(t, filepath.Join(p, "keep.txt"), "old\n", 0o644)
	ws := mountWS(t, p)
	write(t, filepath.Join(ws.Merged(), "keep.txt"), "new\n", 0o644)
	write(t, filepath.Join(ws.Merged(), "huge.bin"), strings.Repeat("z", 3<<20), 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}
	out := acceptAll(t, l)
	for _, o := range out {
		if o.Applied || !strings.Contains(o.Error, "disk is full") {
			t.Errorf("%s: %+v, want not applied because the disk is full", o.Path, o)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(p, "keep.txt")); string(b) != "old\n" {
		t.Errorf("keep.txt changed by a failed accept: %q", b)
	}
	entries, _ := os.ReadDir(p)
	for _, e := range entries {
		if e.Name() != "keep.txt" {
			t.Errorf("left in the project: %s", e.Name())
		}
	}
}

// The same with many small files, which the accept writes on several
// goroutines: the first that finds the disk full rolls everything back.
func TestFullHostDiskRollsBackSmallFiles(t *testing.T) {
	testenv.Root(t, "mounts a small file system for the project")
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	must(t, syscall.Mount("small", p, "tmpfs", 0, "size=1m"))
	defer syscall.Unmount(p, syscall.MNT_DETACH)
	write(t, filepath.Join(p, "keep.txt"), "old\n", 0o644)
	ws := mountWS(t, p)
	write(t, filepath.Join(ws.Merged(), "keep.txt"), "new\n", 0o644)
	for i := range 600 {
		write(t, filepath.Join(ws.Merged(), fmt.Sprintf("new%d/f%03d.txt", i%6, i)), strings.Repeat("s", 3000), 0o644)
	}
	out := acceptAll(t, review.Layers{Upper: ws.Upper(), Project: p})
	if len(out) != 601 {
		t.Fatalf("%d outcomes, want 601", len(out))
	}
	for _, o := range out {
		if o.Applied || !strings.Contains(o.Error, "disk is full") {
			t.Fatalf("%s: %+v, want not applied because the disk is full", o.Path, o)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(p, "keep.txt")); string(b) != "old\n" {
		t.Errorf("keep.txt changed by a failed accept: %q", b)
	}
	entries, _ := os.ReadDir(p)
	for _, e := range entries {
		if e.Name() != "keep.txt" {
			t.Errorf("left in the project: %s", e.Name())
		}
	}
}
