package daemon

import (
	"net/http"
	"net/http/httptest"
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
