package snapshot

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
)

// LayerCache keeps layers applied once, each in a directory of its own
// named by a key the caller derives from the layer's digest (and the part
// of it applied), so that new sessions are cloned from it rather than
// each applying the layer again. A layer is applied into a temporary
// directory and renamed to its key only once the application succeeded,
// the layer checked against its digest to the last byte: a key's
// directory holds exactly what ApplyLayer made. The cache is the
// engine's alone; no session ever sees it.
type LayerCache struct {
	dir string
	// mu is held for reading while a directory is made or cloned, for
	// writing while directories are dropped.
	mu      sync.RWMutex
	fillMu  sync.Mutex
	filling map[string]*sync.Mutex // one application of a key at a time
}

// OpenLayerCache opens the cache at dir, empty: what it held is removed
// (an interrupted application, and layers an earlier engine applied,
// perhaps under other rules), so that the cache holds only what this
// process applied.
func OpenLayerCache(dir string) (*LayerCache, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &LayerCache{dir: dir, filling: map[string]*sync.Mutex{}}, nil
}

// Clone fills dst (an empty directory) with the layer cached under key,
// calling apply first to apply the layer into a fresh directory when the
// cache does not hold it. An application that fails leaves nothing in
// the cache and returns apply's error.
func (c *LayerCache) Clone(key string, apply func(*confined.Root) error, dst *confined.Root) error {
	if err := checkKey(key); err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	dir := filepath.Join(c.dir, key)
	if err := c.fill(key, dir, apply); err != nil {
		return err
	}
	src, err := confined.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer src.Close()
	return CloneTree(src, dst)
}

// Fill applies the layer cached under key, as Clone does, when the cache
// does not hold it yet, without cloning it.
func (c *LayerCache) Fill(key string, apply func(*confined.Root) error) error {
	if err := checkKey(key); err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.fill(key, filepath.Join(c.dir, key), apply)
}

func checkKey(key string) error {
	if key == "" || strings.ContainsAny(key, "/.") {
		return fmt.Errorf("layer cache key %q", key)
	}
	return nil
}

func (c *LayerCache) fill(key, dir string, apply func(*confined.Root) error) error {
	c.fillMu.Lock()
	m := c.filling[key]
	if m == nil {
		m = new(sync.Mutex)
		c.filling[key] = m
	}
	c.fillMu.Unlock()
	m.Lock()
	defer m.Unlock()
	if st, err := os.Lstat(dir); err == nil && st.IsDir() {
		return nil
	}
	tmp, err := os.MkdirTemp(c.dir, ".tmp-")
	if err != nil {
		return err
	}
	r, err := confined.OpenRoot(tmp)
	if err == nil {
		err = apply(r)
		r.Close()
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return err
}

// Drop removes the cached layers whose keys keep refuses, once no clone
// is under way.
func (c *LayerCache) Drop(keep func(key string) bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") || keep(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(c.dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
		c.fillMu.Lock()
		delete(c.filling, e.Name())
		c.fillMu.Unlock()
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Only says whether every entry of the layer cached under key passes
// keep (given its path relative to the layer's root, slash-separated, and
// its lstat), applying the layer first, as Fill does, when the cache does
// not hold it yet. Whiteouts (character devices) and opaque directories
// never pass. The cache's directories are the engine's own: a symlink in
// them is an entry like any other, never followed.
func (c *LayerCache) Only(key string, apply func(*confined.Root) error, keep func(rel string, fi fs.FileInfo) bool) (bool, error) {
	if err := c.Fill(key, apply); err != nil {
		return false, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	root := filepath.Join(c.dir, key)
	ok := true
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeCharDevice != 0 || (fi.IsDir() && opaque(p)) || !keep(filepath.ToSlash(rel), fi) {
			ok = false
			return filepath.SkipAll
		}
		return nil
	})
	return ok, err
}

func opaque(dir string) bool {
	v := make([]byte, 1)
	n, err := unix.Lgetxattr(dir, "trusted.overlay.opaque", v)
	return err == nil && n == 1 && v[0] == 'y'
}
