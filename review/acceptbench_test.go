package review_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/airlock/airlock/secretscan/gitleaks"

	"github.com/airlock/airlock/review"
	"golang.org/x/sys/unix"
)

// BenchmarkAcceptSmallFiles is make bench's section 3 without the engine
// around it: an accept of 10,000 small added files (100 directories of
// 100, as the bench's session writes them) from an upper layer on a tmpfs
// into a project on the disk, as the engine runs a plain `airlock accept`
// (a review with hunks, the policy and its scanners, the base recording
// what was written), against `cp -a` of the same upper layer then `sync`.
// Each round runs both, in alternating order, after a sync and a pause
// (the disk here is mounted with online discard: deleting files stalls
// later writes); the ratio's median over the rounds is reported.
//
//	go test -run '^$' -bench AcceptSmallFiles -benchtime 5x ./review/
//
// AIRLOCK_ACCEPTBENCH_DIR puts the projects in that directory instead of
// the test's temporary directory (to measure another file system).
func BenchmarkAcceptSmallFiles(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the accept gives the files the project root's owner, and the upper layer is a tmpfs")
	}
	const dirs, perDir = 100, 100
	root := b.TempDir()
	disk := root
	if d := os.Getenv("AIRLOCK_ACCEPTBENCH_DIR"); d != "" {
		var err error
		if disk, err = os.MkdirTemp(d, "acceptbench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(disk) })
	}
	upper := filepath.Join(root, "upper")
	if err := os.MkdirAll(upper, 0o755); err != nil {
		b.Fatal(err)
	}
	// A session's upper layer is on its own tmpfs.
	if err := unix.Mount("tmpfs", upper, "tmpfs", 0, "size=256m,mode=0755"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Unmount(upper, unix.MNT_DETACH) })
	for d := 1; d <= dirs; d++ {
		dir := filepath.Join(upper, fmt.Sprintf("dir%d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 1; f <= perDir; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%d.txt", f)), []byte(fmt.Sprintf("content %d %d\n", d, f)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	quiesce := func() {
		unix.Sync()
		time.Sleep(time.Second)
	}
	var accepts, copies, ratios []float64
	b.ResetTimer()
	b.StopTimer()
	for round := range b.N {
		project := filepath.Join(disk, fmt.Sprintf("proj-%d", round))
		target := filepath.Join(disk, fmt.Sprintf("cp-%d", round))
		if err := os.MkdirAll(project, 0o755); err != nil {
			b.Fatal(err)
		}
		baseDir := filepath.Join(root, fmt.Sprintf("base-%d", round))
		if _, err := review.CaptureBase(project, baseDir, upper, nil); err != nil {
			b.Fatal(err)
		}
		l := review.Layers{Upper: upper, Project: project, Base: review.OpenBase(project, baseDir)}
		acceptOnce := func() time.Duration {
			quiesce()
			b.StartTimer()
			t0 := time.Now()
			acceptLikeTheEngine(b, l, filepath.Join(root, fmt.Sprintf("journal-%d", round)), dirs*perDir)
			took := time.Since(t0)
			b.StopTimer()
			return took
		}
		copyOnce := func() time.Duration {
			quiesce()
			t0 := time.Now()
			if out, err := exec.Command("cp", "-a", upper, target).CombinedOutput(); err != nil {
				b.Fatalf("cp -a: %v: %s", err, out)
			}
			unix.Sync()
			return time.Since(t0)
		}
		var a, c time.Duration
		if round%2 == 0 {
			a, c = acceptOnce(), copyOnce()
		} else {
			c, a = copyOnce(), acceptOnce()
		}
		accepts, copies = append(accepts, a.Seconds()*1000), append(copies, c.Seconds()*1000)
		ratios = append(ratios, a.Seconds()/c.Seconds())
		b.Logf("round %d: accept %.1f ms, cp -a + sync %.1f ms, ratio %.2f", round, a.Seconds()*1000, c.Seconds()*1000, a.Seconds()/c.Seconds())
		os.RemoveAll(project)
		os.RemoveAll(target)
		os.RemoveAll(baseDir)
	}
	b.ReportMetric(median(accepts), "ms-accept-p50")
	b.ReportMetric(median(copies), "ms-cp-sync-p50")
	b.ReportMetric(median(ratios), "ratio-p50")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// acceptLikeTheEngine accepts everything of l as the engine does a plain
// `airlock accept ID`: reviewed with hunks, checked against the project's
// policy batch by batch, streamed into AcceptEach, on a one-slot worker
// pool (the engine's on two cores).
func acceptLikeTheEngine(tb testing.TB, l review.Layers, journal string, want int) {
	tb.Helper()
	pol, err := review.LoadPolicy(filepath.Join(l.Project, review.PolicyFile), true)
	if err != nil {
		tb.Fatal(err)
	}
	workers := review.NewWorkers(1)
	reviewed := func(batch func([]review.FileDiff) error) error {
		return review.ReviewEach(context.Background(), l, review.Options{Hunks: true, Workers: workers}, func(d []review.FileDiff) error {
			if err := pol.Check(context.Background(), l, d, gitleaks.New()); err != nil {
				return err
			}
			return batch(d)
		})
	}
	n := 0
	err = review.AcceptEach(l, review.Selection{}, journal, reviewed, func(o review.Outcome) error {
		if !o.Applied {
			return fmt.Errorf("%s not applied: %s %s", o.Path, o.Error, o.Left)
		}
		n++
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if n != want {
		tb.Fatalf("accepted %d files, want %d", n, want)
	}
}

// TestAcceptOnceChild accepts everything of AIRLOCK_ACCEPT_ONCE/upper into
// AIRLOCK_ACCEPT_ONCE/proj as acceptLikeTheEngine does, once: a process to
// trace (strace -c -f) or profile without the benchmark's setup and cp.
func TestAcceptOnceChild(t *testing.T) {
	root := os.Getenv("AIRLOCK_ACCEPT_ONCE")
	if root == "" {
		t.Skip("run by hand: see BenchmarkAcceptSmallFiles")
	}
	project, upper := filepath.Join(root, "proj"), filepath.Join(root, "upper")
	baseDir := filepath.Join(root, "base")
	if _, err := review.CaptureBase(project, baseDir, upper, nil); err != nil {
		t.Fatal(err)
	}
	l := review.Layers{Upper: upper, Project: project, Base: review.OpenBase(project, baseDir)}
	t0 := time.Now()
	acceptLikeTheEngine(t, l, filepath.Join(root, "journal"), 10000)
	t.Logf("accept took %v", time.Since(t0))
}
