package daemon

import (
	"net/http"
	"runtime/debug"
	"sync"
	"time"
)

// quietAfter is how long the engine answers no request before it gives
// its free heap back (see releaser).
const quietAfter = time.Second

// releaser gives the heap's free memory back to the system once the
// engine has answered no request for a while. An engine is idle between
// bursts of requests (a CLI command makes a few within milliseconds);
// without this, a burst's garbage stays mapped until the runtime's next
// collection, which an idle process gets only every two minutes, and the
// freed pages go back to the system only down to the heap's goal (about
// 1.3 MB with 20 sessions, measured with a signal calling
// debug.FreeOSMemory). The cost is one collection per burst (the live heap
// is a few MB: about a millisecond), and nothing at all while idle: the
// timer is armed by requests only.
type releaser struct {
	quiet time.Duration
	mu    sync.Mutex
	t     *time.Timer
}

// newReleaser calls free once no wrapped request has ended for quiet.
func newReleaser(quiet time.Duration, free func()) *releaser {
	r := &releaser{quiet: quiet, t: time.AfterFunc(time.Hour, free)}
	r.t.Stop()
	return r
}

// wrap is h, each request of which (re)arms the release when it ends.
func (r *releaser) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(w, req)
		r.mu.Lock()
		r.t.Reset(r.quiet)
		r.mu.Unlock()
	})
}

// freeOSMemory is the release: a collection, then every free page back.
func freeOSMemory() { debug.FreeOSMemory() }
