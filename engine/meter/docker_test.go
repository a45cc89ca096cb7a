package meter_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/meter"
	"github.com/airlock/airlock/testenv"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// burn is a loop of fixed work that prints its own CPU time in clock
// ticks (utime + stime from /proc), whatever the load.
var burn = []string{"sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; cat /proc/$$/stat"}

// runBurn runs burn in a container under parent and removes it, as a
// session's exec ends; it returns the CPU time the loop reported.
func runBurn(t *testing.T, d *client.Client, parent string) time.Duration {
	t.Helper()
	ctx := context.Background()
	c, err := d.ContainerCreate(ctx, &container.Config{Image: enginetest.Image, Cmd: burn, Entrypoint: []string{}},
		&container.HostConfig{NetworkMode: "none", Resources: container.Resources{CgroupParent: parent}}, nil, nil, "")
	if err != nil {
		t.Fatalf("create a container under %s: %v", parent, err)
	}
	defer d.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	if err := d.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start a container under %s: %v", parent, err)
	}
	waitc, errc := d.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-waitc:
	case err := <-errc:
		t.Fatal(err)
	}
	logs, err := d.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, logs)
	logs.Close()
	f := strings.Fields(out.String())
	if len(f) < 15 {
		t.Fatalf("the loop's stat: %q", out.String())
	}
	ut, _ := strconv.Atoi(f[13])
	st, _ := strconv.Atoi(f[14])
	if err := d.ContainerRemove(ctx, c.ID, container.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// counts checks that a session's cgroup counted the loop: at least what
// the loop reported (its ticks are rounded down), not wildly more.
func counts(t *testing.T, what string, got, loop time.Duration) {
	t.Helper()
	if loop < 100*time.Millisecond || got < loop || got > loop*2+100*time.Millisecond {
		t.Errorf("%s counts %v for a loop that used %v", what, got, loop)
	}
}

// The host's Docker, as detected, takes the session's parent, and the
// meter reads the session's CPU after its container is gone. On a hybrid
// host runc also makes the session's cgroup in the unified (v2)
// hierarchy, where the kernel counts CPU without the cpu controller: the
// v2 reading agrees with the v1 one.
func TestHostDocker(t *testing.T) {
	d := enginetest.Require(t)
	enginetest.TinyImage(t, d)
	ctx := context.Background()
	l, err := meter.Detect(ctx, d, meter.DefaultRoot)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%012x", time.Now().UnixNano()&0xffffffffffff)
	t.Cleanup(func() { l.Remove(ctx, id, nil) })
	loop := runBurn(t, d, l.Parent(id))
	got, err := l.CPU(id)
	if err != nil {
		t.Fatal(err)
	}
	counts(t, fmt.Sprintf("%s v%d", l.Driver, l.Version), got, loop)
	if m, err := l.Memory(id); err != nil || m.Peak <= 0 {
		t.Errorf("memory %+v, %v", m, err)
	}
	t.Logf("%s, cgroup v%d: parent %s counts %v for a loop of %v", l.Driver, l.Version, l.Parent(id), got, loop)

	if l.Version == 2 || l.Driver != meter.Cgroupfs {
		return
	}
	unified := filepath.Join(meter.DefaultRoot, "unified")
	if _, err := os.Stat(filepath.Join(unified, "cgroup.controllers")); err != nil {
		t.Logf("not a hybrid host: no v2 hierarchy at %s", unified)
		return
	}
	v2 := meter.Layout{Driver: meter.Cgroupfs, Version: 2, Root: unified}
	got2, err := v2.CPU(id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := got2 - got; diff < -got/100 || diff > got/100 {
		t.Errorf("the v2 hierarchy counts %v, the v1 one %v: want within 1%%", got2, got)
	}
	t.Logf("hybrid host: the unified hierarchy counts %v", got2)
	if err := l.Remove(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(meter.DefaultRoot, "cpuacct", "airlock", id), filepath.Join(unified, "airlock", id)} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is left after Remove: %v", dir, err)
		}
	}
}

// dockerd starts a second Docker daemon of the test's own, with prelude
// run before it, and returns its client. The daemon has its own data
// root and sockets, and its own mount and network namespaces: with
// --bridge=none a dockerd deletes the docker0 bridge it finds, which in
// the host's network namespace is the host daemon's.
func dockerd(t *testing.T, prelude string, args ...string) *client.Client {
	t.Helper()
	enginetest.Require(t)
	bin, err := exec.LookPath("dockerd")
	if err != nil {
		testenv.Missing(t, "no dockerd to start a second daemon with")
	}
	dir, err := os.MkdirTemp("", "airlock-dockerd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	script := "mount --make-rprivate / && " + prelude + ` exec "$0" "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--net", "sh", "-c", script, bin,
		"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "pid"), "-H", "unix://" + sock,
		"--bridge=none", "--iptables=false", "--ip6tables=false"}, args...)...)
	t.Cleanup(func() { os.RemoveAll(dir) }) // once the daemon is stopped
	d, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Serve(t, "the second dockerd", cmd, d)
	enginetest.TinyImage(t, d)
	return d
}

// Docker under the systemd driver, on this host's v1 hierarchy: the
// meter detects it and names a slice, which dockerd takes where it
// refuses a path. Without systemd as PID 1 runc cannot start the
// container ("systemd not running on this host"), which is as far as
// this machine goes.
func TestSystemdDriver(t *testing.T) {
	d := dockerd(t, "", "--exec-opt", "native.cgroupdriver=systemd")
	ctx := context.Background()
	l, err := meter.Detect(ctx, d, meter.DefaultRoot)
	if err != nil {
		t.Fatal(err)
	}
	if l.Driver != meter.Systemd {
		t.Fatalf("detected %+v: want the systemd driver", l)
	}
	create := func(parent string) (string, error) {
		c, err := d.ContainerCreate(ctx, &container.Config{Image: enginetest.Image, Cmd: []string{"true"}},
			&container.HostConfig{NetworkMode: "none", Resources: container.Resources{CgroupParent: parent}}, nil, nil, "")
		if err == nil {
			t.Cleanup(func() { d.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) })
		}
		return c.ID, err
	}
	if _, err := create(meter.Layout{Driver: meter.Cgroupfs}.Parent("0123456789ab")); err == nil || !strings.Contains(err.Error(), "slice") {
		t.Errorf("a path parent under systemd: %v, want refused", err)
	}
	cid, err := create(l.Parent("0123456789ab"))
	if err != nil {
		t.Fatalf("the meter's parent %s under systemd: %v", l.Parent("0123456789ab"), err)
	}
	err = d.ContainerStart(ctx, cid, container.StartOptions{})
	if _, statErr := os.Stat("/run/systemd/system"); statErr == nil {
		if err != nil {
			t.Fatalf("start under systemd: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "systemd not running") {
		t.Errorf("start without systemd running: %v", err)
	}
	t.Logf("without systemd as PID 1: %v", err)
}

// Docker on cgroup v2: a second dockerd that sees the unified hierarchy
// at /sys/fs/cgroup (mounted there in its own mount namespace). The
// meter detects v2, and reads the session's CPU from cpu.stat through
// the host's mount of the same hierarchy after the container is gone.
// On a hybrid host the controllers stay bound to v1, so this daemon can
// set no memory or CPU limits: only the accounting is tested.
func TestCgroupV2Docker(t *testing.T) {
	unified := unifiedRoot(t)
	if unified == meter.DefaultRoot {
		t.Skip("this host is cgroup v2 already: TestHostDocker covers it")
	}
	d := dockerd(t, "umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup &&")
	ctx := context.Background()
	l, err := meter.Detect(ctx, d, meter.DefaultRoot)
	if err != nil {
		t.Fatal(err)
	}
	if l != (meter.Layout{Driver: meter.Cgroupfs, Version: 2, Root: meter.DefaultRoot}) {
		t.Fatalf("detected %+v: want cgroupfs on v2", l)
	}
	id := fmt.Sprintf("%012x", time.Now().UnixNano()&0xffffffffffff)
	host := meter.Layout{Driver: l.Driver, Version: 2, Root: unified} // the daemon's /sys/fs/cgroup, seen from here
	t.Cleanup(func() { host.Remove(ctx, id, nil) })
	loop := runBurn(t, d, l.Parent(id))
	got, err := host.CPU(id)
	if err != nil {
		t.Fatal(err)
	}
	counts(t, "cgroupfs v2", got, loop)
	t.Logf("cgroup v2 dockerd: parent %s counts %v for a loop of %v", l.Parent(id), got, loop)
	if err := host.Remove(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(unified, "airlock", id)); !os.IsNotExist(err) {
		t.Errorf("the session's cgroup is left after Remove: %v", err)
	}
}
