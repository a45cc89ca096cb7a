// Package secretscan finds secrets in the text a session added, in a
// child process. The detector (gitleaks' rules, package
// secretscan/gitleaks) runs in cmd/airlock-scan, which the engine starts
// on the first review that needs it and lets go once reviews stop
// (Process), so the engine's own binary links none of it: an idle
// engine maps no detector, and a review's compiled rules (megabytes of
// heap) leave with the child. It also keeps what reads hostile text in a
// process whose crash costs one scan, not the engine.
//
// The wire between them is this package's: a request is the text, a
// reply the matches (Serve is the child's side). This package imports
// the standard library only; the detector is given to Serve.
package secretscan

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Match is a secret found in a text.
type Match struct {
	Rule        string `json:"rule"`        // the rule's id, e.g. aws-access-token
	Description string `json:"description"` // what the rule looks for
	Line        int    `json:"line"`        // 1-based line of the text
}

// Finder finds secrets in text. Find returns the matches in text (each
// on a line of text), or an error when it could not look: a nil error
// with no matches means text was scanned and holds no secret it knows.
type Finder interface {
	Find(ctx context.Context, text string) ([]Match, error)
}

// MaxText is the longest text a request may carry. A review hands the
// scanner at most its total text limit at a time (4 GiB at most, see the
// engine's review settings); more than this is refused by both sides
// rather than read into memory.
const MaxText = 4 << 30

// maxReply bounds a reply's size when it is read: a reply is matches
// the child wrote about text the session chose.
const maxReply = 64 << 20

// reply is the child's answer to one request.
type reply struct {
	Matches []Match `json:"matches"`
	Error   string  `json:"error,omitempty"`
}

// writeFrame writes one length-prefixed frame.
func writeFrame(w io.Writer, s string) error {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := io.WriteString(w, s) // an *os.File's pipe: no copy of s
	return err
}

// readFrame reads one length-prefixed frame of at most limit bytes, as a
// string (built in place: a text is not held twice). io.EOF: the other
// side closed between frames.
func readFrame(r io.Reader, limit uint64) (string, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > limit {
		return "", fmt.Errorf("a frame of %d bytes, over the limit of %d", size, limit)
	}
	var b strings.Builder
	b.Grow(int(size))
	if got, err := io.CopyN(&b, r, int64(size)); err != nil {
		return "", fmt.Errorf("a frame cut short after %d of %d bytes: %w", got, size, io.ErrUnexpectedEOF)
	}
	return b.String(), nil
}

// Serve answers requests from r on w with f until r ends: the child's
// side. A request f fails on gets its error in the reply and the next
// request is served; a request it cannot read ends Serve with the error.
func Serve(ctx context.Context, r io.Reader, w io.Writer, f Finder) error {
	in, out := bufio.NewReaderSize(r, 1<<16), bufio.NewWriterSize(w, 1<<16)
	for {
		text, err := readFrame(in, MaxText)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var rep reply
		rep.Matches, err = f.Find(ctx, text)
		if err != nil {
			rep = reply{Error: err.Error()}
		}
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if err := writeFrame(out, string(b)); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
}
