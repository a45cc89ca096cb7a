package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// describe lists everything a checkpoint must keep of dir, one line per
// path: type, mode, owner, mtime, size, content (of a sparse file its
// regions and their data), symlink target, hard-link group, user.* and
// opaque xattrs. Two directories with the same description are the same
// upper layer.
func describe(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	first := map[[2]uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		s := fmt.Sprintf("type=%o mode=%o owner=%d:%d mtime=%d", st.Mode&unix.S_IFMT, st.Mode&0o7777, st.Uid, st.Gid, st.Mtim.Nano())
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if st.Nlink > 1 {
				k := [2]uint64{st.Dev, st.Ino}
				if f, ok := first[k]; ok {
					s += " link-of=" + f
					break
				}
				first[k] = rel
			}
			s += fmt.Sprintf(" size=%d %s", st.Size, content(t, p, &st))
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			s += " -> " + target
		case unix.S_IFCHR:
			s += fmt.Sprintf(" rdev=%d", st.Rdev)
		}
		s += " " + xattrs(p)
		out[rel] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// content is a file's data regions and their digest (a sparse file is
// never read through its holes).
func content(t testing.TB, p string, st *unix.Stat_t) string {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	regions, err := dataRegions(int(f.Fd()), st.Size)
	if err != nil {
		t.Fatal(err)
	}
	sparse := regions != nil
	if !sparse && st.Size > 0 {
		regions = []Region{{0, st.Size}}
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for _, r := range regions {
		for off := r.Off; off < r.Off+r.Len; {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), r.Off+r.Len-off)], off)
			if n == 0 {
				t.Fatalf("read %s: %v", p, err)
			}
			h.Write(buf[:n])
			off += int64(n)
		}
	}
	return fmt.Sprintf("sparse=%v regions=%v sha=%s", sparse, regions, hex.EncodeToString(h.Sum(nil))[:16])
}

// xattrs are the user.* and trusted.overlay.opaque attributes of p.
func xattrs(p string) string {
	buf := make([]byte, 64<<10)
	n, _ := unix.Llistxattr(p, buf)
	var kept []string
	for _, k := range strings.Split(string(buf[:max(n, 0)]), "\x00") {
		if keepXattr(k) || k == opaqueXattr {
			v := make([]byte, 64<<10)
			m, _ := unix.Lgetxattr(p, k, v)
			kept = append(kept, k+"="+string(v[:max(m, 0)]))
		}
	}
	slices.Sort(kept)
	return "xattrs=" + strings.Join(kept, ",")
}

// sameTree fails the test where got differs from want.
func sameTree(t testing.TB, what string, want, got map[string]string) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s: %s is missing (want %s)", what, p, w)
		} else if g != w {
			t.Errorf("%s: %s differs:\n got %s\nwant %s", what, p, g, w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s should not be there (%s)", what, p, g)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, p, data string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(data), 0o644))
}

// sparseFile makes p a file of size bytes holding only data at off.
func sparseFile(t testing.TB, p string, size, off int64, data string) {
	t.Helper()
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	must(t, f.Truncate(size))
	_, err = f.WriteAt([]byte(data), off)
	must(t, err)
}

func openStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	must(t, err)
	return s
}

// record records dir once the racy window has passed, so that the
// files just written are trusted by their stat next time.
func record(t testing.TB, s *Store, dir string) *Checkpoint {
	t.Helper()
	time.Sleep(racyWindow())
	c, err := s.RecordDir(context.Background(), dir, RecordOptions{})
	must(t, err)
	return c
}

// restored restores checkpoint id into a new directory and describes it.
func restored(t testing.TB, s *Store, id ID) map[string]string {
	t.Helper()
	dir := t.TempDir()
	must(t, s.RestoreDir(context.Background(), id, dir))
	return describe(t, dir)
}

func root() bool { return os.Geteuid() == 0 }
