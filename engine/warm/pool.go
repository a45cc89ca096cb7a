package warm

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Maker makes and discards the entries of a pool.
type Maker[K comparable, E any] interface {
	// Make makes one entry of kind k, ready to be claimed. On an error
	// nothing of it is left.
	Make(ctx context.Context, k K) (E, error)
	// Discard removes an entry that was never claimed: nothing of it
	// is left.
	Discard(ctx context.Context, e E)
}

// Options tune a pool.
type Options struct {
	// Size is how many entries of each kind to keep, asked at each
	// refill (0 or less: none; the entries kept are discarded).
	Size func() int
	// Kinds is how many kinds of entry, the ones claimed last, are
	// kept (default 2).
	Kinds int
	// Parallel is how many entries are made at a time (default 2).
	Parallel int
	// Retry is how long the pool waits after a failed make before it
	// tries that kind again (default 5 s).
	Retry time.Duration
	// Hold is the longest a claim holds back the refill (default
	// 10 s): a claimer that never releases cannot starve the pool.
	Hold   time.Duration
	Logger *slog.Logger // nil logs nothing
}

// maxFails is how many makes of a kind may fail in a row before the pool
// stops making that kind.
const maxFails = 3

// Pool keeps Options.Size ready entries of each of the Options.Kinds
// kinds claimed last. It is safe for concurrent use.
type Pool[K comparable, E any] struct {
	make Maker[K, E]
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	ready   map[K][]E
	making  map[K]int
	kinds   []K // most recently asked first
	failed  map[K]time.Time
	fails   map[K]int // failed makes in a row
	held    int       // claims holding back the makes (Claim)
	closing bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	// bg tracks the makes and discards under way.
	bg sync.WaitGroup
}

// New returns a pool making its entries with m. It makes none until a
// kind is asked for (Claim or Want).
func New[K comparable, E any](m Maker[K, E], opts Options) *Pool[K, E] {
	if opts.Kinds <= 0 {
		opts.Kinds = 2
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 2
	}
	if opts.Retry <= 0 {
		opts.Retry = 5 * time.Second
	}
	if opts.Hold <= 0 {
		opts.Hold = 10 * time.Second
	}
	if opts.Size == nil {
		opts.Size = func() int { return 0 }
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool[K, E]{make: m, opts: opts, log: log.With("component", "warm"),
		ready: map[K][]E{}, making: map[K]int{}, failed: map[K]time.Time{}, fails: map[K]int{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// Claim takes a ready entry of kind k, if there is one: it is the
// caller's from now on, and no one else's ever. Either way k counts as
// asked for, and the pool refills it in the background.
//
// A claimer still has work to do with its entry (a session's base
// capture), and a make would take the CPU it needs: while any claim is
// held, no make of any kind starts. release ends the hold; the caller
// defers it, and it may be called more than once. A claim that found
// no entry holds nothing (its release does nothing): the pool is empty
// and should fill at once. A hold also ends by itself after
// Options.Hold.
//
// The holds are one gate, not one refill each: a make takes CPU from
// every claimer still at work, whichever claim it replaces, so the ten
// claims of a fork are refilled once the last of them is released.
// That cannot starve the pool: each hold ends within Options.Hold, and
// claims that empty the pool stop holding it.
func (p *Pool[K, E]) Claim(k K) (e E, release func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	release = func() {}
	if list := p.ready[k]; len(list) > 0 && !p.closing {
		e, ok = list[len(list)-1], true
		var zero E
		list[len(list)-1] = zero
		p.ready[k] = list[:len(list)-1]
		release = p.hold()
	}
	p.asked(k)
	return e, release, ok
}

// hold holds back the makes until the returned release is called, or
// Options.Hold has passed; p.mu is held.
func (p *Pool[K, E]) hold() (release func()) {
	p.held++
	var once sync.Once
	unhold := func() {
		once.Do(func() {
			p.mu.Lock()
			p.held--
			p.mu.Unlock()
			p.Refill()
		})
	}
	t := time.AfterFunc(p.opts.Hold, func() {
		p.log.Info("a claim held the refill back too long: refilling", "hold", p.opts.Hold)
		unhold()
	})
	return func() {
		t.Stop()
		unhold()
	}
}

// Want marks kind k as asked for without claiming one, so that the pool
// fills it.
func (p *Pool[K, E]) Want(k K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked(k)
}

// Ready is how many entries of kind k are ready now.
func (p *Pool[K, E]) Ready(k K) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready[k])
}

// Refill makes the pool look again at what it should hold (the size may
// have changed).
func (p *Pool[K, E]) Refill() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// asked moves k to the front of the kinds kept; p.mu is held.
func (p *Pool[K, E]) asked(k K) {
	for i, x := range p.kinds {
		if x == k {
			copy(p.kinds[1:i+1], p.kinds[:i])
			p.kinds[0] = k
			p.Refill()
			return
		}
	}
	p.kinds = append([]K{k}, p.kinds...)
	p.Refill()
}

// run is the filler: on each wake it discards what is no longer wanted
// and starts the makes that are missing.
func (p *Pool[K, E]) run() {
	defer close(p.done)
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		}
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			return
		}
		size := max(p.opts.Size(), 0)
		if len(p.kinds) > p.opts.Kinds {
			p.kinds = p.kinds[:p.opts.Kinds]
		}
		kept := map[K]bool{}
		for _, k := range p.kinds {
			kept[k] = true
		}
		var drop []E
		for k, list := range p.ready {
			n := size
			if !kept[k] {
				n = 0
			}
			if len(list) > n {
				drop = append(drop, list[n:]...)
				p.ready[k] = list[:n]
			}
			if len(p.ready[k]) == 0 {
				delete(p.ready, k)
			}
		}
		var start []K
		// No make starts while a claim is held (Claim): the last
		// release wakes the filler again.
		if p.held == 0 {
			start = p.due(size)
		}
		p.bg.Add(len(start) + len(drop))
		p.mu.Unlock()
		for _, e := range drop {
			go func() {
				defer p.bg.Done()
				p.make.Discard(context.Background(), e)
			}()
		}
		for _, k := range start {
			go p.makeOne(k)
		}
	}
}

// due counts as making, and returns, the makes of each kind kept that
// bring it to size, Options.Parallel under way at most; p.mu is held.
func (p *Pool[K, E]) due(size int) []K {
	var start []K
	busy := 0
	for _, n := range p.making {
		busy += n
	}
	now := time.Now()
	for _, k := range p.kinds {
		if t, ok := p.failed[k]; ok && now.Sub(t) < p.opts.Retry {
			continue
		}
		for n := len(p.ready[k]) + p.making[k]; n < size && busy < p.opts.Parallel; n++ {
			start = append(start, k)
			p.making[k]++
			busy++
		}
	}
	return start
}

func (p *Pool[K, E]) makeOne(k K) {
	defer p.bg.Done()
	e, err := p.make.Make(context.Background(), k)
	p.mu.Lock()
	p.making[k]--
	if p.making[k] == 0 {
		delete(p.making, k)
	}
	if err != nil {
		p.failed[k] = time.Now()
		p.fails[k]++
		if p.fails[k] >= maxFails {
			// The kind cannot be made (its image is gone, say): it is
			// tried again once asked for again.
			p.kinds = slices.DeleteFunc(p.kinds, func(x K) bool { return x == k })
			delete(p.fails, k)
			delete(p.failed, k)
		}
		p.mu.Unlock()
		p.log.Warn("make a warm session", "err", err)
		time.AfterFunc(p.opts.Retry, p.Refill)
		return
	}
	delete(p.failed, k)
	delete(p.fails, k)
	keep := !p.closing
	if keep {
		p.ready[k] = append(p.ready[k], e)
	}
	p.mu.Unlock()
	if !keep {
		p.make.Discard(context.Background(), e)
		return
	}
	p.Refill() // the next one, or one too many now
}

// Close stops the filling, discards every ready entry and waits for the
// makes and discards under way, or ctx. Claimed entries are their
// claimers'.
func (p *Pool[K, E]) Close(ctx context.Context) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return
	}
	p.closing = true
	var drop []E
	for _, list := range p.ready {
		drop = append(drop, list...)
	}
	p.ready = map[K][]E{}
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	var wg sync.WaitGroup
	for _, e := range drop {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.make.Discard(context.WithoutCancel(ctx), e)
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); p.bg.Wait(); close(all) }()
	select {
	case <-all:
	case <-ctx.Done():
	}
}
