package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// TestAbandonedReviewsLeaveNothingOpen: the same session reviewed by
// several clients at once — whole diffs streamed, stats, a plain diff —
// each given up at a different point, as a closed browser tab or a killed
// CLI gives one up; afterwards the engine holds no descriptor under the
// session's directory, and removing the session succeeds (a descriptor
// left in its upper layer made `airlock rm` fail with "device or resource
// busy" until the engine restarted).
func TestAbandonedReviewsLeaveNothingOpen(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	// A node_modules-like tree: 60 packages of a nested lib with 20 files,
	// and one directory of 400 (a walk opens big directories' children
	// ahead).
	if code, out := run(t, e, s.ID, "sh", "-c", `set -e
for p in $(seq 1 60); do mkdir -p node_modules/p$p/lib/sub; for f in $(seq 1 20); do echo "module $p $f" > node_modules/p$p/lib/sub/f$f.js; done; done
mkdir wide; for f in $(seq 1 400); do echo $f > wide/$f.txt; done`); code != 0 {
		t.Fatalf("make the tree: %d %s", code, out)
	}
	// The command's checkpoint is written in the background and reads the
	// same layer: done before anything is counted.
	_, err = e.Checkpoints(ctx, s.ID)
	must(t, err)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			n := 0
			stop := 1 + i*150 // each gives up at its own point
			quit := errors.New("the client went away")
			switch i % 3 {
			case 0:
				e.DiffEach(cctx, s.ID, api.DiffQuery{Ignored: api.IgnoredModeAll}, func(api.FileDiff) error {
					if n++; n == stop {
						return quit
					}
					return nil
				})
			case 1:
				e.DiffStatLines(cctx, s.ID, api.DiffQuery{Ignored: api.IgnoredModeAll}, func([]byte) error {
					if n++; n == stop {
						cancel()
					}
					return nil
				})
			default:
				go func() {
					for range i {
						e.Get(cctx, s.ID)
					}
					cancel()
				}()
				e.Diff(cctx, s.ID, nil)
			}
		})
	}
	wg.Wait()
	dir := filepath.Join(e.StateDir, "sessions", s.ID)
	if held := openUnder(dir); len(held) > 0 {
		t.Errorf("after the reviews were given up, the engine holds %d descriptors under the session: %s", len(held), strings.Join(held, ", "))
	}
	must(t, e.Remove(ctx, s.ID))
}

// openUnder lists this process's descriptors open on paths under dir.
func openUnder(dir string) []string {
	fds, _ := os.ReadDir("/proc/self/fd")
	var held []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") {
			held = append(held, target)
		}
	}
	return held
}
