package review_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock/airlock/review"
)

// modeOf is a path's permission bits, not following a symlink at the end.
func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	must(t, err)
	return fi.Mode().Perm()
}

// A discard of a directory's mode change, after the agent put a symlink to
// a host file where the directory was, leaves the host file alone (the
// chmod used to follow the symlink, as root, on the host).
func TestDiscardModeNeverFollowsASymlink(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(filepath.Join(p, "d"), 0o755))
	victim := filepath.Join(t.TempDir(), "host-secret")
	write(t, victim, "host\n", 0o600)
	ws := mountWS(t, p)
	m := ws.Merged()
	must(t, os.Chmod(filepath.Join(m, "d"), 0o700))
	l := review.Layers{Upper: ws.Upper(), Project: p}
	all, err := review.Review(l)
	must(t, err)
	// Between the review and the discard, the agent swaps the directory
	// for a symlink.
	must(t, os.Remove(filepath.Join(m, "d")))
	must(t, os.Symlink(victim, filepath.Join(m, "d")))
	out, err := review.Discard(l, m, all, review.Selection{Paths: []string{"d"}})
	must(t, err)
	if got := modeOf(t, victim); got != 0o600 {
		t.Fatalf("the host file's mode became %v through the session's symlink (outcome %+v)", got, out)
	}
	if len(out) != 1 || out[0].Applied {
		t.Errorf("want the discard refused: %+v", out)
	}
}

// Finishing an interrupted accept never changes a mode through a symlink
// that stands where the journal expected a directory or a file.
func TestRecoverChmodNeverFollowsASymlink(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(p, 0o755))
	victimDir := filepath.Join(t.TempDir(), "host-dir")
	must(t, os.Mkdir(victimDir, 0o700))
	victim := filepath.Join(t.TempDir(), "host-file")
	write(t, victim, "host\n", 0o600)
	must(t, os.Symlink(victimDir, filepath.Join(p, "d")))
	must(t, os.Symlink(victim, filepath.Join(p, "f")))
	for _, op := range []map[string]any{
		{"op": "chmod", "path": "d", "mode": 0o777, "isdir": true},
		{"op": "mkdir", "path": "d", "mode": 0o777},
		{"op": "chmod", "path": "f", "mode": 0o777},
	} {
		j := filepath.Join(t.TempDir(), "accept.journal")
		data, _ := json.Marshal(map[string]any{"state": "committed", "project": p, "ops": []any{op}})
		must(t, os.WriteFile(j, data, 0o600))
		review.Recover(j)
		if got := modeOf(t, victimDir); got != 0o700 {
			t.Fatalf("%v: the host directory's mode became %v", op, got)
		}
		if got := modeOf(t, victim); got != 0o600 {
			t.Fatalf("%v: the host file's mode became %v", op, got)
		}
	}
}
