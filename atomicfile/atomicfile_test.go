package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	if err := Write(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "two" || fi.Mode().Perm() != 0o644 {
		t.Errorf("%q %v", b, fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := Remove(p); err != nil {
		t.Errorf("removing an absent file: %v", err)
	}
	if _, err := os.Stat(p); err == nil {
		t.Error("the file is still there")
	}
	if err := Write(filepath.Join(dir, "no/such/dir/f"), []byte("x"), 0o644); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
}

// A streamed write that fails part way leaves the old file and no
// temporary file; one that succeeds replaces it with everything written.
func TestWriteFrom(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "changes.patch")
	if err := Write(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("the review failed")
	err := WriteFrom(p, 0o644, func(w io.Writer) error {
		w.Write(bytes.Repeat([]byte("x"), 1<<20))
		return broken
	})
	if !errors.Is(err, broken) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("a failed write changed the file: %d bytes", len(b))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := WriteFrom(p, 0o600, func(w io.Writer) error {
		for range 300 {
			if _, err := w.Write(bytes.Repeat([]byte("y"), 1000)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if len(b) != 300000 || fi.Mode().Perm() != 0o600 {
		t.Errorf("%d bytes, mode %v", len(b), fi.Mode())
	}
}
