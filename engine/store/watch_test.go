package store

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWatch: a session's writes reach every reader, a batch names a
// session once however often it changed, and a reader whose context ends
// is closed and no longer written to.
func TestWatch(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wctx, stop := context.WithCancel(ctx)
	a, b := s.Watch(wctx), s.Watch(ctx)

	if err := s.PutSession(ctx, Session{ID: "s1", Project: "/p", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.SetSessionState(ctx, "s1", "paused", "")
	s.Changed("s2")
	s.DeleteSession(ctx, "s1")
	for name, w := range map[string]<-chan []string{"a": a, "b": b} {
		seen := map[string]bool{}
		for !seen["s1"] || !seen["s2"] {
			batch := <-w
			if len(slices.Compact(slices.Sorted(slices.Values(batch)))) != len(batch) {
				t.Errorf("reader %s got a batch naming a session twice: %v", name, batch)
			}
			for _, id := range batch {
				seen[id] = true
			}
		}
		if len(seen) != 2 {
			t.Errorf("reader %s got %v, want s1 and s2", name, seen)
		}
	}
	stop()
	for range a {
	}
	s.Changed("s3") // never blocks on the reader that left
	for batch := range b {
		if slices.Contains(batch, "s3") {
			break
		}
	}
}
