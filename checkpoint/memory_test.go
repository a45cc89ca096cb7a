package checkpoint

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock/airlock/testenv"
	"golang.org/x/sys/unix"
)

// statusField reads a field of /proc/self/status in bytes.
func statusField(t *testing.T, name string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// A session of 100,000 small files: its checkpoint costs little memory
// while it is recorded, and none is kept afterwards (the engine keeps a
// store per session). The trees of the last checkpoint were all kept in
// memory once (about 400 bytes a file, for good), and every small file
// cost a temporary file even when its content was stored already.
func TestManyFilesInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 100,000 files on a tmpfs")
	}
	testenv.Root(t, "makes 100,000 files on a tmpfs")
	up := t.TempDir()
	must(t, unix.Mount("tmpfs", up, "tmpfs", 0, "size=512m"))
	t.Cleanup(func() { unix.Unmount(up, unix.MNT_DETACH) })
	for d := 0; d < 100; d++ {
		dir := filepath.Join(up, fmt.Sprintf("d%03d", d))
		must(t, os.Mkdir(dir, 0o755))
		for f := 0; f < 1000; f++ {
			must(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(f)), []byte(strconv.Itoa(f%10)), 0o644))
		}
	}
	s := openStore(t)
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	start := statusField(t, "VmRSS:")
	c, err := s.RecordDir(context.Background(), up, RecordOptions{Label: "many"})
	must(t, err)
	grew := statusField(t, "VmHWM:") - start
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("100,000 files: %d new objects, peak RSS +%d MiB, heap after %d MiB", c.Stats.NewObjects, grew>>20, ms.HeapInuse>>20)
	if c.Stats.NewObjects > 100+10+1 { // the trees, ten contents, the root
		t.Errorf("%d new objects for 100 directories of files holding 10 distinct contents", c.Stats.NewObjects)
	}
	if grew > 32<<20 {
		t.Errorf("the record took %d MiB more memory", grew>>20)
	}
	if ms.HeapInuse > 32<<20 {
		t.Errorf("%d MiB of heap in use after the record: the store keeps what it recorded", ms.HeapInuse>>20)
	}
	runtime.KeepAlive(s)
}
