package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

func (s *Server) listImages(r *http.Request, _ none) ([]api.Image, error) {
	return s.eng.Images(r.Context())
}

// buildImage streams progress as JSON lines; the last line has Done or
// Error set.
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	var req api.ImageBuildRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if !s.builds.TryLock() {
		writeError(w, errdefs.Conflictf("an image build is already running in this engine: wait for it to finish"))
		return
	}
	// The build is over when its last line goes out: the next may start
	// as soon as a client has read it.
	var once sync.Once
	unlock := func() { once.Do(s.builds.Unlock) }
	defer unlock()
	out := &jsonLines{w: w}
	out.begin()
	fail := func(err error) {
		unlock()
		out.fail(err, func(e *api.Error) any { return api.Progress{Stage: "failed", Error: e} })
	}
	defer s.catch(r, fail)
	var mu sync.Mutex
	last := time.Time{}
	send := func(p api.Progress) {
		mu.Lock()
		defer mu.Unlock()
		// Package managers print thousands of lines: pace them.
		if !p.Done && p.Error == nil && time.Since(last) < 50*time.Millisecond {
			return
		}
		last = time.Now()
		if p.Done || p.Error != nil {
			unlock()
		}
		out.send(p)
	}
	if _, err := s.images.Build(r.Context(), req, send); err != nil {
		fail(err)
	}
	out.close()
}
