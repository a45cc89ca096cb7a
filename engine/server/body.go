package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/airlock/airlock/errdefs"
)

// What the engine reads of a request body.
const (
	// maxJSONBody bounds a JSON request; most are a few kilobytes.
	maxJSONBody = 1 << 20
	// maxSelectionBody bounds an accept's selection, which pins every
	// file the user reviewed by its digest (about 100 bytes a file:
	// 200,000 files take 20 MB) or carries an edited patch.
	maxSelectionBody = 64 << 20
	// defaultMaxImport bounds a snapshot import: the image tar with its
	// base image, workspace and container layers.
	defaultMaxImport = 32 << 30
	// defaultImportIdle is how long an import waits for its next byte.
	defaultImportIdle = time.Minute
)

// decode reads r's JSON body into v: one JSON value of known fields, at
// most maxJSONBody bytes. No body leaves v as it is.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeAtMost(w, r, v, maxJSONBody)
}

// decodeAtMost is decode with its own limit.
func decodeAtMost(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err == nil {
		if _, err = dec.Token(); errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			err = errors.New("give one JSON value, not several")
		}
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errdefs.Invalidf("bad request body: it is larger than %s, the most a request takes", size(tooBig.Limit))
	}
	return errdefs.Invalidf("bad request body: %v", err)
}

// importBody is a snapshot import's request body: at most limit bytes,
// each read waiting at most idle for the client. err says why it ended
// early, in the client's terms, whatever the engine makes of the read
// error.
type importBody struct {
	r     io.Reader
	rc    *http.ResponseController
	limit int64
	idle  time.Duration
	err   error
}

func newImportBody(w http.ResponseWriter, r *http.Request, limit int64, idle time.Duration) *importBody {
	return &importBody{r: http.MaxBytesReader(w, r.Body, limit), rc: http.NewResponseController(w), limit: limit, idle: idle}
}

func (b *importBody) Read(p []byte) (int, error) {
	b.rc.SetReadDeadline(time.Now().Add(b.idle)) // not supported: no deadline
	n, err := b.r.Read(p)
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		b.err = errdefs.Invalidf("the snapshot is larger than %s, the most an import takes", size(b.limit))
	case errors.As(err, &ne) && ne.Timeout():
		b.err = errdefs.Invalidf("the client stopped sending the snapshot for %v: import it again", b.idle)
	}
	return n, err
}

// done ends the import's reading. After a failure net/http still reads
// what is left of the body (up to 256 KiB) before it answers: from a
// client that stopped, that must fail at once, and from any other, wait no
// longer than a read would.
func (b *importBody) done(failed bool) {
	switch {
	case b.err != nil:
		b.rc.SetReadDeadline(time.Now())
	case failed:
		b.rc.SetReadDeadline(time.Now().Add(b.idle))
	default:
		b.rc.SetReadDeadline(time.Time{})
	}
}

// size is n bytes for a person.
func size(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d %s", n, units[i])
}
