package confined

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fixture builds a root with the usual traps and a secret outside it.
func fixture(t testing.TB) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "dir/sub"), 0o755))
	must(os.MkdirAll(outside, 0o755))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("HOST SECRET"), 0o600))
	must(os.WriteFile(filepath.Join(root, "file"), []byte("hello"), 0o644))
	must(os.WriteFile(filepath.Join(root, "dir/sub/deep"), []byte("deep"), 0o644))
	must(os.Symlink(outside, filepath.Join(root, "out")))                          // dir symlink leaving
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "abs"))) // absolute file link
	must(os.Symlink("dir", filepath.Join(root, "inner")))                          // relative link, staying inside
	must(os.Symlink("../outside/secret", filepath.Join(root, "rel")))              // relative link leaving
	must(os.Symlink("/proc/self/root/etc/passwd", filepath.Join(root, "magic")))
	must(unix.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	must(err)
	t.Cleanup(func() { l.Close() })
	if os.Geteuid() == 0 {
		must(unix.Mknod(filepath.Join(root, "zero"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))))
		must(unix.Mknod(filepath.Join(root, "whiteout"), unix.S_IFCHR, 0))
	}
	return root, outside
}

func modes(t *testing.T, f func(t *testing.T, walk bool)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) { f(t, walk) })
	}
}

func openRoot(t testing.TB, dir string, walk bool) *Root {
	t.Helper()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.noOpenat2.Store(walk)
	t.Cleanup(func() { r.Close() })
	return r
}

func TestOpen(t *testing.T) {
	modes(t, func(t *testing.T, walk bool) {
		root, _ := fixture(t)
		r := openRoot(t, root, walk)
		cases := []struct {
			rel  string
			want string // content, or "" when refused
			err  error
		}{
			{"file", "hello", nil},
			{"dir/sub/deep", "deep", nil},
			{"./dir//sub/deep", "deep", nil},
			{"out/secret", "", ErrSymlink},
			{"abs", "", ErrSymlink},
			{"rel", "", ErrSymlink},
			{"inner/sub/deep", "", ErrSymlink}, // even a link that stays inside
			{"magic", "", ErrSymlink},
			{"../outside/secret", "", ErrEscape},
			{"/etc/passwd", "", ErrEscape},
			{"dir/../../outside/secret", "", ErrEscape},
			{"a\x00b", "", ErrEscape},
			{"fifo", "", ErrNotRegular},
			{"sock", "", ErrNotRegular},
			{"dir", "", ErrNotRegular},
			{"missing", "", os.ErrNotExist},
			{"file/x", "", unix.ENOTDIR},
		}
		if os.Geteuid() == 0 {
			cases = append(cases,
				struct {
					rel, want string
					err       error
				}{"zero", "", ErrNotRegular},
				struct {
					rel, want string
					err       error
				}{"whiteout", "", ErrNotRegular})
		}
		for _, c := range cases {
			done := make(chan struct{})
			var b []byte
			var err error
			go func() {
				defer close(done)
				b, err = r.ReadFile(c.rel, 1<<20)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("%q: the open blocked (a FIFO opened for reading?)", c.rel)
			}
			if c.err == nil {
				if err != nil || string(b) != c.want {
					t.Errorf("%q: got %q, %v; want %q", c.rel, b, err, c.want)
				}
				continue
			}
			if !errors.Is(err, c.err) {
				t.Errorf("%q: got %q, %v; want an error wrapping %v", c.rel, b, err, c.err)
			}
			if bytes.Contains(b, []byte("SECRET")) {
				t.Errorf("%q: read the host's file", c.rel)
			}
		}
	})
}

func TestStatReadlinkReadDir(t *testing.T) {
	modes(t, func(t *testing.T, walk bool) {
		root, outside := fixture(t)
		r := openRoot(t, root, walk)
		if fi, err := r.Lstat("abs"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("Lstat of a final symlink: %v, %v", fi, err)
		}
		if fi, err := r.Lstat("dir/sub/deep"); err != nil || fi.Size() != 4 || fi.Name() != "deep" {
			t.Errorf("Lstat dir/sub/deep: %v, %v", fi, err)
		}
		if _, err := r.Lstat("out/secret"); !errors.Is(err, ErrSymlink) {
			t.Errorf("Lstat through a symlinked directory: %v", err)
		}
		if tgt, err := r.Readlink("abs"); err != nil || tgt != filepath.Join(outside, "secret") {
			t.Errorf("Readlink abs: %q, %v", tgt, err)
		}
		if _, err := r.Readlink("out/x"); !errors.Is(err, ErrSymlink) {
			t.Errorf("Readlink through a symlink: %v", err)
		}
		names, err := r.ReadDirNames("dir", 0)
		if err != nil || len(names) != 1 || names[0] != "sub" {
			t.Errorf("ReadDirNames dir: %v, %v", names, err)
		}
		if _, err := r.ReadDirNames("out", 0); !errors.Is(err, ErrSymlink) {
			t.Errorf("ReadDirNames of a symlink: %v", err)
		}
		if _, err := r.ReadDirNames("", 3); !errors.Is(err, ErrTooLarge) {
			t.Errorf("ReadDirNames over its limit: %v", err)
		}
		if _, err := r.OpenDir("file"); !errors.Is(err, ErrNotDir) {
			t.Errorf("OpenDir of a file: %v", err)
		}
		sub, err := r.OpenDir("dir")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if b, err := sub.ReadFile("sub/deep", 0); err != nil || string(b) != "deep" {
			t.Errorf("subroot read: %q, %v", b, err)
		}
		if _, err := sub.ReadFile("../file", 0); !errors.Is(err, ErrEscape) {
			t.Errorf("subroot escape: %v", err)
		}
	})
}

func TestLimits(t *testing.T) {
	root := t.TempDir()
	big := filepath.Join(root, "sparse")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(40 << 30); err != nil { // 40 GB, no blocks
		t.Fatal(err)
	}
	f.Close()
	r := openRoot(t, root, false)
	if _, err := r.ReadFile("sparse", 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a 40 GB sparse file under a 1 MiB limit: %v", err)
	}
}

// TestGrowingFile: a file that grows while it is read is never read past
// the limit.
func TestGrowingFile(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "grow")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := openRoot(t, root, false)
	f, err := r.Open("grow")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Grow it after the open's stat.
	w, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	w.Write(bytes.Repeat([]byte("y"), 4096))
	w.Close()
	b, err := ReadAll(f, "grow", 1024)
	if !errors.Is(err, ErrTooLarge) || len(b) > 1024 {
		t.Fatalf("growing file: %d bytes, %v", len(b), err)
	}
}

// TestSwapRace: a directory swapped with a symlink to the host in a loop
// (renameat2 RENAME_EXCHANGE) never makes a read return the host's bytes.
func TestSwapRace(t *testing.T) {
	modes(t, func(t *testing.T, walk bool) {
		root, outside := fixture(t)
		if err := os.WriteFile(filepath.Join(root, "dir/secret"), []byte("inside"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(root, "swap")); err != nil {
			t.Fatal(err)
		}
		r := openRoot(t, root, walk)
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "dir"), unix.AT_FDCWD, filepath.Join(root, "swap"), unix.RENAME_EXCHANGE)
			}
		}()
		ok := 0
		deadline := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(deadline) {
			for _, p := range []string{"dir/secret", "swap/secret"} {
				b, err := r.ReadFile(p, 0)
				if bytes.Contains(b, []byte("SECRET")) {
					stop.Store(true)
					wg.Wait()
					t.Fatalf("read the host's file through %s", p)
				}
				if err == nil {
					ok++
				}
			}
		}
		stop.Store(true)
		wg.Wait()
		if ok == 0 {
			t.Fatal("no read succeeded: the race test tested nothing")
		}
	})
}

func TestMagicLinkRoot(t *testing.T) {
	// A root on /proc/self: "root" and "cwd" beneath it are magic links.
	r := openRoot(t, "/proc/self", false)
	if _, err := r.ReadFile("root/etc/hostname", 0); err == nil {
		t.Fatal("read through a procfs magic link")
	}
}

// FuzzResolve: whatever the path, nothing outside the root is opened, and
// nothing panics.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"file", "out/secret", "../outside/secret", "inner/sub/deep", "dir/./sub//deep", "/etc/passwd", "fifo", "a/../../b", "...", "dir/sub/../../file"} {
		f.Add(s, false)
	}
	root, outside := fixture(f)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(outside, "secret"), &st); err != nil {
		f.Fatal(err)
	}
	r1 := openRoot(f, root, false)
	r2 := openRoot(f, root, true)
	f.Fuzz(func(t *testing.T, rel string, walk bool) {
		r := r1
		if walk {
			r = r2
		}
		fh, err := r.Open(rel)
		if err != nil {
			return
		}
		defer fh.Close()
		var got unix.Stat_t
		if err := unix.Fstat(int(fh.Fd()), &got); err != nil {
			t.Fatal(err)
		}
		if got.Ino == st.Ino && got.Dev == st.Dev {
			t.Fatalf("%q opened the file outside the root", rel)
		}
	})
}
