// Command mmapwrite is run inside a test's session: it maps a file shared
// and writable, closes it, waits, writes through the mapping (which makes
// no file event) and then holds the mapping until killed.
package main

import (
	"os"
	"syscall"
	"time"
)

func main() {
	f, err := os.OpenFile(os.Args[1], os.O_RDWR, 0)
	if err != nil {
		os.Exit(2)
	}
	fi, _ := f.Stat()
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		os.Exit(3)
	}
	f.Close()
	os.WriteFile("/tmp/mapped", nil, 0o644) // outside the workspace: no event
	time.Sleep(2 * time.Second)
	for i := range b {
		b[i] = "b\n"[i%2]
	}
	os.WriteFile("/tmp/written", nil, 0o644)
	for {
		time.Sleep(time.Hour)
	}
}
