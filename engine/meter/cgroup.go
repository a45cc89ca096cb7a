package meter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/system"
)

// Driver is how Docker manages cgroups: by writing the cgroup files
// itself (cgroupfs) or by asking systemd for transient units (systemd).
type Driver string

const (
	Cgroupfs Driver = "cgroupfs"
	Systemd  Driver = "systemd"
)

// Layout is how this host's cgroups are set up, and so where a session's
// cgroup is and which files count its use.
type Layout struct {
	Driver Driver
	// Version is the cgroup version Docker uses: 1 (one hierarchy per
	// controller, as on hybrid hosts) or 2 (the unified hierarchy).
	Version int
	// Root is where the hierarchies are mounted: /sys/fs/cgroup (a
	// directory of controllers on v1, the unified hierarchy on v2).
	Root string
}

// DefaultRoot is where Linux mounts cgroups.
const DefaultRoot = "/sys/fs/cgroup"

// Docker is the one call of the Docker Engine API the meter makes; the
// real one is *client.Client.
type Docker interface {
	Info(ctx context.Context) (system.Info, error)
}

// Detect asks Docker which cgroup driver and version it uses. A daemon too
// old to say its version (before API 1.40) is on v1 unless root holds the
// unified hierarchy's cgroup.controllers.
func Detect(ctx context.Context, d Docker, root string) (Layout, error) {
	info, err := d.Info(ctx)
	if err != nil {
		return Layout{}, err
	}
	return layoutOf(info.CgroupDriver, info.CgroupVersion, root)
}

// layoutOf is the layout for what `docker info` says.
func layoutOf(driver, version, root string) (Layout, error) {
	l := Layout{Driver: Driver(driver), Root: root}
	switch l.Driver {
	case Cgroupfs, Systemd:
	default:
		return Layout{}, errdefs.Unavailablef("Docker manages cgroups with the %q driver: Airlock meters sessions under the cgroupfs or systemd driver (set `exec-opts: [\"native.cgroupdriver=systemd\"]` or cgroupfs in /etc/docker/daemon.json and restart Docker)", driver)
	}
	switch version {
	case "1":
		l.Version = 1
	case "2":
		l.Version = 2
	case "":
		l.Version = 1
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
			l.Version = 2
		}
	default:
		return Layout{}, errdefs.Unavailablef("Docker uses cgroup version %q: Airlock knows versions 1 and 2", version)
	}
	return l, nil
}

// Parent is the cgroup parent of a session's containers (HostConfig's
// CgroupParent). Under cgroupfs it is a path; under systemd a slice,
// which systemd nests by the dashes in its name: airlock-ID.slice lives
// in airlock.slice. Session ids are hex, so the id adds no level.
func (l Layout) Parent(id string) string {
	if l.Driver == Systemd {
		return "airlock-" + id + ".slice"
	}
	return "/airlock/" + id
}

// rel is the session's cgroup within a hierarchy.
func (l Layout) rel(id string) string {
	if l.Driver == Systemd {
		return filepath.Join("airlock.slice", "airlock-"+id+".slice")
	}
	return filepath.Join("airlock", id)
}

// dir is the session's cgroup directory: in the hierarchy of controller
// on v1 (found under any of its mount names, "cpuacct" may be mounted as
// "cpu,cpuacct"), in the unified hierarchy on v2.
func (l Layout) dir(id string, controller ...string) string {
	if l.Version == 2 {
		return filepath.Join(l.Root, l.rel(id))
	}
	for _, c := range controller {
		if _, err := os.Stat(filepath.Join(l.Root, c)); err == nil {
			return filepath.Join(l.Root, c, l.rel(id))
		}
	}
	return filepath.Join(l.Root, controller[0], l.rel(id))
}

// CPU is the CPU time a session's processes used, all its containers and
// execs together: cpuacct.usage on v1, cpu.stat's usage_usec on v2.
func (l Layout) CPU(id string) (time.Duration, error) {
	if l.Version == 2 {
		us, err := statField(filepath.Join(l.dir(id), "cpu.stat"), "usage_usec")
		return time.Duration(us) * time.Microsecond, err
	}
	ns, err := readInt(filepath.Join(l.dir(id, "cpuacct", "cpu,cpuacct", "cpuacct,cpu"), "cpuacct.usage"))
	return time.Duration(ns), err
}

// Procs lists the processes in a session's cgroups, its containers' and
// their execs' alike: every cgroup.procs at and below its cgroup (the
// memory controller's on v1). A session with no cgroup has none.
func (l Layout) Procs(id string) ([]int, error) {
	var out []int
	err := filepath.WalkDir(l.dir(id, "memory"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // removed meanwhile
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out, err
}

// Memory is what a session's cgroup holds in memory (its processes and
// its workspace's tmpfs pages), now and at most.
type Memory struct {
	Current int64
	// Peak is 0 where the kernel keeps none (v2 before Linux 5.19).
	Peak int64
}

// Memory reads a session's memory: memory.usage_in_bytes and
// memory.max_usage_in_bytes on v1, memory.current and memory.peak on v2.
func (l Layout) Memory(id string) (Memory, error) {
	cur, peak := "memory.usage_in_bytes", "memory.max_usage_in_bytes"
	if l.Version == 2 {
		cur, peak = "memory.current", "memory.peak"
	}
	dir := l.dir(id, "memory")
	var m Memory
	var err error
	if m.Current, err = readInt(filepath.Join(dir, cur)); err != nil {
		return Memory{}, err
	}
	if m.Peak, err = readInt(filepath.Join(dir, peak)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Memory{}, err
	}
	return m, nil
}

// Remove deletes a session's cgroups once its containers are gone; what
// is gone already is fine. Under systemd the slice is a unit, which
// systemd is asked to stop: by stop, or by systemctl when stop is nil.
// Under cgroupfs, processes still in the session's cgroups are killed
// first: Podman keeps each exec's conmon in PARENT/conmon for its
// exit_command_delay (300 s by default), after the container is gone.
func (l Layout) Remove(ctx context.Context, id string, stop func(ctx context.Context, unit string) error) error {
	if id == "" {
		return errdefs.Invalidf("remove the cgroups of a session with no id")
	}
	if l.Driver == Systemd {
		if stop == nil {
			stop = stopUnit
		}
		return stop(ctx, "airlock-"+id+".slice")
	}
	reap(l.dir(id, "pids", "cpuacct", "memory"))
	if l.Version == 2 {
		return removeTree(l.dir(id))
	}
	controllers, err := os.ReadDir(l.Root)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range controllers {
		if c.IsDir() { // "cpu" and "cpuacct" may be links to "cpu,cpuacct"
			errs = append(errs, removeTree(filepath.Join(l.Root, c.Name(), l.rel(id))))
		}
	}
	return errors.Join(errs...)
}

// reap kills the processes in the cgroups at and below dir, and waits
// (a second at most) until the kernel has taken them out.
func reap(dir string) {
	procs := func(kill bool) int {
		n := 0
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					n++
					if kill {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			return nil
		})
		return n
	}
	if procs(true) == 0 {
		return
	}
	for deadline := time.Now().Add(time.Second); procs(false) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// removeTree removes a cgroup and the cgroups below it, deepest first
// (a cgroup's own files go with it).
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeTree(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(append(errs, removeDir(dir))...)
}

func removeDir(dir string) error {
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// stopUnit asks systemd to stop a unit; one it does not know is fine.
func stopUnit(ctx context.Context, unit string) error {
	out, err := exec.CommandContext(ctx, "systemctl", "stop", unit).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "not loaded") {
		return fmt.Errorf("systemctl stop %s: %w: %s", unit, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// statField reads one "key value" line of a flat-keyed cgroup file.
func statField(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", path, key)
}
