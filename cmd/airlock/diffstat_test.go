package main

import (
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
)

// Lines printed as they come (the engine said the widest path first) are
// the lines printed once all were held.
func TestStatPrinterStreamsAsItHolds(t *testing.T) {
	stats := []api.Stat{
		{Path: "a.go", Kind: "modified", Added: 3, Removed: 1},
		{Path: "dir/ünïcode.txt", Kind: "added", Added: 1, Held: true, Findings: []string{"secret"}},
		{Path: "new.go", From: "old.go", Kind: "renamed", Conflict: true},
		{Path: "blob.bin", Kind: "added", Binary: true},
		{Path: strings.Repeat("long/", 20) + "x", Kind: "deleted", Removed: 40},
	}
	var held, streamed strings.Builder
	printStat(&held, api.Diff{Stats: stats}, true)
	p := &statPrinter{w: &streamed, colored: true}
	width := 0
	for _, s := range stats {
		width = max(width, len(s.Path))
	}
	p.setWidth(width)
	for _, s := range stats {
		p.add(s)
	}
	p.finish()
	if held.String() != streamed.String() {
		t.Errorf("held:\n%s\nstreamed:\n%s", held.String(), streamed.String())
	}
	for _, want := range []string{"[held, secret]", "[from old.go, CONFLICT]", "| binary", " 5 path(s) changed, 4 insertion(s)(+), 41 deletion(s)(-)"} {
		if !strings.Contains(held.String(), want) {
			t.Errorf("no %q in:\n%s", want, held.String())
		}
	}
}
