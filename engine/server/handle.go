package server

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// none is the request or the answer of a call that has no body.
type none = struct{}

// serve is the shape of most handlers: decode the request's JSON body into
// a Req (none: no body is read), call the engine, and answer status with
// the result as JSON (none: no body), or the error with its class's
// status.
func serve[Req, Resp any](status int, call func(r *http.Request, req Req) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if _, empty := any(req).(none); !empty {
			if err := decode(w, r, &req); err != nil {
				writeError(w, err)
				return
			}
		}
		out, err := call(r, req)
		if err != nil {
			writeError(w, err)
			return
		}
		if _, empty := any(out).(none); empty {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, out)
	}
}

// Status maps an error class to its HTTP status.
func Status(c errdefs.Class) int {
	switch c {
	case errdefs.Invalid:
		return http.StatusBadRequest
	case errdefs.NotFound:
		return http.StatusNotFound
	case errdefs.Conflict:
		return http.StatusConflict
	case errdefs.Unavailable:
		return http.StatusServiceUnavailable
	case errdefs.Forbidden:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, err error) {
	c := errdefs.ClassOf(err)
	writeJSON(w, Status(c), api.Error{Class: string(c), Message: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// jsonLines writes an application/x-ndjson answer, a line at a time from
// any goroutine; the first line begins the answer. Once it is closed (the
// last line written) later lines are dropped: an engine call that failed
// may still have goroutines reporting.
type jsonLines struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	enc     *json.Encoder
	started bool
	closed  bool
}

func (l *jsonLines) send(v any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sendLocked(v)
}

func (l *jsonLines) sendLocked(v any) {
	if l.closed {
		return
	}
	l.beginLocked()
	l.enc.Encode(v)
	http.NewResponseController(l.w).Flush()
}

// begin starts the answer before its first line.
func (l *jsonLines) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.beginLocked()
}

func (l *jsonLines) beginLocked() {
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", "application/x-ndjson")
		l.w.WriteHeader(200)
		l.enc = json.NewEncoder(l.w)
	}
}

// fail ends the answer with err: a plain HTTP error if nothing was sent
// yet, else the line line makes of it.
func (l *jsonLines) fail(err error, line func(*api.Error) any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if !l.started {
		writeError(l.w, err)
	} else {
		l.sendLocked(line(&api.Error{Class: string(errdefs.ClassOf(err)), Message: err.Error()}))
	}
	l.closed = true
}

func (l *jsonLines) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}
