package soak

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/airlock/airlock/names"
)

// tree is a directory's content: each path (slash-separated, relative)
// with what it is and holds ("f 644 <sha256>", "d 755", "l <target>",
// "c" for a device such as a whiteout).
type tree map[string]string

// readTree reads root's content, leaving out the top-level entries in
// skip (a project's .git). Nothing is followed: symlinks are read as
// links.
func readTree(root string, skip ...string) (tree, error) {
	t := tree{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fmt.Sprintf("%o", fi.Mode().Perm())
		switch {
		case fi.Mode().IsRegular():
			sum, err := fileSum(path)
			if err != nil {
				return err
			}
			t[rel] = "f " + perm + " " + sum
		case fi.IsDir():
			t[rel] = "d" // a directory's mode is not compared: accept makes new ones with the project's umask
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			t[rel] = "l " + target
		default:
			t[rel] = "c"
		}
		return nil
	})
	return t, err
}

func fileSum(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// digest is one line for the whole tree.
func (t tree) digest() string {
	h := sha256.New()
	for _, k := range t.paths() {
		fmt.Fprintf(h, "%q %s\n", k, t[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (t tree) paths() []string {
	ks := make([]string, 0, len(t))
	for k := range t {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (t tree) clone() tree {
	c := make(tree, len(t))
	for k, v := range t {
		c[k] = v
	}
	return c
}

// differences lists, quoted, the paths where t and want differ (at most
// a few).
func (t tree) differences(want tree) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range append(t.paths(), want.paths()...) {
		if seen[k] {
			continue
		}
		seen[k] = true
		if t[k] != want[k] {
			out = append(out, fmt.Sprintf("%s: has %q, want %q", names.Quote(k), t[k], want[k]))
		}
	}
	if len(out) > 6 {
		out = append(out[:6], fmt.Sprintf("and %d more", len(out)-6))
	}
	return out
}

// changedPaths lists the paths where a and b differ.
func changedPaths(a, b tree) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range append(a.paths(), b.paths()...) {
		if !seen[k] && a[k] != b[k] {
			out = append(out, k)
		}
		seen[k] = true
	}
	return out
}

// withPath is t with path, and everything beneath it, as in src: a path
// accepted alone (with the parent directories it needs).
func (t tree) withPath(src tree, path string) tree {
	c := t.clone()
	for k := range c {
		if k == path || strings.HasPrefix(k, path+"/") {
			delete(c, k)
		}
	}
	for k, v := range src {
		if k == path || strings.HasPrefix(k, path+"/") {
			c[k] = v
		}
	}
	if _, ok := src[path]; ok {
		for dir := parentOf(path); dir != ""; dir = parentOf(dir) {
			if _, ok := c[dir]; !ok {
				c[dir] = src[dir]
			}
		}
	}
	return c
}

func parentOf(p string) string {
	i := strings.LastIndex(p, "/")
	if i < 0 {
		return ""
	}
	return p[:i]
}
