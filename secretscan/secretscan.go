// Package secretscan finds secrets in the text a session added, in a
// child process. The detector (gitleaks' rules, package
// secretscan/gitleaks) runs in cmd/airlock-scan, which the engine starts
// on the first review that needs it and lets go once reviews stop
// (Process), so the engine's own binary links none of it: an idle
// engine maps no detector, and a review's compiled rules (megabytes of
// heap) leave with the child. It also keeps what reads hostile text in a
// process whose crash costs one scan, not the engine.
//
// The wire between them is this package's: a request is the texts of a
// review's batch of files, a reply the matches in each (Serve is the
// child's side): one round trip per batch, not per file. Cache keeps
// what was found by the texts' digests, so that a text reviewed again
// is not sent again. This package imports
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

// Finder finds secrets in texts. Find returns, for each of texts, the
// matches in it (found[i] are texts[i]'s, each on a line of that text;
// each text is scanned on its own, as a file), or an error when it could
// not look: a nil error with no matches for a text means it was scanned
// and holds no secret the finder knows.
type Finder interface {
	Find(ctx context.Context, texts []string) (found [][]Match, err error)
}

// MaxText is the most text a request may carry, all its texts
// together. A review hands the scanner at most its total text limit at a
// time (4 GiB at most, see the engine's review settings); more than this
// is refused by both sides rather than read into memory.
const MaxText = 4 << 30

// maxTexts bounds how many texts a request may carry (a review batch is
// some hundreds of files).
const maxTexts = 1 << 20

// maxReply bounds a reply's size when it is read: a reply is matches
// the child wrote about text the session chose.
const maxReply = 64 << 20

// reply is the child's answer to one request: the matches in each text.
type reply struct {
	Matches [][]Match `json:"matches"`
	Error   string    `json:"error,omitempty"`
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

// writeRequest writes a request: the count of texts, then each as a
// frame.
func writeRequest(w io.Writer, texts []string) error {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(texts)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	for _, t := range texts {
		if err := writeFrame(w, t); err != nil {
			return err
		}
	}
	return nil
}

// readRequest reads a request's texts, at most MaxText bytes of them.
// io.EOF: the other side closed between requests.
func readRequest(r io.Reader) ([]string, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	count := binary.BigEndian.Uint64(n[:])
	if count > maxTexts {
		return nil, fmt.Errorf("a request of %d texts, over the limit of %d", count, maxTexts)
	}
	texts := make([]string, count)
	left := uint64(MaxText)
	for i := range texts {
		t, err := readFrame(r, left)
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
		texts[i], left = t, left-uint64(len(t))
	}
	return texts, nil
}

// Serve answers requests from r on w with f until r ends: the child's
// side. A request f fails on gets its error in the reply and the next
// request is served; a request it cannot read ends Serve with the error.
func Serve(ctx context.Context, r io.Reader, w io.Writer, f Finder) error {
	in, out := bufio.NewReaderSize(r, 1<<16), bufio.NewWriterSize(w, 1<<16)
	for {
		texts, err := readRequest(in)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var rep reply
		rep.Matches, err = f.Find(ctx, texts)
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
