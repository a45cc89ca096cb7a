package review

import (
	"context"
	"errors"
	"testing"
)

// A panic in a review goroutine (here: roots that were never opened)
// fails the review with a *PanicError instead of killing the process.
func TestPanicsBecomeErrors(t *testing.T) {
	var pe *PanicError
	_, _, err := reviewSafely(context.Background(), Layers{}, nil, Change{Path: "a.txt", Kind: Modified, Type: File, OldType: File}, Options{Hunks: true}, false)
	if !errors.As(err, &pe) || pe.What != "a.txt" || len(pe.Stack) == 0 {
		t.Errorf("reviewOne: %v", err)
	}
	_, _, err = changes(context.Background(), Layers{}, &roots{}, Options{Workers: NewWorkers(2)})
	if !errors.As(err, &pe) {
		t.Errorf("the walk: %v", err)
	}
}

// Workers bound the goroutines across reviews: extra ones only while
// there is room, the caller's own slot waits or gives up with its context.
func TestWorkers(t *testing.T) {
	w := NewWorkers(2)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Acquire(context.Background()))
	if n := w.tryAcquire(5); n != 1 {
		t.Fatalf("took %d extra slots, want the 1 left", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Acquire(ctx); err == nil {
		t.Fatal("acquired past the limit")
	}
	w.release(1)
	w.Release()
	if n := w.tryAcquire(5); n != 2 {
		t.Fatalf("took %d, want 2", n)
	}
	var none *Workers
	if none.tryAcquire(3) != 3 || none.Acquire(ctx) != nil {
		t.Fatal("a nil Workers limits nothing")
	}
}
