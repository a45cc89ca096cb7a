package confined

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestXattrs(t *testing.T) {
	root, _ := fixture(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Setxattr(filepath.Join(root, "file"), "user.a", []byte("1"), 0); errors.Is(err, unix.ENOTSUP) {
		t.Skip("no user xattrs on this file system")
	}
	must(unix.Setxattr(filepath.Join(root, "file"), "user.big", []byte(strings.Repeat("v", 3000)), 0))
	must(unix.Setxattr(filepath.Join(root, "dir"), "user.d", []byte("dir"), 0))
	if os.Geteuid() == 0 {
		must(unix.Setxattr(filepath.Join(root, "dir"), "trusted.overlay.opaque", []byte("y"), 0))
	}
	r := openRoot(t, root, false)
	fd, _, err := r.OpenFd("file")
	must(err)
	defer unix.Close(fd)
	xs, err := Xattrs(fd, nil, 0)
	if err != nil || xs["user.a"] != "1" || len(xs["user.big"]) != 3000 {
		t.Errorf("file: %v %v", len(xs), err)
	}
	xs, err = Xattrs(fd, func(n string) bool { return n == "user.a" }, 0)
	if err != nil || len(xs) != 1 {
		t.Errorf("file, one kept: %v %v", xs, err)
	}
	if _, err := Xattrs(fd, nil, 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	d, err := r.OpenDir("dir")
	must(err)
	defer d.Close()
	xs, err = d.Xattrs(nil, 0)
	if err != nil || xs["user.d"] != "dir" || os.Geteuid() == 0 && xs["trusted.overlay.opaque"] != "y" {
		t.Errorf("dir: %v %v", xs, err)
	}
	none, err := r.OpenDir("dir/sub")
	must(err)
	defer none.Close()
	if xs, err := none.Xattrs(nil, 0); err != nil || len(xs) != 0 {
		t.Errorf("no xattrs: %v %v", xs, err)
	}
}
