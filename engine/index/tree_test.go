package index

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/airlock/airlock/testenv"
	"golang.org/x/sys/unix"
)

// TestTreeWatchSeesOverlayChanges: a container layer in small (an
// overlay's upper directory on the disk, beside the host's files, with a
// lower holding files and directories): every change made through the
// overlay moves a tree watch's mark once the upper directory's
// directories are added (as a checkpoint's walk adds them), and a write
// beside it on the same file system does not.
func TestTreeWatchSeesOverlayChanges(t *testing.T) {
	testenv.Root(t, "mounts")
	base, err := os.MkdirTemp("/var/tmp", "treewatch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	for _, d := range []string{"lower/dir/sub", "upper", "work", "merged"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(base, "lower/f"), []byte("f"), 0o644)
	os.WriteFile(filepath.Join(base, "lower/dir/sub/g"), []byte("g"), 0o644)
	merged := filepath.Join(base, "merged")
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+base+"/lower,upperdir="+base+"/upper,workdir="+base+"/work"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	w, err := StartTree()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	addAll := func() {
		filepath.WalkDir(filepath.Join(base, "upper"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				w.AddDir(fd)
				unix.Close(fd)
			}
			return nil
		})
	}
	for _, op := range []string{
		"echo a > new", "echo b >> new", "chmod 600 new", "ln -s new link", "mkfifo fifo",
		"rm f", "rm -r dir/sub", "mkdir dir/sub", "echo c > dir/sub/h", "mv new renamed", "touch renamed",
		"rm -r dir; mkdir dir", "ln renamed hard", "truncate -s 0 renamed", "chown 1:1 renamed",
	} {
		addAll()
		before := w.Mark()
		if out, err := exec.Command("sh", "-c", "cd "+merged+" && "+op).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", op, err, out)
		}
		if w.Mark() == before {
			t.Errorf("%q through the overlay left the mark as it was", op)
		}
	}
	if err := unix.Setxattr(filepath.Join(merged, "renamed"), "user.x", []byte("1"), 0); err == nil {
		before := w.Mark()
		unix.Setxattr(filepath.Join(merged, "renamed"), "user.x", []byte("2"), 0)
		if w.Mark() == before {
			t.Error("an xattr set through the overlay left the mark as it was")
		}
	}
	before := w.Mark()
	os.WriteFile(filepath.Join(base, "beside"), []byte("host"), 0o644)
	if w.Mark() != before {
		t.Error("a write beside the tree moved its mark")
	}
}
