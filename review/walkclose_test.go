package review_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlock/airlock/review"
)

// endsAfter is a context that ends at its nth look (Err), so a walk is given
// up at every point it looks.
type endsAfter struct {
	context.Context
	n, seen atomic.Int64
}

func (c *endsAfter) Err() error {
	if c.seen.Add(1) > c.n.Load() {
		return context.Canceled
	}
	return nil
}

func (c *endsAfter) Done() <-chan struct{} { return nil }

// openUnder counts this process's descriptors open on paths under dir.
func openUnder(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) {
			n++
		}
	}
	return n
}

// A walk given up midway (its client went away) closes every directory it
// opened: one left open keeps the session's layer busy, and removing the
// session fails with "device or resource busy" until the engine restarts.
func TestGivenUpWalkClosesDirectories(t *testing.T) {
	p := project(t)
	ws := mountWS(t, p)
	m := ws.Merged()
	for d := range 40 {
		for f := range 3 {
			write(t, filepath.Join(m, fmt.Sprintf("d%02d/s/f%d.txt", d, f)), "x\n", 0o644)
		}
	}
	for f := range 600 { // a directory of more than 256 entries opens its subdirectories ahead
		if f%3 == 0 {
			must(t, os.MkdirAll(filepath.Join(m, fmt.Sprintf("wide/sub%03d", f)), 0o755))
		} else {
			write(t, filepath.Join(m, fmt.Sprintf("wide/f%03d.txt", f)), "y\n", 0o644)
		}
	}
	upper := ws.Upper()
	for _, count := range []bool{false, true} {
		for n := int64(0); n < 80; n += 3 {
			ctx := &endsAfter{Context: context.Background()}
			ctx.n.Store(n)
			l := review.Layers{Upper: upper, Project: p}
			var err error
			if count {
				_, err = review.CountChanges(ctx, l, review.NewWorkers(2))
			} else {
				_, err = review.ReviewContext(ctx, l, review.Options{Workers: review.NewWorkers(2)})
			}
			if err == nil && ctx.seen.Load() <= n {
				continue // the walk ended before its nth look
			}
			if open := openUnder(t, upper); open != 0 {
				t.Fatalf("counting %v, given up at look %d (%v): %d descriptors left open in the session's layer", count, n, err, open)
			}
		}
	}
}
