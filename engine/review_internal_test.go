package engine

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
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
