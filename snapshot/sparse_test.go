package snapshot

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/testenv"
	"golang.org/x/sys/unix"
)

// sparseFile makes a file of size bytes holding data at the offsets.
func sparseFile(t *testing.T, p string, size int64, data map[int64]string) {
	t.Helper()
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	for off, s := range data {
		_, err := f.WriteAt([]byte(s), off)
		must(t, err)
	}
	must(t, f.Truncate(size))
}

func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Stat(p, &st))
	return st.Blocks * 512
}

// TestSparseRoundTrip: a 40 GB file with a few bytes of data is a few
// bytes in the layer and on disk once applied, with its data in place, and
// its layer is readable by GNU tar.
func TestSparseRoundTrip(t *testing.T) {
	needRoot(t)
	src, dst := t.TempDir(), t.TempDir()
	const size = 40 << 30
	data := map[int64]string{0: "head", 20 << 30: "middle", size - 4: "tail"}
	sparseFile(t, filepath.Join(src, "disk.img"), size, data)
	must(t, os.WriteFile(filepath.Join(src, "plain"), []byte("plain"), 0o644))
	layer := filepath.Join(t.TempDir(), "layer.tar")
	f, err := os.Create(layer)
	must(t, err)
	t0 := time.Now()
	st, err := WriteLayer(f, Source{Root: root(t, src)})
	must(t, err)
	f.Close()
	fi, _ := os.Stat(layer)
	t.Logf("written in %v: %d bytes, %+v", time.Since(t0), fi.Size(), st)
	if fi.Size() > 64<<10 {
		t.Errorf("the layer takes %d bytes", fi.Size())
	}
	open := func() (io.ReadCloser, error) { return os.Open(layer) }
	t0 = time.Now()
	if _, err := ApplyLayer(open, Target{Root: root(t, dst)}, Limits{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("applied in %v", time.Since(t0))
	p := filepath.Join(dst, "disk.img")
	got, err := os.Stat(p)
	must(t, err)
	if got.Size() != size || allocated(t, p) > 1<<20 {
		t.Errorf("applied: %d bytes, %d allocated", got.Size(), allocated(t, p))
	}
	want, _ := os.Stat(filepath.Join(src, "disk.img"))
	if !got.ModTime().Equal(want.ModTime()) {
		t.Errorf("mtime %v, want %v", got.ModTime(), want.ModTime())
	}
	af, err := os.Open(p)
	must(t, err)
	defer af.Close()
	for off, s := range data {
		b := make([]byte, len(s))
		if _, err := af.ReadAt(b, off); err != nil || string(b) != s {
			t.Errorf("at %d: %q %v, want %q", off, b, err, s)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "plain")); string(b) != "plain" {
		t.Errorf("plain: %q", b)
	}
	// A second snapshot of what was applied is the same layer.
	var again bytes.Buffer
	_, err = WriteLayer(&again, Source{Root: root(t, dst)})
	must(t, err)
	if orig, _ := os.ReadFile(layer); !bytes.Equal(orig, again.Bytes()) {
		t.Error("the applied tree gives another layer")
	}

	// GNU tar reads the encoding, and keeps the file sparse.
	if _, err := exec.LookPath("tar"); err == nil {
		out := t.TempDir()
		if b, err := exec.Command("tar", "-xf", layer, "-C", out).CombinedOutput(); err != nil {
			t.Fatalf("GNU tar: %v %s", err, b)
		}
		p := filepath.Join(out, "disk.img")
		if fi, err := os.Stat(p); err != nil || fi.Size() != size || allocated(t, p) > 1<<20 {
			t.Errorf("extracted by GNU tar: %v %v, %d allocated", fi, err, allocated(t, p))
		}
		b := make([]byte, 6)
		f, _ := os.Open(p)
		f.ReadAt(b, 20<<30)
		f.Close()
		if string(b) != "middle" {
			t.Errorf("GNU tar extracted %q at 20 GiB", b)
		}
	}
}

// TestSparseLimits: holes that must be read through when applied are
// bounded, as is a file's size; a sparse map that Airlock does not write
// is refused.
func TestSparseLimits(t *testing.T) {
	needRoot(t)
	src := t.TempDir()
	sparseFile(t, filepath.Join(src, "f"), 8<<20, map[int64]string{8<<20 - 1: "x"})
	layer := writeFrom(t, src)
	if _, err := ApplyLayer(opener(layer), Target{Root: root(t, t.TempDir())}, Limits{Holes: 1 << 20}); !errors.Is(err, ErrLimit) {
		t.Errorf("holes over the limit: %v", err)
	}
	if _, err := ApplyLayer(opener(layer), Target{Root: root(t, t.TempDir())}, Limits{FileSize: 1 << 20}); !errors.Is(err, ErrLimit) {
		t.Errorf("a file over the limit: %v", err)
	}
	if _, err := ApplyLayer(opener(layer), Target{Root: root(t, t.TempDir())}, Limits{}); err != nil {
		t.Errorf("within the limits: %v", err)
	}
	// A second entry of the sparse file's name (it is filled after).
	var buf bytes.Buffer
	buf.Write(layer[:len(layer)-1024]) // without the end-of-archive blocks
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"})
	tw.Close()
	if _, err := ApplyLayer(opener(buf.Bytes()), Target{Root: root(t, t.TempDir())}, Limits{}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("a sparse file replaced: %v", err)
	}
	// GNU's 1.0 encoding, whose map Go's reader hides.
	var g bytes.Buffer
	g.WriteString(paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") + paxRecord("GNU.sparse.realsize", "100") + paxRecord("GNU.sparse.name", "g"))
	rec := g.Bytes()
	var raw bytes.Buffer
	raw.Write(ustar("PaxHeaders.0/g", 'x', 0o644, 0, 0, int64(len(rec)), time.Unix(0, 0)))
	raw.Write(rec)
	raw.Write(make([]byte, (512-len(rec)%512)%512))
	body := "1\n0\n1\n"
	raw.Write(ustar("GNUSparseFile.0/g", '0', 0o644, 0, 0, 513, time.Unix(0, 0)))
	raw.WriteString(body)
	raw.Write(make([]byte, 512-len(body)))
	raw.WriteString("x")
	raw.Write(make([]byte, 511+1024))
	if _, err := ApplyLayer(opener(raw.Bytes()), Target{Root: root(t, t.TempDir())}, Limits{}); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "1.x") {
		t.Errorf("GNU sparse 1.0: %v", err)
	}
}

// TestLargeFileBoundedMemory: a 1.5 GB file is streamed, never held: the
// process's peak memory grows by far less than the file.
func TestLargeFileBoundedMemory(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("writes 4.5 GB")
	}
	src, dst := t.TempDir(), t.TempDir()
	f, err := os.Create(filepath.Join(src, "big"))
	must(t, err)
	w := bufio.NewWriterSize(f, 1<<20)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for written := 0; written < 1536<<20; written += len(chunk) {
		w.Write(chunk)
	}
	must(t, w.Flush())
	f.Close()
	before := peakRSS(t)
	layer := filepath.Join(t.TempDir(), "layer.tar")
	lf, err := os.Create(layer)
	must(t, err)
	_, err = WriteLayer(lf, Source{Root: root(t, src)})
	must(t, err)
	lf.Close()
	if _, err := ApplyLayer(func() (io.ReadCloser, error) { return os.Open(layer) }, Target{Root: root(t, dst)}, Limits{}); err != nil {
		t.Fatal(err)
	}
	if grew := peakRSS(t) - before; grew > 64<<20 {
		t.Errorf("peak memory grew by %d MB writing and applying a 1.5 GB file", grew>>20)
	}
	if fi, err := os.Stat(filepath.Join(dst, "big")); err != nil || fi.Size() != 1536<<20 {
		t.Errorf("applied: %v %v", fi, err)
	}
}

// peakRSS is the process's peak resident memory (VmHWM).
func peakRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	must(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestApplyFull: a target without room says so (ENOSPC), which the engine
// turns into "restore it with a larger --workspace-size".
func TestApplyFull(t *testing.T) {
	needRoot(t)
	src, dst := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(src, "big"), bytes.Repeat([]byte("x"), 3<<20), 0o644))
	if err := unix.Mount("tmpfs", dst, "tmpfs", 0, "size=1m"); err != nil {
		testenv.Missing(t, "mount a tmpfs: "+err.Error())
	}
	t.Cleanup(func() { unix.Unmount(dst, 0) }) // after the root is closed
	if _, err := applyTo(t, writeFrom(t, src), dst); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("a layer larger than its target: %v, want ENOSPC", err)
	}
}

// TestAllHoleFile: a file with no data at all (`truncate -s 40G`) is a
// sparse entry with an empty map, not 40 GB of zeros in the layer.
func TestAllHoleFile(t *testing.T) {
	needRoot(t)
	src, dst := t.TempDir(), t.TempDir()
	const size = 40 << 30
	f, err := os.Create(filepath.Join(src, "hole.bin"))
	must(t, err)
	must(t, f.Truncate(size))
	f.Close()
	var layer cappedBuffer
	if _, err := WriteLayer(&layer, Source{Root: root(t, src)}); err != nil {
		t.Fatalf("the layer of a 40 GB hole: %v", err)
	}
	if _, err := ApplyLayer(opener(layer.Bytes()), Target{Root: root(t, dst)}, Limits{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dst, "hole.bin")
	fi, err := os.Stat(p)
	must(t, err)
	if fi.Size() != size || allocated(t, p) > 1<<20 {
		t.Fatalf("applied: size %d, %d bytes allocated", fi.Size(), allocated(t, p))
	}
}

// cappedBuffer refuses to grow past 1 MiB: a layer that would write a
// hole's zeros fails at once instead of filling the disk.
type cappedBuffer struct{ bytes.Buffer }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > 1<<20 {
		return 0, errors.New("over 1 MiB: the hole's zeros were written")
	}
	return b.Buffer.Write(p)
}
