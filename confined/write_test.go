package confined

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenWritable(t *testing.T) {
	modes(t, func(t *testing.T, walk bool) {
		root, outside := fixture(t)
		r := openRoot(t, root, walk)
		cases := []struct {
			rel string
			err error
		}{
			{"file", nil},
			{"dir/sub/deep", nil},
			{"abs", ErrSymlink},
			{"rel", ErrSymlink},
			{"out/secret", ErrSymlink},
			{"inner/sub/deep", ErrSymlink},
			{"magic", ErrSymlink},
			{"../outside/secret", ErrEscape},
			{"/etc/passwd", ErrEscape},
			{"fifo", ErrNotRegular},
			{"sock", ErrNotRegular},
			{"dir", ErrNotRegular},
			{"missing", os.ErrNotExist},
		}
		if os.Geteuid() == 0 {
			cases = append(cases, struct {
				rel string
				err error
			}{"whiteout", ErrNotRegular})
		}
		for _, tc := range cases {
			fd, st, err := r.OpenWritable(tc.rel)
			if tc.err == nil {
				if err != nil {
					t.Errorf("%s: %v", tc.rel, err)
					continue
				}
				if _, err := unix.Pwrite(fd, []byte("W"), 0); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
					t.Errorf("%s: write %v, mode %o", tc.rel, err, st.Mode)
				}
				unix.Close(fd)
				continue
			}
			if err == nil {
				unix.Close(fd)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.rel, err, tc.err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "HOST SECRET" {
			t.Errorf("a file outside was written: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(root, "file")); string(b) != "Wello" {
			t.Errorf("the file inside holds %q: OpenWritable must not truncate", b)
		}
		if _, err := os.Stat(filepath.Join(root, "missing")); err == nil {
			t.Error("OpenWritable created a file")
		}
	})
}
