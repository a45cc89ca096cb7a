package checkpoint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/snapshot"
	"golang.org/x/sys/unix"
)

// The workspace of the benchmarks: 1 GiB in 1,000 files of 1 MiB under
// 50 directories, on a tmpfs as a session's is (when root). The store is
// on /var/tmp, the disk the engine's state directory is on.
var (
	benchOnce sync.Once
	benchWS   string
	benchErr  error
)

const (
	benchDirs  = 50
	benchFiles = 20 // per directory
	benchSize  = 1 << 20
)

func benchWorkspace(b *testing.B) string {
	benchOnce.Do(func() {
		benchWS, benchErr = os.MkdirTemp("", "checkpoint-bench-ws-")
		if benchErr != nil {
			return
		}
		if root() {
			benchErr = unix.Mount("bench", benchWS, "tmpfs", 0, "size=2g")
			if benchErr != nil {
				return
			}
		}
		rng := rand.NewChaCha8([32]byte{1})
		buf := make([]byte, benchSize)
		for d := range benchDirs {
			for f := range benchFiles {
				rng.Read(buf)
				p := filepath.Join(benchWS, fmt.Sprintf("pkg%02d/file%02d.bin", d, f))
				if benchErr = os.MkdirAll(filepath.Dir(p), 0o755); benchErr != nil {
					return
				}
				if benchErr = os.WriteFile(p, buf, 0o644); benchErr != nil {
					return
				}
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchWS
}

// benchCleanup unmounts the workspace's tmpfs when the benchmark ends.
func benchCleanup(b *testing.B) {
	b.Cleanup(func() {
		if root() {
			unix.Unmount(benchWS, unix.MNT_DETACH)
		}
	})
}

// BenchmarkCheckpoint10Files: a checkpoint after a turn that changed 10
// files (100 KiB each) of a 1 GiB workspace of 1,000 files, against a
// full snapshot layer of the same tree (snapshot.WriteLayer into the
// snapshot store, as `airlock snapshot` writes it).
//
//	go test -run '^$' -bench Checkpoint10Files -benchtime 10x ./checkpoint/
func BenchmarkCheckpoint10Files(b *testing.B) {
	ws := benchWorkspace(b)
	storeDir, err := os.MkdirTemp("/var/tmp", "checkpoint-bench-store-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(storeDir) })
	b.Run("checkpoint", func(b *testing.B) {
		s, err := Open(filepath.Join(storeDir, "ckpt"))
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(racyWindow())
		if _, err := s.RecordDir(context.Background(), ws, RecordOptions{}); err != nil {
			b.Fatal(err)
		}
		data := make([]byte, 100<<10)
		rng := rand.NewChaCha8([32]byte{2})
		var written, read int64
		var took []time.Duration
		round := 0
		for b.Loop() {
			b.StopTimer()
			for i := range 10 {
				rng.Read(data)
				p := filepath.Join(ws, fmt.Sprintf("pkg%02d/file%02d.bin", (round*10+i)%benchDirs, (round*7+i)%benchFiles))
				if err := os.WriteFile(p, data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			round++
			time.Sleep(racyWindow()) // a turn does not end in the tick of its last write
			b.StartTimer()
			t := time.Now()
			c, err := s.RecordDir(context.Background(), ws, RecordOptions{})
			took = append(took, time.Since(t))
			if err != nil {
				b.Fatal(err)
			}
			if c.Stats.FilesRead != 10 {
				b.Fatalf("read %d files, want 10", c.Stats.FilesRead)
			}
			written += c.Stats.BytesWritten
			read += c.Stats.BytesRead
		}
		b.ReportMetric(float64(written)/float64(b.N), "B-written/op")
		b.ReportMetric(float64(read)/float64(b.N), "B-read/op")
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
	})
	b.Run("snapshot-layer", func(b *testing.B) {
		st, err := snapshot.Open(filepath.Join(storeDir, "oci"))
		if err != nil {
			b.Fatal(err)
		}
		var written int64
		for b.Loop() {
			root, err := confined.OpenRoot(ws)
			if err != nil {
				b.Fatal(err)
			}
			blob, err := st.NewBlob()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := snapshot.WriteLayer(blob, snapshot.Source{Root: root}); err != nil {
				b.Fatal(err)
			}
			_, n, err := blob.Commit()
			if err != nil {
				b.Fatal(err)
			}
			root.Close()
			written += n
		}
		b.ReportMetric(float64(written)/float64(b.N), "B-written/op")
	})
	benchCleanup(b)
}

// BenchmarkCheckpointWalk: the walk alone, a Record with IfChanged of the
// 1 GiB workspace when nothing changed (every file's stat data compared,
// nothing read or written):
//
//	go test -run '^$' -bench CheckpointWalk -benchtime 20x ./checkpoint/
func BenchmarkCheckpointWalk(b *testing.B) {
	ws := benchWorkspace(b)
	storeDir, err := os.MkdirTemp("/var/tmp", "checkpoint-bench-store-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(storeDir) })
	s, err := Open(filepath.Join(storeDir, "ckpt"))
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(racyWindow())
	first, err := s.RecordDir(context.Background(), ws, RecordOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c, err := s.RecordDir(context.Background(), ws, RecordOptions{IfChanged: true})
		if err != nil {
			b.Fatal(err)
		}
		if c.ID != first.ID {
			b.Fatalf("an unchanged workspace made checkpoint %d", c.ID)
		}
	}
	benchCleanup(b)
}
