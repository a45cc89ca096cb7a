package overlay_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/testenv"
)

func needRoot(t *testing.T) {
	testenv.Root(t, "mounts tmpfs and overlayfs")
	if err := overlay.Check(); err != nil {
		testenv.Missing(t, err.Error())
	}
}

func TestMountFindUnmount(t *testing.T) {
	needRoot(t)
	for _, name := range []string{"plain", "odd,name:with\\chars and space"} {
		t.Run(name, func(t *testing.T) {
			lower := filepath.Join(t.TempDir(), name)
			os.MkdirAll(lower, 0o750)
			os.WriteFile(filepath.Join(lower, "a.txt"), []byte("lower\n"), 0o644)
			dir := filepath.Join(t.TempDir(), "ws")
			ws, err := overlay.Mount(lower, dir, 8<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Unmount()
			os.WriteFile(filepath.Join(ws.Merged(), "a.txt"), []byte("upper\n"), 0o644)
			if b, _ := os.ReadFile(filepath.Join(lower, "a.txt")); string(b) != "lower\n" {
				t.Fatalf("the lower layer was written: %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(ws.Upper(), "a.txt")); string(b) != "upper\n" {
				t.Fatalf("the write did not land in the upper layer: %q", b)
			}
			fi, _ := os.Stat(ws.Merged())
			if fi.Mode().Perm() != 0o750 {
				t.Errorf("merged root mode %v, want the project's 0750", fi.Mode().Perm())
			}
			// Found again as after a restart.
			found, err := overlay.Find(lower, dir)
			if err != nil || found.Upper() != ws.Upper() {
				t.Fatalf("Find: %v", err)
			}
			u, err := ws.Usage()
			if err != nil || u.Size != 8<<20 || u.Full {
				t.Errorf("usage %+v, %v", u, err)
			}
			if err := ws.Unmount(); err != nil {
				t.Fatal(err)
			}
			if _, err := overlay.Find(lower, dir); !errdefs.IsNotFound(err) {
				t.Errorf("Find after Unmount: %v", err)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("workspace directory left behind")
			}
		})
	}
}

func TestMountRefusesBadInput(t *testing.T) {
	needRoot(t)
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		lower string
		size  int64
		says  string
	}{
		{"/nonexistent", 8 << 20, "nonexistent"},
		{file, 8 << 20, "not a directory"},
		{t.TempDir(), 1000, "too small"},
	} {
		_, err := overlay.Mount(tc.lower, filepath.Join(t.TempDir(), "ws"), tc.size)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Mount(%s, %d): %v, want %q", tc.lower, tc.size, err, tc.says)
		}
	}
}

// Find mounts the overlay again over what survived: a tmpfs whose
// overlay was unmounted, or a disk workspace after a reboot. Close
// leaves a disk workspace's writes, and drops a tmpfs's.
func TestFindMountsOverlayAgain(t *testing.T) {
	needRoot(t)
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "tmpfs", true: "disk"}[disk], func(t *testing.T) {
			lower := t.TempDir()
			dir := filepath.Join(t.TempDir(), "ws")
			var ws *overlay.Workspace
			var err error
			if disk {
				ws, err = overlay.MountDisk(lower, dir, nil)
			} else {
				ws, err = overlay.Mount(lower, dir, 8<<20)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Unmount()
			os.WriteFile(filepath.Join(ws.Merged(), "a.txt"), []byte("kept\n"), 0o644)
			if disk {
				if err := ws.Close(); err != nil {
					t.Fatal(err)
				}
			} else if err := syscall.Unmount(ws.Merged(), 0); err != nil {
				t.Fatal(err)
			}
			found, err := overlay.Find(lower, dir)
			if err != nil || found.Disk != disk {
				t.Fatalf("Find: %+v, %v", found, err)
			}
			if b, _ := os.ReadFile(filepath.Join(found.Merged(), "a.txt")); string(b) != "kept\n" {
				t.Errorf("after Find: %q", b)
			}
			if err := found.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := overlay.Find(lower, dir); (err == nil) != disk {
				t.Errorf("Find after Close: %v", err)
			}
		})
	}
}

// TestUnmountBusySaysWho: a workspace that cannot be unmounted because a
// process holds a directory in it says which process holds what (the
// path quoted: the session chose its names), instead of only "device or
// resource busy".
func TestUnmountBusySaysWho(t *testing.T) {
	needRoot(t)
	lower := t.TempDir()
	ws, err := overlay.Mount(lower, filepath.Join(t.TempDir(), "ws"), 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Unmount()
	held := filepath.Join(ws.Merged(), "node_modules", "a\x1b[2Jb")
	if err := os.MkdirAll(held, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	err = ws.Unmount()
	f.Close()
	if err == nil {
		t.Fatal("unmounted a workspace a process holds a directory in")
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"busy", "process " + strconv.Itoa(os.Getpid()), `node_modules/a\x1b[2Jb`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "\x1b") {
		t.Errorf("the error holds the name's escape unquoted: %q", msg)
	}
	if err := ws.Unmount(); err != nil {
		t.Errorf("once let go: %v", err)
	}
}
