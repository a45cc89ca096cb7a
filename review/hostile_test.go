package review_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/review"
	"golang.org/x/sys/unix"
)

// modeOf is a path's permission bits, not following a symlink at the end.
func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	must(t, err)
	return fi.Mode().Perm()
}

// A discard of a directory's mode change, after the agent put a symlink to
// a host file where the directory was, leaves the host file alone (the
// chmod used to follow the symlink, as root, on the host).
func TestDiscardModeNeverFollowsASymlink(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(filepath.Join(p, "d"), 0o755))
	victim := filepath.Join(t.TempDir(), "host-secret")
	write(t, victim, "host\n", 0o600)
	ws := mountWS(t, p)
	m := ws.Merged()
	must(t, os.Chmod(filepath.Join(m, "d"), 0o700))
	l := review.Layers{Upper: ws.Upper(), Project: p}
	all, err := review.Review(l)
	must(t, err)
	// Between the review and the discard, the agent swaps the directory
	// for a symlink.
	must(t, os.Remove(filepath.Join(m, "d")))
	must(t, os.Symlink(victim, filepath.Join(m, "d")))
	out, err := review.Discard(l, m, all, review.Selection{Paths: []string{"d"}})
	must(t, err)
	if got := modeOf(t, victim); got != 0o600 {
		t.Fatalf("the host file's mode became %v through the session's symlink (outcome %+v)", got, out)
	}
	if len(out) != 1 || out[0].Applied {
		t.Errorf("want the discard refused: %+v", out)
	}
}

// Finishing an interrupted accept never changes a mode through a symlink
// that stands where the journal expected a directory or a file.
func TestRecoverChmodNeverFollowsASymlink(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	victimDir := filepath.Join(t.TempDir(), "host-dir")
	must(t, os.Mkdir(victimDir, 0o700))
	victim := filepath.Join(t.TempDir(), "host-file")
	write(t, victim, "host\n", 0o600)
	must(t, os.Symlink(victimDir, filepath.Join(p, "d")))
	must(t, os.Symlink(victim, filepath.Join(p, "f")))
	for _, op := range []map[string]any{
		{"op": "chmod", "path": "d", "mode": 0o777, "isdir": true},
		{"op": "mkdir", "path": "d", "mode": 0o777},
		{"op": "chmod", "path": "f", "mode": 0o777},
	} {
		j := filepath.Join(t.TempDir(), "accept.journal")
		data, _ := json.Marshal(map[string]any{"state": "committed", "project": p, "ops": []any{op}})
		must(t, os.WriteFile(j, data, 0o600))
		review.Recover(j)
		if got := modeOf(t, victimDir); got != 0o700 {
			t.Fatalf("%v: the host directory's mode became %v", op, got)
		}
		if got := modeOf(t, victim); got != 0o600 {
			t.Fatalf("%v: the host file's mode became %v", op, got)
		}
	}
}

// peakRSS resets the process's peak resident size and returns a function
// that reports how far above the start it went (VmHWM, /proc/self/status).
func peakRSS(t *testing.T) func() int64 {
	t.Helper()
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	start := status(t, "VmRSS:")
	return func() int64 { return status(t, "VmHWM:") - start }
}

func status(t *testing.T, field string) int64 {
	f, err := os.Open("/proc/self/status")
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// within fails the test if f does not return within d (a read that
// blocks forever would hang the engine).
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func patchOf(t *testing.T, l review.Layers, diffs []review.FileDiff) string {
	t.Helper()
	changes := make([]review.Change, len(diffs))
	for i, d := range diffs {
		changes[i] = d.Change
	}
	var buf bytes.Buffer
	must(t, review.Patch(&buf, l, changes))
	return buf.String()
}

// hostSecret makes a host directory the session must never read.
func hostSecret(t *testing.T) string {
	h := filepath.Join(t.TempDir(), "host")
	write(t, filepath.Join(h, "f.txt"), "HOST SECRET f\n", 0o644)
	write(t, filepath.Join(h, "bin.dat"), "HOST SECRET bin\x00", 0o644)
	write(t, filepath.Join(h, "big.txt"), strings.Repeat("HOST SECRET big\n", 1<<17), 0o644) // 2 MiB: not kept by a review
	return h
}

// A directory of the session swapped for a symlink to a host directory
// between the review and the patch: the patch never carries host bytes
// (it read the upper layer by path, following the swapped component).
func TestPatchAfterSwapReadsNoHostFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	h := hostSecret(t)
	ws := mountWS(t, p)
	m := ws.Merged()
	write(t, filepath.Join(m, "new/f.txt"), "session f\n", 0o644)
	write(t, filepath.Join(m, "new/bin.dat"), "session bin\x00", 0o644)
	write(t, filepath.Join(m, "new/big.txt"), strings.Repeat("session big\n", 1<<17), 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.ReviewWith(l, review.Options{})
	must(t, err)
	must(t, os.Rename(filepath.Join(m, "new"), filepath.Join(m, "old")))
	must(t, os.Symlink(h, filepath.Join(m, "new")))
	out := patchOf(t, l, diffs)
	if strings.Contains(out, "HOST SECRET") || strings.Contains(out, "SECRET") {
		t.Fatalf("the patch carries a host file:\n%.400s", out)
	}
	if !strings.Contains(out, "# airlock: left out new/f.txt") {
		t.Errorf("the patch should say it left new/f.txt out:\n%.600s", out)
	}
}

// The same swap, in a loop, while diffs, patches and discards run: no host
// byte reaches any output, and no host file is changed.
func TestSwapRaceNeverReachesTheHost(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	h := hostSecret(t)
	ws := mountWS(t, p)
	m := ws.Merged()
	fill := func() {
		write(t, filepath.Join(m, "new/f.txt"), "session f\n", 0o644)
		write(t, filepath.Join(m, "new/bin.dat"), "session bin\x00", 0o644)
		write(t, filepath.Join(m, "new/big.txt"), strings.Repeat("session big\n", 1<<17), 0o644)
	}
	fill()
	must(t, os.Symlink(h, filepath.Join(m, "alt")))
	l := review.Layers{Upper: ws.Upper(), Project: p}
	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a, b := filepath.Join(m, "new"), filepath.Join(m, "alt")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("renameat2(RENAME_EXCHANGE) in the session's view: %v", err)
				return
			}
			runtime.Gosched()
			swaps.Add(1)
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	rounds, failed := 0, 0
	for time.Now().Before(deadline) {
		rounds++
		diffs, err := review.Review(l)
		if err != nil {
			failed++
			continue
		}
		js, _ := json.Marshal(diffs)
		if bytes.Contains(js, []byte("SECRET")) {
			close(stop)
			wg.Wait()
			t.Fatalf("round %d: the diff carries a host file: %.300s", rounds, js)
		}
		var buf bytes.Buffer
		changes := make([]review.Change, len(diffs))
		for i, d := range diffs {
			changes[i] = d.Change
		}
		review.Patch(&buf, l, changes)
		if bytes.Contains(buf.Bytes(), []byte("SECRET")) {
			close(stop)
			wg.Wait()
			t.Fatalf("round %d: the patch carries a host file", rounds)
		}
		if rounds%5 == 0 {
			// Removes the session's bin.dat (the directory keeps its other
			// files, so it stays to be swapped), never the host's.
			review.Discard(l, m, diffs, review.Selection{Paths: []string{"new/bin.dat"}})
		}
	}
	close(stop)
	wg.Wait()
	for _, n := range []string{"f.txt", "bin.dat", "big.txt"} {
		if _, err := os.Stat(filepath.Join(h, n)); err != nil {
			t.Errorf("host file %s: %v (a discard went through the swapped symlink)", n, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(h, "f.txt")); string(b) != "HOST SECRET f\n" {
		t.Errorf("host file changed: %q", b)
	}
	t.Logf("%d rounds (%d failed), %d swaps", rounds, failed, swaps.Load())
	if failed > rounds/2 {
		t.Errorf("%d of %d reviews failed", failed, rounds)
	}
}

// FIFOs and sockets are listed as special files and never opened: a FIFO
// opened for reading would block the engine until a writer came.
func TestFIFOAndSocketNeverOpened(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "was-a-file"), "project\n", 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	must(t, unix.Mkfifo(filepath.Join(m, "fifo"), 0o644))
	ln, err := net.Listen("unix", filepath.Join(m, "sock"))
	must(t, err)
	defer ln.Close()
	write(t, filepath.Join(m, "soon-a-fifo"), "a file for now\n", 0o644)
	write(t, filepath.Join(m, "was-a-file"), "changed\n", 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}
	var diffs []review.FileDiff
	within(t, 10*time.Second, "a review with a FIFO and a socket", func() {
		diffs, err = review.Review(l)
	})
	must(t, err)
	by := byPath(diffs)
	for _, n := range []string{"fifo", "sock"} {
		if by[n].Type != review.Special || by[n].Note == "" {
			t.Errorf("%s: %+v, want a special file with a note", n, by[n].Change)
		}
	}
	// The agent swaps regular files for FIFOs after the review: the patch
	// and a re-read in a review must not block on them.
	for _, n := range []string{"soon-a-fifo", "was-a-file"} {
		must(t, os.Remove(filepath.Join(m, n)))
		must(t, unix.Mkfifo(filepath.Join(m, n), 0o644))
	}
	within(t, 10*time.Second, "a patch over files swapped for FIFOs", func() {
		out := patchOf(t, l, diffs)
		if !strings.Contains(out, "left out soon-a-fifo") {
			t.Errorf("the patch should say it left soon-a-fifo out:\n%s", out)
		}
	})
	within(t, 10*time.Second, "a review over FIFOs", func() {
		diffs, err = review.Review(l)
	})
	must(t, err)
}

// A 40 GB sparse file (truncate -s 40G) is diffed, counted and patched
// promptly and in little memory: nothing reads its 40 GB of holes.
func TestSparse40GB(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	// The project has a sparse image too; the session changes one byte far in.
	img, err := os.Create(filepath.Join(p, "disk.img"))
	must(t, err)
	img.WriteAt([]byte("start"), 0)
	must(t, img.Truncate(40<<30))
	img.Close()
	ws := mountWS(t, p)
	m := ws.Merged()
	f, err := os.OpenFile(filepath.Join(m, "sparse.bin"), os.O_WRONLY|os.O_CREATE, 0o644)
	must(t, err)
	must(t, f.Truncate(40<<30))
	f.Close()
	modified := false
	if f, err := os.OpenFile(filepath.Join(m, "disk.img"), os.O_WRONLY, 0); err == nil {
		_, err = f.WriteAt([]byte("x"), 20<<30)
		f.Close()
		modified = err == nil
	}
	if !modified {
		t.Log("the overlay's copy-up did not keep disk.img sparse: only the new file is tested")
		os.Remove(filepath.Join(m, "disk.img"))
	}
	l := review.Layers{Upper: ws.Upper(), Project: p}
	peak := peakRSS(t)
	t0 := time.Now()
	diffs, err := review.Review(l)
	must(t, err)
	js, err := json.Marshal(diffs)
	must(t, err)
	out := patchOf(t, l, diffs)
	took, grew := time.Since(t0), peak()
	t.Logf("diff, stat and patch: %v, peak RSS +%d MiB; patch:\n%s", took, grew>>20, out)
	d := byPath(diffs)["sparse.bin"]
	if !d.Binary || d.Size != 40<<30 || !strings.HasPrefix(d.ContentSum, "sha256-sparse:") {
		t.Errorf("sparse.bin: %+v", d.Change)
	}
	if modified {
		if d := byPath(diffs)["disk.img"]; d.Kind != review.Modified {
			t.Errorf("disk.img: %+v, want modified", d.Change)
		}
	}
	if len(diffs) == 0 || len(js) > 64<<10 || len(out) > 4<<10 || !strings.Contains(out, "# airlock: left out sparse.bin") {
		t.Errorf("want a short diff and a patch naming sparse.bin as left out: %d bytes of JSON, patch %q", len(js), out)
	}
	if took > 60*time.Second || grew > 256<<20 {
		t.Errorf("took %v and %d MiB more memory", took, grew>>20)
	}
}

// A 1.5 GB random file: the review and the patch stream it (its digest),
// never hold it.
func TestLargeRandomFile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1.5 GB")
	}
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	ws, err := mountWSSize(t, p, 1600<<20)
	must(t, err)
	f, err := os.Create(filepath.Join(ws.Merged(), "random.bin"))
	must(t, err)
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 1<<20)
	for i := 0; i < 1536; i++ {
		rng.Read(buf)
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	buf = nil
	l := review.Layers{Upper: ws.Upper(), Project: p}
	peak := peakRSS(t)
	t0 := time.Now()
	diffs, err := review.Review(l)
	must(t, err)
	t1 := time.Now()
	out := patchOf(t, l, diffs)
	took, grew := time.Since(t0), peak()
	t.Logf("diff %v, patch %v, peak RSS +%d MiB", t1.Sub(t0), time.Since(t1), grew>>20)
	d := byPath(diffs)["random.bin"]
	if !d.Binary || !strings.HasPrefix(d.ContentSum, "sha256:") || len(out) > 4<<10 {
		t.Errorf("random.bin: %+v; patch %q", d.Change, out)
	}
	if grew > 256<<20 {
		t.Errorf("the review and the patch of a 1.5 GB file took %d MiB more memory", grew>>20)
	}
	_ = took
}

// A huge single-line text file is shown by size and digest, never as a
// one-line diff of megabytes.
func TestHugeLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "min.js"), "var a=1;\n", 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	write(t, filepath.Join(m, "min.js"), strings.Repeat("var a=1;", 1<<19), 0o644) // 4 MiB, one line
	write(t, filepath.Join(m, "huge.txt"), strings.Repeat("x", 20<<20), 0o644)     // 20 MiB, one line
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	by := byPath(diffs)
	for _, n := range []string{"min.js", "huge.txt"} {
		d := by[n]
		if !d.Binary || d.TooLarge == "" || len(d.Hunks) > 0 || !strings.HasPrefix(d.ContentSum, "sha256:") {
			t.Errorf("%s: %+v (%d hunks)", n, d.Change, len(d.Hunks))
		}
	}
	for _, d := range diffs {
		if d.TooLarge == "" {
			t.Errorf("%s: want too_large", d.Path)
		}
	}
	// The patch carries the 4 MiB file (a patch is for tools) and names
	// the 20 MiB one.
	out := patchOf(t, l, diffs)
	if !strings.Contains(out, "# airlock: left out huge.txt") || !strings.Contains(out, "diff --git a/min.js b/min.js") || len(out) > 9<<20 {
		t.Errorf("patch: %.300s ... (%d bytes)", out, len(out))
	}
}

// A file that keeps growing while it is diffed and patched: bounded reads,
// no error, no hang.
func TestFileGrowingWhileDiffed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	ws, err := mountWSSize(t, p, 256<<20)
	must(t, err)
	m := ws.Merged()
	write(t, filepath.Join(m, "grow.log"), "start\n", 0o644)
	write(t, filepath.Join(m, "other.txt"), "hello\n", 0o644)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(filepath.Join(m, "grow.log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return
		}
		defer f.Close()
		line := []byte(strings.Repeat("log line\n", 1000))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := f.Write(line); err != nil {
				f.Truncate(0) // full: start again
			}
		}
	}()
	l := review.Layers{Upper: ws.Upper(), Project: p}
	peak := peakRSS(t)
	for i := 0; i < 5; i++ {
		diffs, err := review.Review(l)
		must(t, err)
		if d := byPath(diffs)["other.txt"]; d.Kind != review.Added {
			t.Errorf("other.txt: %+v", d.Change)
		}
		var n countWriter
		changes := make([]review.Change, len(diffs))
		for i, d := range diffs {
			changes[i] = d.Change
		}
		must(t, review.Patch(&n, l, changes))
		if n > 64<<20 {
			t.Errorf("a %d-byte patch of a growing file", n)
		}
	}
	close(stop)
	<-done
	if grew := peak(); grew > 512<<20 {
		t.Errorf("diffing a growing file took %d MiB more memory", grew>>20)
	}
}

type countWriter int64

func (c *countWriter) Write(b []byte) (int, error) { *c += countWriter(len(b)); return len(b), nil }

// 2,000 directory levels: reviewed, patched and discarded without
// exhausting descriptors (the walk used to hold one per level) or stack.
func TestDeepTree(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	ws := mountWS(t, p)
	m := ws.Merged()
	fd, err := unix.Open(m, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	const depth = 2000
	for i := 0; i < depth; i++ {
		// A sibling with a file at every level: the walk has more than
		// one directory to go to at each step.
		must(t, unix.Mkdirat(fd, "e", 0o755))
		if efd, err := unix.Openat(fd, "e/x.txt", unix.O_WRONLY|unix.O_CREAT, 0o644); err == nil {
			unix.Close(efd)
		}
		must(t, unix.Mkdirat(fd, "d", 0o755))
		nfd, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		if i == depth/2 {
			leaf, err := unix.Openat(nfd, "mid.txt", unix.O_WRONLY|unix.O_CREAT, 0o644)
			must(t, err)
			unix.Write(leaf, []byte("middle\n"))
			unix.Close(leaf)
		}
		unix.Close(fd)
		fd = nfd
	}
	leaf, err := unix.Openat(fd, "leaf.txt", unix.O_WRONLY|unix.O_CREAT, 0o644)
	must(t, err)
	unix.Write(leaf, []byte("deep\n"))
	unix.Close(leaf)
	unix.Close(fd)
	deepPath := strings.Repeat("d/", depth) + "leaf.txt"
	l := review.Layers{Upper: ws.Upper(), Project: p}
	// Far fewer descriptors than levels.
	var old unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	lim := old
	lim.Cur = 256
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	diffs, err := review.Review(l)
	unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	must(t, err)
	by := byPath(diffs)
	if d, ok := by[deepPath]; !ok || d.Kind != review.Added || len(d.Hunks) != 1 {
		t.Fatalf("the leaf 2,000 levels down is not reviewed: %d changes, first %+v", len(diffs), diffs[0].Change)
	}
	for _, d := range diffs {
		if d.Note != "" {
			t.Errorf("%.60s...: %s", d.Path, d.Note)
		}
	}
	out := patchOf(t, l, diffs)
	if !strings.Contains(out, "+deep") || !strings.Contains(out, "+middle") {
		t.Errorf("the patch lacks the deep files (%d bytes)", len(out))
	}
	res, err := review.Discard(l, m, diffs, review.Selection{Paths: []string{deepPath}})
	must(t, err)
	if len(res) != 1 || !res[0].Applied {
		t.Errorf("discard of the deep leaf: %+v", res)
	}
}

// 200,000 empty files: a review's memory per file stays small.
func TestManyFilesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 200,000 files")
	}
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	ws, err := mountWSSize(t, p, 512<<20)
	must(t, err)
	m := ws.Merged()
	const dirs, per = 200, 1000
	for d := 0; d < dirs; d++ {
		dir := filepath.Join(m, fmt.Sprintf("dir%03d", d))
		must(t, os.Mkdir(dir, 0o755))
		dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		must(t, err)
		for f := 0; f < per; f++ {
			fd, err := unix.Openat(dfd, fmt.Sprintf("file%04d.txt", f), unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
			must(t, err)
			unix.Close(fd)
		}
		unix.Close(dfd)
	}
	l := review.Layers{Upper: ws.Upper(), Project: p}
	peak := peakRSS(t)
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	t0 := time.Now()
	diffs, err := review.ReviewContext(context.Background(), l, review.Options{Hunks: true})
	must(t, err)
	stats := diffs
	took := time.Since(t0)
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	grew := peak()
	cpu := time.Duration(r1.Utime.Nano()-r0.Utime.Nano()) + time.Duration(r1.Stime.Nano()-r0.Stime.Nano())
	t.Logf("%d files: %v (CPU %v), peak RSS +%d MiB, %d bytes per file", len(stats), took, cpu, grew>>20, grew/int64(len(stats)))
	if len(stats) != dirs*per {
		t.Fatalf("%d changes, want %d", len(stats), dirs*per)
	}
	// About 1,150 bytes a file before accept's digests joined the review,
	// about 1,750 since; the ceiling catches a per-file buffer or copy.
	if per := grew / int64(len(stats)); per > 2048 {
		t.Errorf("%d bytes of memory per file", per)
	}
	runtime.KeepAlive(diffs)
}

var _ = io.Discard

// The swap between a review and an accept: the accept reads the session's
// files confined, so a host file never lands in the project.
func TestAcceptAfterSwapCopiesNoHostFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	h := hostSecret(t)
	must(t, os.Mkdir(filepath.Join(h, "sub"), 0o700))
	ws := mountWS(t, p)
	m := ws.Merged()
	write(t, filepath.Join(m, "new/big.txt"), strings.Repeat("session big\n", 1<<17), 0o644) // not kept by the review
	write(t, filepath.Join(m, "new/sub/x.txt"), "x\n", 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.ReviewWith(l, review.Options{})
	must(t, err)
	must(t, os.Rename(filepath.Join(m, "new"), filepath.Join(m, "old")))
	must(t, os.Symlink(h, filepath.Join(m, "new")))
	review.Accept(l, diffs, review.Selection{}, journal(t))
	if b, err := os.ReadFile(filepath.Join(p, "new/big.txt")); err == nil && strings.Contains(string(b), "SECRET") {
		t.Fatalf("the accept copied a host file into the project")
	}
	if fi, err := os.Stat(filepath.Join(p, "new/sub")); err == nil && fi.Mode().Perm() == 0o700 {
		t.Errorf("the accept took a host directory's mode")
	}
}
