package meter_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/meter"
)

// unifiedRoot is where this host mounts the cgroup v2 hierarchy
// (/sys/fs/cgroup on a v2 host, /sys/fs/cgroup/unified on a hybrid one).
func unifiedRoot(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		enginetest.Missing(t, "needs root to make cgroups")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		enginetest.Missing(t, err.Error())
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		if i := slices.Index(fields, "-"); i > 0 && i+1 < len(fields) && fields[i+1] == "cgroup2" && fields[3] == "/" {
			return fields[4]
		}
	}
	enginetest.Missing(t, "no cgroup v2 hierarchy is mounted (mount one with `mount -t cgroup2 none /sys/fs/cgroup/unified`)")
	return ""
}

// ownRoot is a cgroup of the test's own below a v2 hierarchy, standing in
// for the hierarchy's root: the engines of other tests keep their
// sessions in the real root's airlock/.
func ownRoot(t *testing.T, unified string) string {
	t.Helper()
	root := filepath.Join(unified, fmt.Sprintf("airlock-meter-test-%d", os.Getpid()))
	if err := os.Mkdir(root, 0o755); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(root) })
	return root
}

// runIn runs a shell script born in a v2 cgroup (clone3
// CLONE_INTO_CGROUP) and returns its output and how it ended.
func runIn(t *testing.T, cgroup, script string) (string, *os.ProcessState) {
	t.Helper()
	dir, err := os.Open(cgroup)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s in %s: %v", script, cgroup, err)
	}
	return string(out), cmd.ProcessState
}

// A session's CPU time read from a real cgroup v2 hierarchy, in each
// driver's layout: a process busy in a container's cgroup below the
// session's parent is counted, and the count stays once that cgroup is
// gone, as when a container is removed.
func TestCgroupV2CPU(t *testing.T) {
	root := unifiedRoot(t)
	for _, driver := range []meter.Driver{meter.Cgroupfs, meter.Systemd} {
		t.Run(string(driver), func(t *testing.T) {
			l := meter.Layout{Driver: driver, Version: 2, Root: ownRoot(t, root)}
			id := fmt.Sprintf("test%d%s", os.Getpid(), driver)
			parent := filepath.Join(l.Root, strings.TrimPrefix(l.Parent(id), "/"))
			if driver == meter.Systemd { // what systemd makes of airlock-ID.slice
				parent = filepath.Join(l.Root, "airlock.slice", l.Parent(id))
			}
			ctr := filepath.Join(parent, "docker-ctr.scope")
			if err := os.MkdirAll(ctr, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(ctr); os.Remove(parent); os.Remove(filepath.Dir(parent)) })
			// A loop of fixed work in the container's cgroup.
			_, ps := runIn(t, ctr, "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done")
			own := ps.UserTime() + ps.SystemTime()
			if err := os.Remove(ctr); err != nil {
				t.Fatalf("remove the container's cgroup: %v", err)
			}
			got, err := l.CPU(id)
			if err != nil {
				t.Fatal(err)
			}
			// The kernel's rusage is tick-based; the cgroup's count exact.
			if own < 100*time.Millisecond || got < own-20*time.Millisecond || got > own*2+50*time.Millisecond {
				t.Errorf("the session's cgroup counts %v for a loop that used %v", got, own)
			}
			t.Logf("%s: the session's cgroup counts %v, the loop's rusage %v", l.Parent(id), got, own)
		})
	}
}

// Memory on v2 needs the memory controller in the unified hierarchy; on
// a hybrid host it is bound to v1 and the unified one has no
// memory.current to read.
func TestCgroupV2Memory(t *testing.T) {
	root := unifiedRoot(t)
	ctrls, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(ctrls)), "memory") {
		t.Skipf("the memory controller is not in this host's v2 hierarchy (%s has %q): it is bound to cgroup v1", root, strings.TrimSpace(string(ctrls)))
	}
	own := ownRoot(t, root)
	for _, d := range []string{root, own} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
			t.Fatal(err)
		}
	}
	l := meter.Layout{Driver: meter.Cgroupfs, Version: 2, Root: own}
	id := fmt.Sprintf("testmem%d", os.Getpid())
	parent := filepath.Join(own, "airlock", id)
	ctr := filepath.Join(parent, "ctr")
	for _, d := range []string{filepath.Dir(parent), parent} {
		os.Mkdir(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(ctr, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(ctr); os.Remove(parent); os.Remove(filepath.Dir(parent)) })
	// 32 MiB held in a shell variable for a moment.
	if out, _ := runIn(t, ctr, `x=$(head -c 33554432 /dev/zero | tr '\0' a); echo ${#x}`); strings.TrimSpace(out) != "33554432" {
		t.Fatalf("the shell held %q bytes", out)
	}
	m, err := l.Memory(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(parent, "memory.peak")); err != nil {
		t.Skipf("this kernel keeps no memory.peak (Linux 5.19 and newer do): memory %+v", m)
	}
	if m.Peak < 32<<20 {
		t.Errorf("memory %+v: want a peak of at least 32 MiB", m)
	}
}
