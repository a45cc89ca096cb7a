package review_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/secretscan/gitleaks"

	"github.com/airlock/airlock/review"
)

// The accept of a large session costs a bounded amount of memory, however
// many files it writes: the engine's target is at most 64 MB above idle
// while accepting 200,000 files. The accept runs in a child process (its
// own peak RSS, VmHWM, reset just before the accept), as the engine
// accepts everything: a policy-checked review with hunks, streamed into
// AcceptEach, then the base recording what was written.
//
//	go test -run '^$' -bench AcceptManyFiles -benchtime 1x ./review/
//
// With AIRLOCK_ACCEPTMEM_ONEDIR=1 the files are one directory of 200,000
// (bench section 21), not 200 of 1,000. With AIRLOCK_ACCEPTMEM_PROF=FILE,
// the child writes a heap profile to
// FILE at each new peak: what the accept held at its highest.
func BenchmarkAcceptManyFiles(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the accept gives the files the project root's owner")
	}
	dirs, perDir := 200, 1000 // the shape of make bench's 200,000 files
	if os.Getenv("AIRLOCK_ACCEPTMEM_ONEDIR") != "" {
		dirs, perDir = 1, 200000 // bench section 21's: one directory
	}
	for range b.N {
		b.StopTimer()
		root := b.TempDir()
		project, upper, base := filepath.Join(root, "proj"), filepath.Join(root, "upper"), filepath.Join(root, "base")
		for _, d := range []string{project, upper} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(project, "README"), []byte("hi\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		if _, err := review.CaptureBase(project, base, upper, nil); err != nil {
			b.Fatal(err)
		}
		for d := range dirs {
			dir := filepath.Join(upper, "many", fmt.Sprintf("d%d", d))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f := range perDir {
				if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(f)), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		cmd := exec.Command(os.Args[0], "-test.run", "^TestAcceptMemoryChild$", "-test.v")
		cmd.Env = append(os.Environ(), "AIRLOCK_ACCEPTMEM="+root)
		out, err := cmd.CombinedOutput()
		b.StopTimer()
		if err != nil {
			b.Fatalf("child: %v\n%s", err, out)
		}
		m := map[string]float64{}
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "acceptmem "); ok {
				k, n, _ := strings.Cut(v, "=")
				m[k], _ = strconv.ParseFloat(n, 64)
			}
		}
		if m["files"] != float64(dirs*perDir) {
			b.Fatalf("accepted %v outcomes, want %d\n%s", m["files"], dirs*perDir, out)
		}
		b.ReportMetric(m["rss_above_idle_mb"], "MB-rss-above-idle")
		b.ReportMetric(m["heap_peak_mb"], "MB-heap-inuse-peak")
		b.ReportMetric(m["heap_after_mb"], "MB-heap-after")
		b.ReportMetric(m["seconds"], "s-accept")
	}
}

// TestAcceptMemoryChild is BenchmarkAcceptManyFiles's child: it accepts
// everything of the session it is given and prints its memory.
func TestAcceptMemoryChild(t *testing.T) {
	root := os.Getenv("AIRLOCK_ACCEPTMEM")
	if root == "" {
		t.Skip("run by BenchmarkAcceptManyFiles")
	}
	project := filepath.Join(root, "proj")
	l := review.Layers{Upper: filepath.Join(root, "upper"), Project: project, Base: review.OpenBase(project, filepath.Join(root, "base"))}
	must(t, l.Base.Ready())
	pol, err := review.LoadPolicy(filepath.Join(project, review.PolicyFile), true)
	must(t, err)

	idle := status(t, "VmRSS:")
	above := peakRSS(t)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
				if p := os.Getenv("AIRLOCK_ACCEPTMEM_PROF"); p != "" && ms.HeapInuse > 20<<20 {
					f, _ := os.Create(p)
					pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t0 := time.Now()
	n := 0
	reviewed := func(batch func([]review.FileDiff) error) error {
		return review.ReviewEach(context.Background(), l, review.Options{Hunks: true}, func(b []review.FileDiff) error {
			if err := pol.Check(context.Background(), l, b, gitleaks.New()); err != nil {
				return err
			}
			return batch(b)
		})
	}
	err = review.AcceptEach(l, review.Selection{}, filepath.Join(root, "accept.journal"), reviewed, func(o review.Outcome) error {
		if !o.Applied {
			return fmt.Errorf("%s not applied: %s %s", o.Path, o.Error, o.Left)
		}
		n++
		return nil
	})
	took := time.Since(t0)
	close(stop)
	<-sampled
	must(t, err)
	rss := above()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("acceptmem files=%d\n", n)
	fmt.Printf("acceptmem seconds=%.2f\n", took.Seconds())
	fmt.Printf("acceptmem idle_rss_mb=%.1f\n", float64(idle)/(1<<20))
	fmt.Printf("acceptmem rss_above_idle_mb=%.1f\n", float64(rss)/(1<<20))
	fmt.Printf("acceptmem heap_peak_mb=%.1f\n", float64(peak.Load())/(1<<20))
	fmt.Printf("acceptmem heap_after_mb=%.1f\n", float64(ms.HeapInuse)/(1<<20))
	// The base still answers for an accepted file, now from what the
	// accept wrote.
	fi, err := os.Lstat(filepath.Join(project, "many/d0/7"))
	must(t, err)
	if changed, err := l.Base.HostChanged("many/d0/7", fi); err != nil || changed {
		t.Errorf("HostChanged after the accept = %v, %v; want false", changed, err)
	}
}

// An accept into any number of directories holds a bounded number of
// descriptors: with the process's limit far below one per directory, it
// still writes every file.
func TestAcceptManyDirectoriesFewDescriptors(t *testing.T) {
	dir := t.TempDir()
	l := review.Layers{Upper: filepath.Join(dir, "upper"), Project: filepath.Join(dir, "proj")}
	must(t, os.MkdirAll(l.Project, 0o755))
	const dirs = 1500
	for i := range dirs {
		write(t, filepath.Join(l.Upper, fmt.Sprintf("d%04d/sub/f", i)), "x\n", 0o644)
	}
	diffs, err := review.Review(l)
	must(t, err)

	var lim syscall.Rlimit
	must(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	low := lim
	low.Cur = 600
	must(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	out, err := review.Accept(l, diffs, review.Selection{}, filepath.Join(dir, "accept.journal"))
	must(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	must(t, err)
	applied := 0
	for _, o := range out {
		if o.Applied {
			applied++
		} else {
			t.Errorf("%s: not applied: %s", o.Path, o.Error)
		}
	}
	if applied != dirs {
		t.Errorf("applied %d of %d files", applied, dirs)
	}
	if _, err := os.Stat(filepath.Join(l.Project, "d1499/sub/f")); err != nil {
		t.Error(err)
	}
}
