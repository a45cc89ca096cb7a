package review_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock/airlock/review"
)

// A review handed on in batches is the same review, in path order, whatever
// mix of lean additions and full changes (renames, deletions, edits,
// symlinks, a file large enough to be cached) it holds.
func TestReviewEachIsTheReviewInBatches(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	long := strings.Repeat("a line of code\n", 40)
	write(t, filepath.Join(p, "moved.txt"), "moved\n"+long, 0o644)
	write(t, filepath.Join(p, "edited.txt"), "one\ntwo\n", 0o644)
	write(t, filepath.Join(p, "gone.txt"), "bye\n", 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	must(t, os.Rename(filepath.Join(m, "moved.txt"), filepath.Join(m, "zz-moved.txt")))
	write(t, filepath.Join(m, "edited.txt"), "one\nTWO\n", 0o644)
	must(t, os.Remove(filepath.Join(m, "gone.txt")))
	must(t, os.Symlink("edited.txt", filepath.Join(m, "link")))
	write(t, filepath.Join(m, "big.txt"), strings.Repeat("x\n", 5000), 0o644)
	for i := range 700 { // more than two batches of plain additions
		write(t, filepath.Join(m, fmt.Sprintf("many/d%d/f%03d.txt", i%7, i)), fmt.Sprintf("file %d\n", i), 0o644)
	}
	must(t, os.MkdirAll(filepath.Join(m, "empty/dir"), 0o755))
	write(t, filepath.Join(m, "bin.dat"), "\x00\x01binary\x00", 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}

	whole, err := review.Review(l)
	must(t, err)
	var streamed []review.FileDiff
	batches := 0
	must(t, review.ReviewEach(context.Background(), l, review.Options{Hunks: true}, func(b []review.FileDiff) error {
		batches++
		streamed = append(streamed, b...)
		return nil
	}))
	if batches < 3 {
		t.Errorf("%d batches for %d files: the review was not handed on in batches", batches, len(streamed))
	}
	if len(streamed) != len(whole) || len(whole) < 705 {
		t.Fatalf("streamed %d files, whole review %d", len(streamed), len(whole))
	}
	if !slices.IsSortedFunc(streamed, func(a, b review.FileDiff) int { return strings.Compare(a.Path, b.Path) }) {
		t.Error("the files were not handed on in path order")
	}
	kinds := map[review.Kind]int{}
	for i := range whole {
		a, b := whole[i], streamed[i]
		if a.Path != b.Path || a.ID != b.ID || a.Kind != b.Kind || a.Digest != b.Digest || a.From != b.From ||
			a.ContentType != b.ContentType || a.Size != b.Size || a.Mode != b.Mode || len(a.Hunks) != len(b.Hunks) {
			t.Errorf("file %d differs:\n whole    %+v\n streamed %+v", i, a.Change, b.Change)
		}
		if a.Digest == "" && a.Type == review.File {
			t.Errorf("%s: no digest", a.Path)
		}
		kinds[a.Kind]++
	}
	for _, k := range []review.Kind{review.Added, review.Renamed, review.Modified, review.Deleted} {
		if kinds[k] == 0 {
			t.Errorf("no %s change among %v: the test lost its mix", k, kinds)
		}
	}

	// A count is the number of changes, renames not paired.
	n, err := review.CountChanges(context.Background(), l, nil)
	must(t, err)
	changes, err := review.Changes(l)
	must(t, err)
	if n != len(changes) {
		t.Errorf("CountChanges = %d, Changes lists %d", n, len(changes))
	}

	// An error from the consumer ends the review with that error; a path
	// that matches nothing is refused before anything is handed on.
	stop := errors.New("client went away")
	calls := 0
	err = review.ReviewEach(context.Background(), l, review.Options{}, func([]review.FileDiff) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("consumer error: %v after %d calls", err, calls)
	}
	err = review.ReviewEach(context.Background(), l, review.Options{Paths: []string{"nosuch"}}, func([]review.FileDiff) error { calls++; return nil })
	var nm *review.NoMatchError
	if !errors.As(err, &nm) || calls != 1 {
		t.Errorf("unmatched path: %v after %d calls", err, calls)
	}
	// A summary digests nothing, binaries included.
	for _, f := range whole {
		if f.Path == "bin.dat" && f.ContentSum == "" {
			t.Error("bin.dat: no content sum in the whole review")
		}
	}
	must(t, review.ReviewEach(context.Background(), l, review.Options{Paths: []string{"bin.dat"}, NoDigests: true}, func(b []review.FileDiff) error {
		if len(b) != 1 || b[0].ContentSum != "" || b[0].Digest != "" {
			t.Errorf("NoDigests: %+v", b)
		}
		return nil
	}))
	// Selected paths narrow the stream.
	var sel []string
	must(t, review.ReviewEach(context.Background(), l, review.Options{Paths: []string{"many/d3"}, NoDigests: true}, func(b []review.FileDiff) error {
		for _, f := range b {
			sel = append(sel, f.Path)
			if f.Digest != "" {
				t.Errorf("%s: a digest with NoDigests", f.Path)
			}
		}
		return nil
	}))
	if len(sel) != 100 || !strings.HasPrefix(sel[0], "many/d3/") {
		t.Errorf("selected %d files (%v...), want the 100 under many/d3", len(sel), sel[:min(3, len(sel))])
	}
}
