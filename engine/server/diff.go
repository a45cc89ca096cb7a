package server

import (
	"bufio"
	"encoding/json"
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

// diffWriter writes a diff response as the review hands its files on: the
// array of files (or of their stats) first, then the rest of the object.
type diffWriter struct {
	w       http.ResponseWriter
	buf     *bufio.Writer
	stat    bool
	started bool
	n       int
}

func newDiffWriter(w http.ResponseWriter, stat bool) *diffWriter {
	return &diffWriter{w: w, stat: stat}
}

// start writes the response's head, once.
func (d *diffWriter) start() {
	if d.started {
		return
	}
	d.started = true
	d.w.Header().Set("Content-Type", "application/json")
	d.w.WriteHeader(http.StatusOK)
	d.buf = bufio.NewWriterSize(&stallWriter{w: d.w}, 64<<10)
	if d.stat {
		d.buf.WriteString(`{"stats":[`)
	} else {
		d.buf.WriteString(`{"files":[`)
	}
}

// file writes one file of the diff.
func (d *diffWriter) file(f api.FileDiff) error {
	d.start()
	var v any = f
	if d.stat {
		v = api.Stats([]api.FileDiff{f})[0]
	}
	return writeElement(d.buf, &d.n, v)
}

// finish closes the array and writes the rest of d.
func (d *diffWriter) finish(rest api.Diff) error {
	d.start()
	rest.Files, rest.Stats = nil, nil
	b, err := json.Marshal(struct {
		Session   string        `json:"session"`
		Commits   []api.Commit  `json:"commits,omitempty"`
		Workspace api.Workspace `json:"workspace"`
	}{rest.Session, rest.Commits, rest.Workspace})
	if err != nil {
		return err
	}
	d.buf.WriteString("],")
	d.buf.Write(b[1:]) // the object's fields and its closing brace
	d.buf.WriteByte('\n')
	return d.buf.Flush()
}
