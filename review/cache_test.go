package review_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/review"
)

// TestCacheNeverServesAStaleReview: a cached review is reused only while
// both versions of the file are unchanged.
func TestCacheNeverServesAStaleReview(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "f.txt"), "a\nb\n", 0o644)
	write(t, filepath.Join(p, "same.txt"), "same\n", 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	write(t, filepath.Join(m, "f.txt"), "a\nB\n", 0o644)
	write(t, filepath.Join(m, "new.txt"), "new\n", 0o644)
	write(t, filepath.Join(m, "same.txt"), "same\n", 0o644)
	// Let the versions settle so that they are cached.
	old := time.Now().Add(-time.Minute)
	for _, f := range []string{"f.txt", "new.txt", "same.txt"} {
		os.Chtimes(filepath.Join(ws.Upper(), f), old, old)
	}
	time.Sleep(1100 * time.Millisecond)
	l := review.Layers{Upper: ws.Upper(), Project: p, Cache: review.NewCache()}
	summary := func() string {
		diffs, err := review.Review(l)
		must(t, err)
		var s []string
		for _, d := range diffs {
			var lines []string
			for _, h := range d.Hunks {
				lines = append(lines, strings.Join(h.Lines, ""))
			}
			s = append(s, d.Path+":"+string(d.Kind)+":"+strings.Join(lines, "|"))
		}
		return strings.Join(s, "\n")
	}
	first := summary()
	if second := summary(); second != first {
		t.Fatalf("cached review differs:\n%s\nvs\n%s", first, second)
	}
	// The session changes f.txt again, the host changes same.txt.
	write(t, filepath.Join(m, "f.txt"), "a\nBB\n", 0o644)
	write(t, filepath.Join(p, "same.txt"), "host edit\n", 0o644)
	third := summary()
	if !strings.Contains(third, "+BB") || !strings.Contains(third, "same.txt:modified") {
		t.Fatalf("stale review after changes:\n%s", third)
	}
}
