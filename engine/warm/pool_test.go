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
	n         atomic.Int64 // entries made
	calls     atomic.Int64 // makes started
	mu        sync.Mutex
	discarded map[string]bool
	delay     time.Duration
	fail      atomic.Bool
}

func (f *fakeMaker) Make(ctx context.Context, k string) (string, error) {
	f.calls.Add(1)
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
	if _, _, ok := p.Claim("a"); ok {
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
				if e, release, ok := p.Claim("a"); ok {
					mu.Lock()
					if seen[e] {
						t.Errorf("%s claimed twice", e)
					}
					seen[e] = true
					mu.Unlock()
					release()
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
	if _, _, ok := p.Claim("b"); ok {
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

// noMakeFor fails when the pool starts a make within d: a claim still
// holds it back.
func noMakeFor(t *testing.T, m *fakeMaker, d time.Duration) {
	t.Helper()
	before := m.calls.Load()
	time.Sleep(d)
	if n := m.calls.Load() - before; n != 0 {
		t.Fatalf("%d makes started while a claim was held", n)
	}
}

func TestClaimHoldsRefill(t *testing.T) {
	m := &fakeMaker{}
	p := New[string, string](m, Options{Size: func() int { return 2 }})
	defer p.Close(context.Background())
	p.Want("a")
	waitReady(t, p, "a", 2)
	_, release, ok := p.Claim("a")
	if !ok {
		t.Fatal("no entry to claim")
	}
	noMakeFor(t, m, 50*time.Millisecond)
	release()
	waitReady(t, p, "a", 2)
	release() // again: nothing more
}

// A fork claims several entries at once: the refill waits for the last
// of them, and a claim released twice does not end another's hold.
func TestConcurrentClaimsRefillAfterLastRelease(t *testing.T) {
	m := &fakeMaker{}
	p := New[string, string](m, Options{Size: func() int { return 3 }})
	defer p.Close(context.Background())
	p.Want("a")
	waitReady(t, p, "a", 3)
	var releases []func()
	for range 3 {
		_, release, ok := p.Claim("a")
		if !ok {
			t.Fatal("no entry to claim")
		}
		releases = append(releases, release)
	}
	releases[0]()
	releases[1]()
	releases[1]()
	noMakeFor(t, m, 50*time.Millisecond)
	releases[2]()
	waitReady(t, p, "a", 3)
}

func TestForgottenHoldEnds(t *testing.T) {
	m := &fakeMaker{}
	p := New[string, string](m, Options{Size: func() int { return 2 }, Hold: 50 * time.Millisecond})
	defer p.Close(context.Background())
	p.Want("a")
	waitReady(t, p, "a", 2)
	if _, _, ok := p.Claim("a"); !ok { // and never released
		t.Fatal("no entry to claim")
	}
	waitReady(t, p, "a", 2)
}

// A claim that finds no entry holds nothing: the pool fills at once.
func TestEmptyClaimHoldsNothing(t *testing.T) {
	m := &fakeMaker{}
	p := New[string, string](m, Options{Size: func() int { return 2 }})
	defer p.Close(context.Background())
	_, release, ok := p.Claim("a")
	if ok {
		t.Fatal("a claim before the kind was asked for found an entry")
	}
	defer release()
	waitReady(t, p, "a", 2)
}

// However a claimer's work ends, the refill follows it, and not before:
// the claimer is shaped as the engine's create, which defers release.
func TestClaimerEndReleases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails bool
		work  func(ctx context.Context, m *fakeMaker, e string) error
	}{
		{"base captured", false, func(context.Context, *fakeMaker, string) error { return nil }},
		{"create failed, entry discarded", true, func(ctx context.Context, m *fakeMaker, e string) error {
			m.Discard(ctx, e)
			return fmt.Errorf("the base could not be captured")
		}},
		{"create cancelled", true, func(ctx context.Context, _ *fakeMaker, _ string) error {
			<-ctx.Done()
			return ctx.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMaker{}
			p := New[string, string](m, Options{Size: func() int { return 2 }})
			defer p.Close(context.Background())
			p.Want("a")
			waitReady(t, p, "a", 2)
			ctx, cancel := context.WithCancel(context.Background())
			create := func() error {
				e, release, ok := p.Claim("a")
				defer release()
				if !ok {
					return fmt.Errorf("no entry to claim")
				}
				noMakeFor(t, m, 50*time.Millisecond)
				cancel()
				return tc.work(ctx, m, e)
			}
			if err := create(); (err != nil) != tc.fails {
				t.Fatalf("the create returned %v", err)
			}
			waitReady(t, p, "a", 2)
		})
	}
}
