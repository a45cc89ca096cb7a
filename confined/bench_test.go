package confined

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkOpen compares a confined open (O_PATH, fstat, reopen) with the
// plain openat(O_NOFOLLOW) it replaces.
func BenchmarkOpen(b *testing.B) {
	root := b.TempDir()
	os.MkdirAll(filepath.Join(root, "a/b"), 0o755)
	os.WriteFile(filepath.Join(root, "a/b/f"), []byte("x"), 0o644)
	r, _ := OpenRoot(root)
	defer r.Close()
	b.Run("confined", func(b *testing.B) {
		for b.Loop() {
			f, err := r.Open("a/b/f")
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("openat", func(b *testing.B) {
		for b.Loop() {
			fd, err := unix.Openat(r.fd, "a/b/f", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
	})
}

func BenchmarkOpenVariants(b *testing.B) {
	root := b.TempDir()
	os.MkdirAll(filepath.Join(root, "a/b"), 0o755)
	os.WriteFile(filepath.Join(root, "a/b/f"), []byte("x"), 0o644)
	r, _ := OpenRoot(root)
	defer r.Close()
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NOCTTY, Resolve: resolve}
	b.Run("openat2-nonblock-fstat", func(b *testing.B) {
		for b.Loop() {
			fd, err := unix.Openat2(r.fd, "a/b/f", how)
			if err != nil {
				b.Fatal(err)
			}
			var st unix.Stat_t
			unix.Fstat(fd, &st)
			unix.Close(fd)
		}
	})
}
