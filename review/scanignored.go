package review

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/airlock/airlock/secretscan"
)

// The budget of the secrets scan of ignored files: a file larger than
// maxScanFile, or past maxScanFiles or maxScanBytes in all, is counted
// unscanned (IgnoredTally.Unscanned) rather than read.
const (
	maxScanFile  = 1 << 20
	maxScanFiles = 100_000
	maxScanBytes = 256 << 20
	scanBatch    = 8 << 20 // text handed to the finder at a time
)

// scanIgnored reads the ignored files the walk kept (confined, each at
// most maxScanFile) and hands their text to find a batch at a time; what
// it finds becomes the tally's findings. A file that is binary, or can no
// longer be read as it was, counts unscanned; a finder that fails makes
// every file of its batch unscanned. Nothing is kept past a batch.
func (iw *ignoreWalk) scanIgnored(ctx context.Context, r *roots, find secretscan.Finder) error {
	files := iw.toScan
	iw.toScan = nil
	var text strings.Builder
	var where []int // per line of text: the file (index into batch), -1 for a boundary
	var batch []ignoredFile
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		found, err := find.Find(ctx, text.String())
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			for _, f := range batch {
				iw.unscanned(f.who)
			}
		}
		for _, m := range found {
			if i := m.Line - 1; i >= 0 && i < len(where) && where[i] >= 0 {
				f := batch[where[i]]
				iw.finding(f.who, IgnoredFinding{Path: f.path, Finding: Finding{Scanner: "secrets", Rule: m.Rule,
					Line: lineIn(where, i), Message: fmt.Sprintf("looks like a secret (%s): %s", m.Rule, m.Description)}})
			}
		}
		text.Reset()
		where, batch = where[:0], batch[:0]
		return nil
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, ok := readExactly(r.upper, f.path, f.size)
		if !ok || bytes.IndexByte(b[:min(len(b), 8192)], 0) >= 0 {
			iw.unscanned(f.who)
			continue
		}
		k := len(batch)
		batch = append(batch, f)
		text.Write(b)
		n := bytes.Count(b, []byte{'\n'})
		if len(b) > 0 && b[len(b)-1] != '\n' {
			text.WriteByte('\n')
			n++
		}
		for range n {
			where = append(where, k)
		}
		text.WriteString(fileBoundary[1:]) // starts on the line after the file's last
		for range strings.Count(fileBoundary[1:], "\n") {
			where = append(where, -1)
		}
		if text.Len() >= scanBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// lineIn is the 1-based line within its file of the text's line i.
func lineIn(where []int, i int) int {
	n := 1
	for j := i - 1; j >= 0 && where[j] == where[i]; j-- {
		n++
	}
	return n
}

func (iw *ignoreWalk) unscanned(who string) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	t := &iw.tallies[0]
	if who == IgnoredBySession {
		t = &iw.tallies[1]
	}
	t.unscanned++
}
