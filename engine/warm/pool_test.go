package warm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeMaker struct {
	n         atomic.Int64
	mu        sync.Mutex
	discarded map[string]bool
	delay     time.Duration
	fail      atomic.Bool
}

func (f *fakeMaker) Make(ctx context.Context, k string) (string, error) {
	time.Sleep(f.delay)
	if f.fail.Load() {
		return "", fmt.Errorf("no")
	}
	return fmt.Sprintf("%s-%d", k, f.n.Add(1)), nil
}

func (f *fakeMaker) Discard(ctx context.Context, e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.discarded == nil {
		f.discarded = map[string]bool{}
	}
	f.discarded[e] = true
}

func waitReady(t *testing.T, p *Pool[string, string], k string, n int) {
	t.Helper()
	for i := 0; i < 500 && p.Ready(k) != n; i++ {
		time.Sleep(2 * time.Millisecond)
	}
	if got := p.Ready(k); got != n {
		t.Fatalf("%d ready of %s, want %d", got, k, n)
	}
}

func TestNeverTheSameTwice(t *testing.T) {
	m := &fakeMaker{delay: time.Millisecond}
	p := New[string, string](m, Options{Size: func() int { return 3 }})
	defer p.Close(context.Background())
	if _, ok := p.Claim("a"); ok {
		t.Fatal("a claim before the kind was asked for found an entry")
	}
	waitReady(t, p, "a", 3)
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Claims at once, and racing the refill they cause.
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				if e, ok := p.Claim("a"); ok {
					mu.Lock()
					if seen[e] {
						t.Errorf("%s claimed twice", e)
					}
					seen[e] = true
					mu.Unlock()
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if len(seen) < 3 {
		t.Fatalf("only %d claims found an entry", len(seen))
	}
	waitReady(t, p, "a", 3)
}

func TestSizeZeroMakesNothing(t *testing.T) {
	m := &fakeMaker{}
	p := New[string, string](m, Options{Size: func() int { return 0 }})
	p.Want("a")
	p.Claim("a")
	time.Sleep(20 * time.Millisecond)
	p.Close(context.Background())
	if m.n.Load() != 0 {
		t.Fatalf("a pool of size 0 made %d entries", m.n.Load())
	}
}

func TestOldKindsAndCloseDiscard(t *testing.T) {
	m := &fakeMaker{}
	size := atomic.Int64{}
	size.Store(2)
	p := New[string, string](m, Options{Size: func() int { return int(size.Load()) }, Kinds: 1})
	p.Want("a")
	waitReady(t, p, "a", 2)
	p.Want("b") // a is no longer kept
	waitReady(t, p, "b", 2)
	waitReady(t, p, "a", 0)
	size.Store(1)
	p.Refill()
	waitReady(t, p, "b", 1)
	p.Close(context.Background())
	m.mu.Lock()
	defer m.mu.Unlock()
	if int64(len(m.discarded)) != m.n.Load() {
		t.Fatalf("made %d, discarded %d: %v", m.n.Load(), len(m.discarded), m.discarded)
	}
	if _, ok := p.Claim("b"); ok {
		t.Fatal("a closed pool handed out an entry")
	}
}

func TestFailedMakeWaits(t *testing.T) {
	m := &fakeMaker{}
	m.fail.Store(true)
	p := New[string, string](m, Options{Size: func() int { return 2 }, Retry: 50 * time.Millisecond})
	defer p.Close(context.Background())
	p.Want("a")
	time.Sleep(20 * time.Millisecond)
	m.fail.Store(false)
	waitReady(t, p, "a", 2)
}

func TestFailingKindForgotten(t *testing.T) {
	m := &fakeMaker{}
	m.fail.Store(true)
	p := New[string, string](m, Options{Size: func() int { return 1 }, Parallel: 1, Retry: 5 * time.Millisecond})
	defer p.Close(context.Background())
	p.Want("a")
	time.Sleep(200 * time.Millisecond)
	m.fail.Store(false)
	time.Sleep(50 * time.Millisecond)
	if p.Ready("a") != 0 {
		t.Fatal("a kind that failed three times in a row was still made")
	}
	p.Want("a") // asked for again
	waitReady(t, p, "a", 1)
}
