package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// watchKeepAlive is how often a quiet event stream sends a comment, so
// that a client learns within that long that the engine is gone.
const watchKeepAlive = 25 * time.Second

// watch streams session changes as server-sent events (GET /v1/events):
// first every session, then each session that changed as it is now, or
// its removal. The stream ends when the client goes, stops reading for
// patchStall, or the engine's HTTP server shuts down.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.shutdownOf(r), cancel)()
	changes := s.eng.Watch(ctx) // before the list: no change falls between them
	list, err := s.eng.List(ctx)
	if err != nil {
		writeError(w, err)
		return
	}
	if list == nil {
		list = []api.Session{}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(msg string) bool {
		rc.SetWriteDeadline(time.Now().Add(streamStall))
		_, err := io.WriteString(w, msg)
		return err == nil && rc.Flush() == nil
	}
	send := func(ev api.SessionEvent) bool {
		b, _ := json.Marshal(ev)
		return write(fmt.Sprintf("data: %s\n\n", b))
	}
	if !send(api.SessionEvent{Type: api.SessionsListed, Sessions: list}) {
		return
	}
	tick := time.NewTicker(watchKeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !write(": keep-alive\n\n") {
				return
			}
		case ids, ok := <-changes:
			if !ok {
				return
			}
			for _, id := range ids {
				ev := api.SessionEvent{Type: api.SessionRemoved, ID: id}
				sess, err := s.eng.Get(ctx, id)
				switch {
				case err == nil:
					ev = api.SessionEvent{Type: api.SessionChanged, Session: &sess}
				case errdefs.ClassOf(err) != errdefs.NotFound:
					s.log.Warn("event stream: read a session that changed", "session", id, "err", err)
					continue
				}
				if !send(ev) {
					return
				}
			}
		}
	}
}

// shutdownOf is a context that ends when the http.Server serving r
// shuts down: an event stream never ends by itself, and Shutdown would
// wait for it.
func (s *Server) shutdownOf(r *http.Request) context.Context {
	hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok {
		return context.Background()
	}
	s.shutdown.Lock()
	defer s.shutdown.Unlock()
	if s.shutdown.of == nil {
		s.shutdown.of = map[*http.Server]context.Context{}
	}
	ctx, ok := s.shutdown.of[hs]
	if !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		hs.RegisterOnShutdown(cancel)
		s.shutdown.of[hs] = ctx
	}
	return ctx
}
