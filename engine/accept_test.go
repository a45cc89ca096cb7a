package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// An accept of many files keeps the engine small: the review hands them
// on a batch at a time, each batch is planned and staged as it comes, and
// the outcomes are handed on after the commit, one at a time. Before, an
// accept held every file's diff, item, outcome and journal operation
// (about 3 KB a file: 60 MB for these 20,000).
func TestAcceptManyFilesInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 20,000 files")
	}
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	const dirs, per = 20, 1000
	if code, out := run(t, e, s.ID, "sh", "-c", fmt.Sprintf(
		"mkdir many && cd many && for i in $(seq 1 %d); do mkdir d$i && (cd d$i && seq 1 %d | xargs touch) || exit 1; done", dirs, per)); code != 0 {
		t.Fatalf("setup: %d %s", code, out)
	}
	peak := vmHWM(t)
	n, applied := 0, 0
	res, err := e.AcceptEach(ctx, s.ID, api.Selection{Paths: []string{"many"}}, func(o api.Outcome) error {
		n++
		if o.Applied && o.Digest != "" {
			applied++
		}
		return nil
	})
	must(t, err)
	grew := peak()
	t.Logf("accept of %d files: peak RSS +%d MiB (%d bytes a file)", n, grew>>20, grew/int64(max(n, 1)))
	if n != dirs*per || applied != dirs*per {
		t.Fatalf("%d outcomes, %d files applied with their digest; want %d (%+v)", n, applied, dirs*per, res)
	}
	for _, f := range []string{"many/d1/1", fmt.Sprintf("many/d%d/%d", dirs, per)} {
		if _, err := os.Stat(filepath.Join(p, f)); err != nil {
			t.Errorf("%s not in the project: %v", f, err)
		}
	}
	// The ceiling is generous (the review itself and the session's base
	// take some); the old accept needed three times it.
	if grew > 24<<20 {
		t.Errorf("the accept of %d files took %d MiB more memory", n, grew>>20)
	}
	// Nothing is left to accept, and nothing of the accept is left over.
	d, err := e.Diff(ctx, s.ID, []string{"many"})
	if err == nil && len(d.Files) > 0 {
		t.Errorf("after the accept the session still differs in %d files", len(d.Files))
	}
	entries, _ := os.ReadDir(p)
	for _, ent := range entries {
		if ent.Name() != "README.md" && ent.Name() != "src" && ent.Name() != "many" {
			t.Errorf("left in the project: %s", ent.Name())
		}
	}
}
