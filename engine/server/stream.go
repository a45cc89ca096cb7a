package server

import (
	"bufio"
	"encoding/json"
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

// objectStream writes a JSON object whose first field is an array written
// element by element as the engine hands them on (a diff's files, an
// accept's outcomes: hundreds of thousands for a large session), then the
// object's other fields. Nothing is written before the first element or
// finish, so a request that fails first is an error response; one that
// fails after must be cut short (panic(http.ErrAbortHandler)), so that the
// client never reads a response that looks whole.
type objectStream struct {
	w       http.ResponseWriter
	field   string // the array's field name
	buf     *bufio.Writer
	started bool
	n       int
}

func (o *objectStream) start() {
	if o.started {
		return
	}
	o.started = true
	o.w.Header().Set("Content-Type", "application/json")
	o.w.WriteHeader(http.StatusOK)
	o.buf = bufio.NewWriterSize(&stallWriter{w: o.w}, 64<<10)
	o.buf.WriteString(`{"` + o.field + `":[`)
}

// element writes v as the array's next element.
func (o *objectStream) element(v any) error {
	o.start()
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if o.n > 0 {
		o.buf.WriteByte(',')
	}
	o.n++
	_, err = o.buf.Write(b)
	return err
}

// finish closes the array and writes rest's fields (rest is a struct
// without the array's field) after it.
func (o *objectStream) finish(rest any) error {
	o.start()
	b, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	o.buf.WriteString("]")
	if len(b) > 2 { // not {}
		o.buf.WriteByte(',')
		o.buf.Write(b[1 : len(b)-1])
	}
	o.buf.WriteString("}\n")
	return o.buf.Flush()
}

// fail ends the response after err: an error response when nothing was
// written yet, else a cut one.
func (o *objectStream) fail(err error) {
	if !o.started {
		writeError(o.w, err)
		return
	}
	panic(http.ErrAbortHandler)
}

// lineStream writes api.StatLines: lines as the engine hands them on,
// then one JSON line. Like objectStream it writes nothing before the
// first line or finish, and a failure after that cuts the response.
type lineStream struct {
	w       http.ResponseWriter
	buf     *bufio.Writer
	started bool
}

func (o *lineStream) start() {
	if o.started {
		return
	}
	o.started = true
	o.w.Header().Set("Content-Type", api.StatLines)
	o.w.WriteHeader(http.StatusOK)
	o.buf = bufio.NewWriterSize(&stallWriter{w: o.w}, 64<<10)
}

func (o *lineStream) line(b []byte) error {
	o.start()
	o.buf.Write(b)
	return o.buf.WriteByte('\n')
}

func (o *lineStream) finish(rest any) error {
	o.start()
	b, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	o.buf.Write(b)
	o.buf.WriteByte('\n')
	return o.buf.Flush()
}

func (o *lineStream) fail(err error) {
	if !o.started {
		writeError(o.w, err)
		return
	}
	panic(http.ErrAbortHandler)
}
