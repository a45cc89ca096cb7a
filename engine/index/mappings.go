package index

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// WritableMappings says whether any of the processes pids holds a shared,
// writable memory mapping of a file on one of the devices devs (a
// workspace's tmpfs and its overlay): writes through one reach the file
// without an event, so while one exists no summary can be trusted.
// Processes that have gone are skipped.
func WritableMappings(pids []int, devs ...uint64) (bool, error) {
	want := map[string]bool{}
	for _, d := range devs {
		want[fmt.Sprintf("%02x:%02x", unix.Major(d), unix.Minor(d))] = true
	}
	for _, pid := range pids {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
		if err != nil {
			continue // gone
		}
		found, err := writableIn(f, want)
		f.Close()
		if found || err != nil {
			return found, err
		}
	}
	return false, nil
}

// writableIn reads one maps file: "ADDR PERMS OFFSET DEV INODE [PATH]".
func writableIn(f *os.File, devs map[string]bool) (bool, error) {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 5 {
			continue
		}
		perms := fields[1]
		if len(perms) < 4 || perms[1] != 'w' || perms[3] != 's' || string(fields[4]) == "0" {
			continue
		}
		if devs[string(fields[3])] {
			return true, nil
		}
	}
	return false, sc.Err()
}
