// Package atomicfile writes a file whole or not at all: the data goes to
// a temporary file beside it, is synced, and is renamed over the path, so
// a crash or a full disk leaves the old file or the new one, never part of
// one.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode perm.
func Write(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), perm); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
