package checkpoint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkRestore500MB: restore of a checkpoint of 500 MiB (50 files of
// 10 MiB in 3 directories, a hibernated session's workspace in bench 18)
// from the store on /var/tmp (the state directory's disk, its objects in
// the page cache as after a hibernate) into a fresh tmpfs, as a wake does.
//
//	go test -run '^$' -bench Restore500MB -benchtime 5x ./checkpoint/
//
// BENCH_TMPFS_OPTS adds mount options to the tmpfs: with
// "huge=within_size," (transparent huge pages for files that fill them)
// the restore took 30-45% less here (624-883 ms against 883-1,615 ms p50,
// alternating), most of a write into a tmpfs being its page allocations.
// Session workspaces do not use it: a sparse file's every data region
// would then take a 2 MiB page against the workspace's size cap (a
// workspace that fits could no longer be restored).
func BenchmarkRestore500MB(b *testing.B) {
	if !root() {
		b.Skip("needs root (tmpfs mounts)")
	}
	work, err := os.MkdirTemp("/var/tmp", "checkpoint-bench-restore-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(work) })
	src := filepath.Join(work, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		b.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{3})
	buf := make([]byte, 10<<20)
	for n := range 50 {
		rng.Read(buf)
		p := filepath.Join(src, fmt.Sprintf("d%d/f%d", n/20, n%20))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s, err := Open(filepath.Join(work, "store"))
	if err != nil {
		b.Fatal(err)
	}
	c, err := s.RecordDir(context.Background(), src, RecordOptions{})
	if err != nil {
		b.Fatal(err)
	}
	os.RemoveAll(src)
	target := filepath.Join(work, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		if err := unix.Mount("bench", target, "tmpfs", 0, os.Getenv("BENCH_TMPFS_OPTS")+"size=700m"); err != nil {
			b.Fatal(err)
		}
		upper := filepath.Join(target, "upper")
		if err := os.Mkdir(upper, 0o755); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t := time.Now()
		err := s.RestoreDir(context.Background(), c.ID, upper)
		took = append(took, time.Since(t))
		b.StopTimer()
		unix.Unmount(target, unix.MNT_DETACH)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(took[0])/1e6, "min-ms")
}
