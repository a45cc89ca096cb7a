package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
	"github.com/airlock/airlock/secretscan"
)

// A review that panicked fails its request as an internal error, with a
// log line carrying the stack; the engine goes on.
func TestReviewPanicIsAClassedError(t *testing.T) {
	var logs bytes.Buffer
	e := &Engine{log: slog.New(slog.NewTextHandler(&logs, nil))}
	err := e.reviewErr("s1", &review.PanicError{What: "a.txt", Value: "boom", Stack: []byte("goroutine 7 [running]:\nreview.reviewOne")})
	if errdefs.ClassOf(err) != errdefs.Internal || !strings.Contains(err.Error(), "a.txt") {
		t.Errorf("error %v, class %s", err, errdefs.ClassOf(err))
	}
	if !strings.Contains(logs.String(), "review panicked") || !strings.Contains(logs.String(), "reviewOne") {
		t.Errorf("log: %s", logs.String())
	}
	if err := e.reviewErr("s1", context.Canceled); !errdefs.IsUnavailable(err) {
		t.Errorf("an abandoned review: %v", err)
	}
}

// lockCtx gives up when its context ends, and a lock given up on is not
// leaked: the next locker gets it.
func TestLockCtx(t *testing.T) {
	var mu sync.Mutex
	mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := lockCtx(ctx, &mu); err == nil {
		t.Fatal("locked a held mutex")
	}
	mu.Unlock()
	got := make(chan error, 1)
	go func() { got <- lockCtx(context.Background(), &mu) }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned waiter kept the lock")
	}
}

// finderFunc is a secretscan.Finder of a function.
type finderFunc func(ctx context.Context, texts []string) ([][]secretscan.Match, error)

func (f finderFunc) Find(ctx context.Context, texts []string) ([][]secretscan.Match, error) {
	return f(ctx, texts)
}

// reviewEach checks a batch while the next is reviewed, and hands the
// batches on in path order, each checked (its secrets found), once; the
// first error, of the check or of each, ends it; a check that panics
// fails the review, not the engine.
func TestReviewEachChecksAhead(t *testing.T) {
	project, upper := t.TempDir(), t.TempDir()
	const files = 700 // three batches
	for i := range files {
		text := fmt.Sprintf("line of file %d\n", i)
		if i%100 == 7 {
			text += "SECRET\n"
		}
		if err := os.WriteFile(filepath.Join(upper, fmt.Sprintf("f%04d.txt", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	layers := review.Layers{Upper: upper, Project: project}
	finds := func(_ context.Context, texts []string) ([][]secretscan.Match, error) {
		found := make([][]secretscan.Match, len(texts))
		for i, text := range texts {
			if strings.Contains(text, "SECRET") {
				found[i] = []secretscan.Match{{Rule: "planted", Description: "a planted secret", Line: 2}}
			}
		}
		return found, nil
	}
	engine := func(f secretscan.Finder) *Engine {
		e := &Engine{log: slog.New(slog.DiscardHandler), scanner: f, reviewers: review.NewWorkers(1)}
		e.defaults.Store(&Defaults{})
		return e
	}
	e := engine(finderFunc(finds))
	var paths []string
	flagged := 0
	err := e.reviewEach(context.Background(), "s1", layers, review.Options{Hunks: true}, func(batch []review.FileDiff) error {
		for _, f := range batch {
			paths = append(paths, f.Path)
			for _, x := range f.Findings {
				if x.Rule == "planted" && x.Line == 2 {
					flagged++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != files || !slices.IsSorted(paths) || paths[0] != "f0000.txt" {
		t.Errorf("handed on %d paths (sorted: %v), want %d in order", len(paths), slices.IsSorted(paths), files)
	}
	if flagged != 7 {
		t.Errorf("%d files flagged, want 7", flagged)
	}

	stop := errors.New("stop")
	batches := 0
	err = e.reviewEach(context.Background(), "s1", layers, review.Options{Hunks: true}, func([]review.FileDiff) error {
		batches++
		return stop
	})
	if err != stop || batches != 1 {
		t.Errorf("each's error: %v after %d batches", err, batches)
	}

	e = engine(finderFunc(func(ctx context.Context, texts []string) ([][]secretscan.Match, error) { panic("boom") }))
	err = e.reviewEach(context.Background(), "s1", layers, review.Options{Hunks: true}, func([]review.FileDiff) error { return nil })
	if errdefs.ClassOf(err) != errdefs.Internal {
		t.Errorf("a check that panicked: %v (%s)", err, errdefs.ClassOf(err))
	}
}
