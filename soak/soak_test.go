package soak_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/soak"
)

// TestSoakShort is `make soak` in short: a fixed seed, about two minutes
// of work and faults against an engine of its own, no violation. What a
// violation says, and the operation log that led to it, is in the
// failure. Its bounds are the soak's own (minutes per command): nothing
// here waits on time.
func TestSoakShort(t *testing.T) {
	enginetest.Require(t)
	cli := enginetest.CLI(t)
	dir := t.TempDir()
	fig, err := soak.Run(context.Background(), soak.Options{Seed: 26, Duration: 2 * time.Minute, CLI: cli, Dir: dir, Sessions: 3})
	if fig != nil {
		t.Logf("seed %d, %d steps in %v: faults %v, operations %v, %d checks", fig.Seed, fig.Steps, fig.Took.Round(time.Second), fig.Faults, fig.Ops, fig.Checks)
	}
	if err != nil {
		var log, engine []byte
		if fig != nil {
			log, _ = os.ReadFile(fig.OpLog)
		}
		engine, _ = os.ReadFile(filepath.Join(dir, "engine.log"))
		t.Fatalf("%v\noperation log:\n%s\nthe engine's log ends:\n%s", err, log, engine[max(0, len(engine)-4000):])
	}
}
