package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestScaleProfile is a tool, not a test: with AIRLOCK_SCALE_PROFILE=DIR
// (root, a tmpfs) it makes one directory of AIRLOCK_SCALE_N files
// (200,000 by default: bench section 21's shape), records it, records it
// again after one file is added, diffs the two, restores the second and
// records the restored directory, and prints each step's peak RSS above
// the RSS before it and the bytes it allocated; DIR/STEP.allocs are the
// allocation profiles after each step (go tool pprof -sample_index
// alloc_space -base DIR/PREVIOUS.allocs). A profile lags by one garbage
// collection: read each step's against the one before.
//
//	AIRLOCK_SCALE_PROFILE=/tmp/prof go test -run TestScaleProfile -v ./checkpoint/
func TestScaleProfile(t *testing.T) {
	out := os.Getenv("AIRLOCK_SCALE_PROFILE")
	if out == "" {
		t.Skip("a profiling tool: AIRLOCK_SCALE_PROFILE=DIR")
	}
	n, _ := strconv.Atoi(os.Getenv("AIRLOCK_SCALE_N"))
	if n == 0 {
		n = 200000
	}
	ctx := context.Background()
	base := t.TempDir()
	must(t, unix.Mount("tmpfs", base, "tmpfs", 0, "size=2g"))
	t.Cleanup(func() { unix.Unmount(base, unix.MNT_DETACH) })
	up := filepath.Join(base, "up")
	must(t, os.MkdirAll(filepath.Join(up, "d"), 0o755))
	for i := range n {
		f, err := os.Create(filepath.Join(up, "d", strconv.Itoa(i+1)))
		must(t, err)
		f.Close()
	}
	s := openStore(t)
	op := func(name string, f func()) {
		runtime.GC()
		debug.FreeOSMemory()
		must(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
		start := statusField(t, "VmRSS:")
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		grew := statusField(t, "VmHWM:") - start
		t.Logf("%-20s peak +%4d MiB  allocated %5d MiB", name, grew>>20, (b.TotalAlloc-a.TotalAlloc)>>20)
		pf, _ := os.Create(filepath.Join(out, name+".allocs"))
		pprof.Lookup("allocs").WriteTo(pf, 0)
		pf.Close()
	}
	var c1, c2 *Checkpoint
	op("record1", func() { c1 = record(t, s, up) })
	must(t, os.WriteFile(filepath.Join(up, "d", "x"), nil, 0o644))
	op("record2", func() { c2 = record(t, s, up) })
	op("diff", func() {
		ch, err := s.Diff(c1.ID, c2.ID)
		must(t, err)
		t.Logf("%d changes", len(ch))
	})
	woke := filepath.Join(base, "woke")
	must(t, os.Mkdir(woke, 0o755))
	op("restore", func() { must(t, s.RestoreDir(ctx, c2.ID, woke)) })
	op("record3", func() {
		c, err := s.RecordDir(ctx, woke, RecordOptions{})
		must(t, err)
		if c.Stats.FilesRead > 0 {
			t.Errorf("read %d files after restore", c.Stats.FilesRead)
		}
	})
}
