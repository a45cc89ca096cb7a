package review

import (
	"bytes"
	"context"
	"fmt"

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
// most maxScanFile) and hands their texts to find a batch at a time, one
// text per file; what it finds becomes the tally's findings. A file that
// is binary, or can no longer be read as it was, counts unscanned; a
// finder that fails makes every file of its batch unscanned. Nothing is
// kept past a batch.
func (iw *ignoreWalk) scanIgnored(ctx context.Context, r *roots, find secretscan.Finder) error {
	files := iw.toScan
	iw.toScan = nil
	var texts []string
	var batch []ignoredFile
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		found, err := find.Find(ctx, texts)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for i, f := range batch {
			if err != nil || i >= len(found) {
				iw.unscanned(f.who)
				continue
			}
			for _, m := range found[i] {
				iw.finding(f.who, IgnoredFinding{Path: f.path, Finding: Finding{Scanner: "secrets", Rule: m.Rule,
					Line: m.Line, Message: fmt.Sprintf("looks like a secret (%s): %s", m.Rule, m.Description)}})
			}
		}
		clear(texts)
		texts, batch, size = texts[:0], batch[:0], 0
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
		texts = append(texts, string(b))
		batch = append(batch, f)
		if size += len(b); size >= scanBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func (iw *ignoreWalk) unscanned(who string) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	t := iw.tallyOf(who)
	t.unscanned++
}
