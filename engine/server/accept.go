package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

// accept streams an accept's outcomes as the engine hands them on (one
// per path: hundreds of thousands for a large session), so the engine
// never holds them all; the response is the api.Outcomes object clients
// decode. An accept, once started, finishes even if the client goes away.
func (s *Server) accept(w http.ResponseWriter, r *http.Request) {
	var req api.Selection
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	ow := &outcomesWriter{w: w}
	res, err := s.eng.AcceptEach(context.WithoutCancel(r.Context()), r.PathValue("id"), req, ow.outcome)
	if err == nil {
		err = ow.finish(res)
	}
	switch {
	case err != nil && !ow.started:
		writeError(w, err)
	case err != nil:
		panic(http.ErrAbortHandler) // the client sees a cut response, never one that looks whole
	}
}

// outcomesWriter writes an api.Outcomes response: the array of outcomes
// first, then the rest of the object.
type outcomesWriter struct {
	w       http.ResponseWriter
	buf     *bufio.Writer
	started bool
	n       int
}

func (o *outcomesWriter) start() {
	if o.started {
		return
	}
	o.started = true
	o.w.Header().Set("Content-Type", "application/json")
	o.w.WriteHeader(http.StatusOK)
	o.buf = bufio.NewWriterSize(&stallWriter{w: o.w}, 64<<10)
	o.buf.WriteString(`{"outcomes":[`)
}

func (o *outcomesWriter) outcome(out api.Outcome) error {
	o.start()
	return writeElement(o.buf, &o.n, out)
}

// writeElement writes v as the next element of a JSON array being
// streamed; n counts the elements written.
func writeElement(buf *bufio.Writer, n *int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if *n > 0 {
		buf.WriteByte(',')
	}
	*n++
	_, err = buf.Write(b)
	return err
}

// finish closes the array and writes the rest of res.
func (o *outcomesWriter) finish(res api.Outcomes) error {
	o.start()
	res.Outcomes = nil
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	o.buf.WriteString("]")
	if rest := b[len(`{"outcomes":null`) : len(b)-1]; len(rest) > 0 {
		o.buf.Write(rest) // ,"branch":...,"commits":[...]
	}
	o.buf.WriteString("}\n")
	return o.buf.Flush()
}
