package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/review"
	"github.com/airlock/airlock/testenv"
)

// TestUnified renders a review of every kind of change (modified with a
// mode change, mode only, a quoted name, binary, too large, a whiteout,
// an opaque directory, a directory, a symlink, a FIFO) as the engine
// hands it over the wire, against goldens (AIRLOCK_GOLDEN=1 rewrites
// them).
func TestUnified(t *testing.T) {
	testenv.Root(t, "whiteouts and the opaque xattr")
	p, u := t.TempDir(), t.TempDir()
	w := func(root, name, data string, mode os.FileMode) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(data), mode)
	}
	w(p, "a.txt", "one\ntwo\nthree\n", 0o644)
	w(u, "a.txt", "one\n2\nthree\nfour", 0o755)
	w(p, "m.sh", "x\n", 0o644)
	w(u, "m.sh", "x\n", 0o755)
	w(u, "new \"q\"\t.txt", "hello\n", 0o644)
	w(u, "bin.dat", "\x00\x01\x02", 0o644)
	w(p, "gone.txt", "bye\n", 0o644)
	syscall.Mknod(filepath.Join(u, "gone.txt"), syscall.S_IFCHR, 0)
	os.Mkdir(filepath.Join(u, "dir"), 0o700)
	os.Symlink("a.txt", filepath.Join(u, "link"))
	w(u, "big.txt", strings.Repeat("y", 100<<10), 0o644)
	w(p, "d2/x", "x\n", 0o644)
	os.Mkdir(filepath.Join(u, "d2"), 0o755)
	syscall.Setxattr(filepath.Join(u, "d2"), "trusted.overlay.opaque", []byte("y"), 0)
	syscall.Mkfifo(filepath.Join(u, "fifo"), 0o644)
	diffs, err := review.Review(review.Layers{Upper: u, Project: p})
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(diffs)
	if err != nil {
		t.Fatal(err)
	}
	var wire []api.FileDiff
	if err := json.Unmarshal(js, &wire); err != nil {
		t.Fatal(err)
	}
	for _, color := range []bool{false, true} {
		var b bytes.Buffer
		if err := printUnified(&b, wire, color); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", fmt.Sprintf("unified-color-%v.golden", color))
		if os.Getenv("AIRLOCK_GOLDEN") == "1" {
			os.MkdirAll("testdata", 0o755)
			if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if b.String() != string(want) {
			t.Errorf("color %v:\n%s\nwant:\n%s", color, b.String(), want)
		}
	}
}
