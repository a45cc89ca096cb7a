package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// BenchmarkRestore measures a restore of a snapshot whose workspace holds
// 100 MB (10 files), to its first command, and a fork of 10 from it:
//
//	go test -run '^$' -bench Restore -benchtime 5x ./engine/
//
// AIRLOCK_BENCH_LOG=1 prints the engine's debug log (the steps' timings);
// AIRLOCK_BENCH_MB sets the workspace's size, AIRLOCK_BENCH_N the sizes of
// the forks (default "1 10").
func BenchmarkRestore(b *testing.B) {
	mb, ns := 100, []int{1, 10}
	if v := os.Getenv("AIRLOCK_BENCH_MB"); v != "" {
		mb, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("AIRLOCK_BENCH_N"); v != "" {
		ns = nil
		for _, f := range strings.Fields(v) {
			n, _ := strconv.Atoi(f)
			ns = append(ns, n)
		}
	}
	opts := []func(*engine.Options){func(o *engine.Options) { o.SpareNetworks = 1 }}
	if os.Getenv("AIRLOCK_BENCH_LOG") != "" {
		opts = append(opts, func(o *engine.Options) {
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})
	}
	e := enginetest.Start(b, opts...)
	ctx := context.Background()
	p := b.TempDir()
	s, err := e.Create(ctx, api.CreateRequest{Project: p, Limits: api.Limits{WorkspaceSize: int64(2*mb+64) << 20, Memory: 512 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	var out discard
	code, err := e.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", fmt.Sprintf("for i in 0 1 2 3 4 5 6 7 8 9; do head -c %d /dev/urandom > data$i.bin; done", mb<<20/10)}}, engine.ExecIO{Stdout: out, Stderr: out})
	if err != nil || code != 0 {
		b.Fatalf("fill: %d %v", code, err)
	}
	snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Remove(ctx, s.ID); err != nil {
		b.Fatal(err)
	}
	first := func(id string) {
		if code, err := e.Exec(ctx, id, api.ExecRequest{Argv: []string{"true"}}, engine.ExecIO{Stdout: out, Stderr: out}); err != nil || code != 0 {
			b.Fatalf("first command: %d %v", code, err)
		}
	}
	for _, n := range ns {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var took []time.Duration
			for range b.N {
				t := time.Now()
				r, err := e.Restore(ctx, snap.ID, api.RestoreRequest{N: n})
				if err != nil {
					b.Fatal(err)
				}
				if len(r.Sessions) != n {
					b.Fatalf("made %d sessions: %v", len(r.Sessions), r.Warnings)
				}
				first(r.Sessions[0].ID)
				took = append(took, time.Since(t))
				b.StopTimer()
				for _, x := range r.Sessions {
					if err := e.Remove(ctx, x.ID); err != nil {
						b.Fatal(err)
					}
				}
				time.Sleep(time.Second) // the spare network comes back
				b.StartTimer()
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(took[(len(took)*95+99)/100-1].Milliseconds()), "p95-ms")
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
