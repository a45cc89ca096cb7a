package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// helperSource is a static program the hostile scenarios copy into a
// session (at /tmp/hh) for what busybox cannot do:
//
//	hh swap A B   exchange A and B (renameat2 RENAME_EXCHANGE; three
//	              renames where the kernel refuses) until /tmp/hostile-stop
//	              exists, so that A is now a directory, now a symlink
//	hh sock PATH  leave a unix socket at PATH
//
// It uses the standard library only, so it builds without the module's
// dependencies and runs in any image.
const helperSource = `package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

var renameat2 = map[string]uintptr{"amd64": 316, "arm64": 276, "riscv64": 276, "386": 353, "arm": 382, "ppc64le": 357, "s390x": 347}

func exchange(a, b string) error {
	nr, ok := renameat2[runtime.GOARCH]
	if !ok {
		return syscall.ENOSYS
	}
	pa, _ := syscall.BytePtrFromString(a)
	pb, _ := syscall.BytePtrFromString(b)
	cwd := -100 // AT_FDCWD
	_, _, e := syscall.Syscall6(nr, uintptr(cwd), uintptr(unsafe.Pointer(pa)), uintptr(cwd), uintptr(unsafe.Pointer(pb)), 2 /* RENAME_EXCHANGE */, 0)
	if e != 0 {
		return e
	}
	return nil
}

func main() {
	switch os.Args[1] {
	case "sock":
		l, err := net.Listen("unix", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
	case "swap":
		a, b := os.Args[2], os.Args[3]
		fmt.Println("started")
		deadline := time.Now().Add(10 * time.Minute)
		n, renames := 0, false
		for ; ; n++ {
			if n%256 == 0 {
				if _, err := os.Stat("/tmp/hostile-stop"); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if !renames {
				if err := exchange(a, b); err != nil {
					fmt.Println("renameat2 refused, renaming instead:", err)
					renames = true
				}
				continue
			}
			os.Rename(a, a+".swap")
			os.Rename(b, a)
			os.Rename(a+".swap", b)
		}
		fmt.Println("swaps:", n)
	}
}
`

// buildHelper builds the helper as a static binary for the session.
func buildHelper(t *testing.T) string {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(helperSource), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hostilehelper\n\ngo 1.21\n"), 0o644))
	bin := filepath.Join(dir, "hh")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the session helper: %v\n%s", err, out)
	}
	return bin
}
