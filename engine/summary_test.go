package engine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// stats is the session's diff summary by path, as `diff --stat` reads it.
func stats(t *testing.T, e *enginetest.Engine, id string) map[string]api.Stat {
	t.Helper()
	out := map[string]api.Stat{}
	said := -1 // the widest path's length, where the engine says it
	_, err := e.DiffStatLines(context.Background(), id, api.DiffQuery{}, func(line []byte) error {
		if w, ok := api.ParseStatWidth(line); ok {
			said = w
			return nil
		}
		st, err := api.ParseStatLine(line)
		out[st.Path] = st
		return err
	})
	if said >= 0 {
		width := 0
		for p := range out {
			width = max(width, len(p))
		}
		if said != width {
			t.Errorf("the summary says the widest path is %d bytes; it is %d", said, width)
		}
	}
	must(t, err)
	return out
}

// The summary read back while nothing changed follows every kind of
// change: the session's writes, a write through a shared mapping (which
// makes no event), an accept, and the project changing underneath.
func TestStatSummaryFollowsEveryChange(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	bin := filepath.Join(t.TempDir(), "mmapwrite")
	build := exec.Command("go", "build", "-o", bin, "./testdata/mmapwrite")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the mapping writer: %v\n%s", err, out)
	}
	time.Sleep(1100 * time.Millisecond) // the project's stat data must be older than the racy window
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	if code, out := run(t, e, s.ID, "sh", "-c", "echo a > a.txt && mkdir -p new/deep && echo b > new/deep/b.txt && printf 'aaaa\\n' > mapped.txt"); code != 0 {
		t.Fatalf("setup: %d %s", code, out)
	}
	summary := filepath.Join(e.StateDir, "sessions", s.ID, "summary")
	// Each summary is compared with a full diff's, which always walks.
	expect := func(what string, want map[string]int) {
		t.Helper()
		d, err := e.Diff(ctx, s.ID, nil)
		must(t, err)
		for i := 0; i < 2; i++ { // a walk, then (where one was kept) the summary
			got := stats(t, e, s.ID)
			if len(got) != len(d.Stats) {
				t.Errorf("%s (read %d): %d paths, the full diff has %d", what, i, len(got), len(d.Stats))
			}
			for _, st := range d.Stats {
				if g := got[st.Path]; g.Kind != st.Kind || g.Added != st.Added || g.Removed != st.Removed || g.Conflict != st.Conflict {
					t.Errorf("%s (read %d): %s is %+v, the full diff says %+v", what, i, st.Path, g, st)
				}
			}
			for path, added := range want {
				if st, ok := got[path]; !ok && added >= 0 || ok && added < 0 || ok && st.Added != added {
					t.Errorf("%s (read %d): %s is %+v, want %d added lines (-1: no change)", what, i, path, st, added)
				}
			}
		}
	}
	expect("after the session's first writes", map[string]int{"a.txt": 1, "new/deep/b.txt": 1, "mapped.txt": 1})
	if _, err := os.Stat(summary); err != nil {
		t.Fatalf("no summary kept for an unchanged session: %v", err)
	}

	run(t, e, s.ID, "sh", "-c", "echo more >> a.txt && rm new/deep/b.txt")
	expect("after an append and a removal", map[string]int{"a.txt": 2, "new/deep/b.txt": -1})

	// Written through a mapping the session holds: no event says so.
	must(t, os.WriteFile(filepath.Join(filepath.Dir(summary), "merged", "mapwriter"), mustRead(t, bin), 0o755))
	run(t, e, s.ID, "sh", "-c", "./mapwriter mapped.txt > /dev/null 2>&1 &")
	waitFor(t, e, s.ID, "/tmp/mapped")
	expect("while a mapping is held", map[string]int{"mapped.txt": 1})
	waitFor(t, e, s.ID, "/tmp/written")
	expect("after a write through the mapping", map[string]int{"mapped.txt": 3})

	// The project changes underneath: a file appears where the session
	// added one, in a directory the session made.
	must(t, os.MkdirAll(filepath.Join(p, "new", "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(p, "a.txt"), []byte("a\n"), 0o644))
	expect("after the project changed", nil)

	run(t, e, s.ID, "sh", "-c", "kill $(pidof mapwriter); rm mapwriter")
	_, err = e.Accept(ctx, s.ID, api.Selection{Paths: []string{"mapped.txt"}})
	must(t, err)
	must(t, os.Remove(summary))
	time.Sleep(1100 * time.Millisecond) // the accept just wrote the project: racily clean until then
	expect("after an accept", map[string]int{"mapped.txt": -1})
	if _, err := os.Stat(summary); err != nil {
		t.Errorf("no summary kept once the mapping was gone: %v", err)
	}
}

// waitFor waits until the session's workspace has name.
func waitFor(t *testing.T, e *enginetest.Engine, id, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, out := run(t, e, id, "ls", name); code == 0 && strings.TrimSpace(out) == name {
			return
		}
	}
	t.Fatalf("%s never appeared in the session", name)
}
