package daemon

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// quietAfter is how long the engine answers no request before it gives
// its free heap back (see releaser).
const quietAfter = time.Second

// releaser gives the heap's free memory back to the system once the
// engine has been quiet for a while. An engine is idle between bursts of
// requests (a CLI command makes a few within milliseconds); without this,
// a burst's garbage stays mapped until the runtime's next collection,
// which an idle process gets only every two minutes, and the freed pages
// go back to the system only down to the heap's goal (about 1.3 MB with
// 20 sessions, measured with a signal calling debug.FreeOSMemory). The
// cost is one collection per burst (the live heap is a few MB: about a
// millisecond), and nothing at all while idle: the timer is armed by
// requests, and by collections that follow work done outside any request
// (see watchCollections).
type releaser struct {
	quiet time.Duration
	mu    sync.Mutex
	t     *time.Timer
	// released is the heap's cumulative allocation count when the last
	// release began, armed when the timer was last armed.
	released, armed atomic.Uint64
	stopped         atomic.Bool
}

// newReleaser calls free once no wrapped request has ended, and no
// watched collection has followed new allocations, for quiet.
func newReleaser(quiet time.Duration, free func()) *releaser {
	r := &releaser{quiet: quiet}
	r.t = time.AfterFunc(time.Hour, func() {
		now := heapAllocated()
		if now-r.armed.Load() >= rearmAfter {
			r.arm() // still at work: its garbage is not all made yet
			return
		}
		r.released.Store(now)
		free()
	})
	r.t.Stop()
	return r
}

// arm (re)starts the wait for quiet.
func (r *releaser) arm() {
	r.armed.Store(heapAllocated())
	r.mu.Lock()
	r.t.Reset(r.quiet)
	r.mu.Unlock()
}

// wrap is h, each request of which (re)arms the release when it ends.
func (r *releaser) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(w, req)
		r.arm()
	})
}

// rearmAfter is how much the heap must have allocated since the last
// release for a collection to arm the next one, and how much it may
// allocate during the quiet wait for the release to go ahead (more: the
// engine is still at work, and the wait starts again).
const rearmAfter = 4 << 20

// watchCollections arms the release at every collection of the heap
// that follows at least rearmAfter bytes allocated since the last
// release. Much of the engine's work runs outside any request: the
// checkpoint recorded when a command ends, a periodic checkpoint, a base
// capture, the warm pool's refill. On a session of 200,000 files such
// work makes hundreds of megabytes of garbage after the request that
// caused it has returned, and no later request comes to give it back.
// A collection is the runtime's own sign that the heap grew, so the
// watch costs nothing while the engine allocates nothing (the runtime's
// forced collection every two minutes finds too little allocated to
// arm). Ends with stop.
func (r *releaser) watchCollections() (stop func()) {
	r.sentinel()
	return func() { r.stopped.Store(true) }
}

// sentinel makes an object whose cleanup runs after the collection that
// finds it unreachable, and makes the next one.
func (r *releaser) sentinel() {
	s := new(gcSentinel)
	runtime.AddCleanup(s, func(r *releaser) { r.collected() }, r)
}

type gcSentinel struct {
	_ *int // an object with a pointer is never batched with others
	_ [8]byte
}

func (r *releaser) collected() {
	if r.stopped.Load() {
		return
	}
	if heapAllocated()-r.released.Load() >= rearmAfter {
		r.arm()
	}
	r.sentinel()
}

// heapAllocated is how many bytes the heap has allocated since the
// process started.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// freeOSMemory is the release: a collection, then every free page back.
func freeOSMemory() { debug.FreeOSMemory() }
