package server

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/airlock/airlock/errdefs"
)

// A bug in a handler, or in an engine call it makes, fails that request
// and never the engine. Three places recover:
//   - guard, around every request: an answer not yet begun becomes the
//     engine's error body (500); one already begun is cut, so that no
//     client takes a part for the whole;
//   - catch, deferred by a streaming handler, so that the stream ends with
//     its own error line or frame, which its client reads;
//   - spawn, for the goroutines handlers start.
// Each logs the panic with its stack. Goroutines the engine starts itself
// are the engine's to guard.

// HTTPServer is the http.Server the engine serves h with, on its socket
// and on TCP: a client that is slow to send its headers or idles is cut
// off and headers are bounded; net/http's own complaints go to log. There
// is no whole-request timeout: exec streams, terminals, agent turns and
// exports last as long as they need.
func HTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// panicked logs a recovered panic with its stack and returns what the
// client is told. The log names the path, never the query (a token may
// be there).
func (s *Server) panicked(r *http.Request, v any) error {
	s.log.Error("panic serving a request", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return errdefs.New(errdefs.Internal, "the engine hit a bug serving %s %s (%v): the engine's log has the details (please report them); the engine itself goes on", r.Method, r.URL.Path, v)
}

// guard serves h, recovering its panics.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := &guarded{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { // a handler's own way to cut an answer
				panic(v)
			}
			err := s.panicked(r, v)
			switch {
			case g.hijacked.Load():
				// The connection is the handler's, closed by its defers.
			case !g.begun.Load():
				writeError(g, err)
			default:
				panic(http.ErrAbortHandler)
			}
		}()
		h.ServeHTTP(g, r)
	})
}

// catch, deferred by a streaming handler, recovers a panic and has report
// end the stream with it.
func (s *Server) catch(r *http.Request, report func(error)) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	report(s.panicked(r, v))
}

// spawn runs f on a goroutine of its own for request r; a panic there is
// logged and given to failed.
func (s *Server) spawn(r *http.Request, f func(), failed func(error)) {
	go func() {
		defer s.catch(r, failed)
		f()
	}()
}

// guarded is a ResponseWriter that knows whether its answer has begun.
type guarded struct {
	http.ResponseWriter
	begun    atomic.Bool
	hijacked atomic.Bool
}

func (g *guarded) WriteHeader(code int) {
	g.begun.Store(true)
	g.ResponseWriter.WriteHeader(code)
}

func (g *guarded) Write(p []byte) (int, error) {
	g.begun.Store(true)
	return g.ResponseWriter.Write(p)
}

func (g *guarded) Flush() {
	g.begun.Store(true)
	http.NewResponseController(g.ResponseWriter).Flush()
}

func (g *guarded) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(g.ResponseWriter).Hijack()
	if err == nil {
		g.hijacked.Store(true)
	}
	return c, brw, err
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (g *guarded) Unwrap() http.ResponseWriter { return g.ResponseWriter }
