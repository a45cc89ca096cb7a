package daemon

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestReleaserAfterQuiet: the free memory goes back once requests stop,
// once per burst, and not while they keep coming.
func TestReleaserAfterQuiet(t *testing.T) {
	var freed atomic.Int32
	r := newReleaser(time.Second, func() { freed.Add(1) })
	h := r.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	ask := func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/sessions", nil)) }
	time.Sleep(1500 * time.Millisecond)
	if freed.Load() != 0 {
		t.Fatal("released before any request")
	}
	for range 5 { // a burst: requests 10 ms apart, the quiet time is a second
		ask()
		time.Sleep(10 * time.Millisecond)
	}
	if freed.Load() != 0 {
		t.Fatal("released during a burst")
	}
	deadline := time.Now().Add(5 * time.Second)
	for freed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := freed.Load(); n != 1 {
		t.Fatalf("released %d times after one burst, want once", n)
	}
}

var sink []byte

// TestReleaserAfterCollections: work outside any request (here, garbage
// and a collection) is given back once it stops, and an idle engine's
// collections give nothing back again.
func TestReleaserAfterCollections(t *testing.T) {
	var freed atomic.Int32
	r := newReleaser(50*time.Millisecond, func() { freed.Add(1) })
	defer r.watchCollections()()
	for range 4 {
		sink = make([]byte, 4<<20)
	}
	sink = nil
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for freed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if freed.Load() == 0 {
		t.Fatal("the garbage of work outside requests was never given back")
	}
	// A collection's cleanup runs late, and may arm once more after the
	// release began: let that settle before counting.
	time.Sleep(300 * time.Millisecond)
	n := freed.Load()
	for range 3 {
		runtime.GC()
		time.Sleep(100 * time.Millisecond)
	}
	if freed.Load() != n {
		t.Fatalf("an idle heap's collections released %d more times", freed.Load()-n)
	}
}
