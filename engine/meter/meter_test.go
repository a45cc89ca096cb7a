package meter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/system"
)

// fakeDocker answers Info with what a daemon would say.
type fakeDocker struct {
	Docker
	info  system.Info
	err   error
	calls int
}

func (f *fakeDocker) Info(context.Context) (system.Info, error) {
	f.calls++
	return f.info, f.err
}

// write makes a cgroup file in a fake tree, with its directories.
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParentNames(t *testing.T) {
	for _, tc := range []struct {
		driver Driver
		parent string // what Docker is given
		rel    string // where the kernel has it, in each hierarchy
	}{
		// cgroupfs takes a path from the hierarchy's root.
		{Cgroupfs, "/airlock/0123456789ab", "airlock/0123456789ab"},
		// systemd takes only a slice, nested by the dashes of its name.
		{Systemd, "airlock-0123456789ab.slice", "airlock.slice/airlock-0123456789ab.slice"},
	} {
		for _, v := range []int{1, 2} {
			l := Layout{Driver: tc.driver, Version: v, Root: "/sys/fs/cgroup"}
			if got := l.Parent("0123456789ab"); got != tc.parent {
				t.Errorf("%s v%d: parent %q, want %q", tc.driver, v, got, tc.parent)
			}
			if got := l.rel("0123456789ab"); got != tc.rel {
				t.Errorf("%s v%d: the session's cgroup is at %q, want %q", tc.driver, v, got, tc.rel)
			}
		}
	}
	// dockerd under the systemd driver refuses a parent that is not
	// "NAME.slice"; no dash beyond the one that nests it in airlock.slice.
	p := Layout{Driver: Systemd}.Parent("0123456789ab")
	if !strings.HasSuffix(p, ".slice") || strings.Count(p, "-") != 1 || strings.Contains(p, "/") {
		t.Errorf("systemd parent %q", p)
	}
}

func TestLayoutFromDockerInfo(t *testing.T) {
	v2root := t.TempDir()
	write(t, filepath.Join(v2root, "cgroup.controllers"), "cpu memory pids\n")
	for _, tc := range []struct {
		name            string
		driver, version string
		root            string
		want            Layout
		err             errdefs.Class
	}{
		{"cgroupfs on a v1 host", "cgroupfs", "1", "/r", Layout{Cgroupfs, 1, "/r"}, ""},
		{"cgroupfs on a v2 host", "cgroupfs", "2", "/r", Layout{Cgroupfs, 2, "/r"}, ""},
		{"systemd on a v1 host", "systemd", "1", "/r", Layout{Systemd, 1, "/r"}, ""},
		{"systemd on a v2 host", "systemd", "2", "/r", Layout{Systemd, 2, "/r"}, ""},
		{"an old daemon on v1", "cgroupfs", "", t.TempDir(), Layout{Driver: Cgroupfs, Version: 1}, ""},
		{"an old daemon on v2", "systemd", "", v2root, Layout{Systemd, 2, v2root}, ""},
		{"no cgroups (rootless without them)", "none", "2", "/r", Layout{}, errdefs.Unavailable},
		{"a version from the future", "cgroupfs", "3", "/r", Layout{}, errdefs.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDocker{info: system.Info{CgroupDriver: tc.driver, CgroupVersion: tc.version}}
			got, err := Detect(context.Background(), d, tc.root)
			if tc.err != "" {
				if errdefs.ClassOf(err) != tc.err || !strings.Contains(err.Error(), tc.driver+`"`) && !strings.Contains(err.Error(), tc.version) {
					t.Fatalf("got %+v, %v: want a %s error naming what Docker said", got, err, tc.err)
				}
				return
			}
			if tc.want.Root == "" {
				tc.want.Root = tc.root
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v: want %+v", got, err, tc.want)
			}
		})
	}
}

// A fake cgroup tree as the kernel lays out each combination, with the
// session at 2.5 s of CPU, 40 MiB now and 64 MiB at most.
func TestReadEachLayout(t *testing.T) {
	const id = "0123456789ab"
	for _, tc := range []struct {
		name   string
		layout Layout
		files  map[string]string // relative to the root
	}{
		{"cgroupfs v1", Layout{Cgroupfs, 1, ""}, map[string]string{
			"cpuacct/airlock/" + id + "/cpuacct.usage":            "2500000000\n",
			"memory/airlock/" + id + "/memory.usage_in_bytes":     "41943040\n",
			"memory/airlock/" + id + "/memory.max_usage_in_bytes": "67108864\n",
		}},
		{"cgroupfs v1, cpu and cpuacct mounted together", Layout{Cgroupfs, 1, ""}, map[string]string{
			"cpu,cpuacct/airlock/" + id + "/cpuacct.usage":        "2500000000\n",
			"memory/airlock/" + id + "/memory.usage_in_bytes":     "41943040\n",
			"memory/airlock/" + id + "/memory.max_usage_in_bytes": "67108864\n",
		}},
		{"systemd v1", Layout{Systemd, 1, ""}, map[string]string{
			"cpuacct/airlock.slice/airlock-" + id + ".slice/cpuacct.usage":            "2500000000\n",
			"memory/airlock.slice/airlock-" + id + ".slice/memory.usage_in_bytes":     "41943040\n",
			"memory/airlock.slice/airlock-" + id + ".slice/memory.max_usage_in_bytes": "67108864\n",
		}},
		{"cgroupfs v2", Layout{Cgroupfs, 2, ""}, map[string]string{
			"airlock/" + id + "/cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
			"airlock/" + id + "/memory.current": "41943040\n",
			"airlock/" + id + "/memory.peak":    "67108864\n",
		}},
		{"systemd v2", Layout{Systemd, 2, ""}, map[string]string{
			"airlock.slice/airlock-" + id + ".slice/cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 0\n",
			"airlock.slice/airlock-" + id + ".slice/memory.current": "41943040\n",
			"airlock.slice/airlock-" + id + ".slice/memory.peak":    "67108864\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				write(t, filepath.Join(root, p), c)
			}
			l := tc.layout
			l.Root = root
			cpu, err := l.CPU(id)
			if err != nil || cpu != 2500*time.Millisecond {
				t.Errorf("CPU %v, %v: want 2.5s", cpu, err)
			}
			mem, err := l.Memory(id)
			if err != nil || mem != (Memory{Current: 40 << 20, Peak: 64 << 20}) {
				t.Errorf("memory %+v, %v: want 40 MiB now, 64 MiB peak", mem, err)
			}
			if _, err := l.CPU("ba9876543210"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("another session's CPU: %v, want not found", err)
			}
		})
	}
}

// Before Linux 5.19 a v2 cgroup has no memory.peak: the peak is unknown,
// not an error; a cpu.stat without usage_usec is one.
func TestReadV2Gaps(t *testing.T) {
	root := t.TempDir()
	l := Layout{Cgroupfs, 2, root}
	write(t, filepath.Join(root, "airlock/s1/memory.current"), "4096\n")
	write(t, filepath.Join(root, "airlock/s1/cpu.stat"), "nr_periods 0\n")
	if m, err := l.Memory("s1"); err != nil || m != (Memory{Current: 4096}) {
		t.Errorf("memory without memory.peak: %+v, %v", m, err)
	}
	if _, err := l.CPU("s1"); err == nil || !strings.Contains(err.Error(), "usage_usec") {
		t.Errorf("cpu.stat without usage_usec: %v", err)
	}
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	noStop := func(_ context.Context, unit string) error {
		t.Errorf("systemctl stop %s under cgroupfs", unit)
		return nil
	}
	t.Run("cgroupfs v1: every controller", func(t *testing.T) {
		root := t.TempDir()
		for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "freezer"} {
			os.MkdirAll(filepath.Join(root, c, "airlock", "s1"), 0o755)
			os.MkdirAll(filepath.Join(root, c, "airlock", "s2"), 0o755)
		}
		l := Layout{Cgroupfs, 1, root}
		if err := l.Remove(ctx, "s1", noStop); err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "freezer"} {
			if _, err := os.Stat(filepath.Join(root, c, "airlock", "s1")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s/airlock/s1 left behind", c)
			}
			if _, err := os.Stat(filepath.Join(root, c, "airlock", "s2")); err != nil {
				t.Errorf("another session's %s cgroup went: %v", c, err)
			}
		}
		if err := l.Remove(ctx, "s1", noStop); err != nil {
			t.Errorf("removing again: %v", err)
		}
	})
	t.Run("cgroupfs v2", func(t *testing.T) {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "airlock", "s1"), 0o755)
		if err := (Layout{Cgroupfs, 2, root}).Remove(ctx, "s1", noStop); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "airlock", "s1")); !errors.Is(err, os.ErrNotExist) {
			t.Error("airlock/s1 left behind")
		}
	})
	t.Run("systemd: the slice is stopped, not removed by hand", func(t *testing.T) {
		for _, v := range []int{1, 2} {
			root := t.TempDir()
			dir := filepath.Join(root, "airlock.slice", "airlock-s1.slice")
			os.MkdirAll(dir, 0o755)
			var stopped []string
			stop := func(_ context.Context, unit string) error { stopped = append(stopped, unit); return nil }
			if err := (Layout{Systemd, v, root}).Remove(ctx, "s1", stop); err != nil {
				t.Fatal(err)
			}
			if len(stopped) != 1 || stopped[0] != "airlock-s1.slice" {
				t.Errorf("v%d stopped %q, want airlock-s1.slice", v, stopped)
			}
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("v%d: the slice's directory is systemd's to remove: %v", v, err)
			}
		}
	})
}

// The meter asks Docker once it answers, and again after it did not.
func TestMeterAsksDockerUntilItAnswers(t *testing.T) {
	ctx := context.Background()
	d := &fakeDocker{err: errors.New("Cannot connect to the Docker daemon")}
	m := New(d, t.TempDir())
	if _, err := m.CgroupParent(ctx, "s1"); err == nil {
		t.Fatal("a parent without Docker")
	}
	if _, err := m.CPU("s1"); !errors.Is(err, ErrUnknownLayout) {
		t.Errorf("CPU before Docker answered: %v", err)
	}
	d.err, d.info = nil, system.Info{CgroupDriver: "systemd", CgroupVersion: "2"}
	for range 3 {
		if p, err := m.CgroupParent(ctx, "s1"); err != nil || p != "airlock-s1.slice" {
			t.Fatalf("parent %q, %v", p, err)
		}
	}
	if d.calls != 2 {
		t.Errorf("Docker was asked %d times: want once more after it answered, then never", d.calls)
	}
}

// Look gives the share of a core used between looks, keeps the history
// bounded, and Remove forgets it.
func TestLook(t *testing.T) {
	root := t.TempDir()
	d := &fakeDocker{info: system.Info{CgroupDriver: "cgroupfs", CgroupVersion: "1"}}
	m := New(d, root)
	if _, err := m.Layout(context.Background()); err != nil {
		t.Fatal(err)
	}
	usage := filepath.Join(root, "cpuacct", "airlock", "s1", "cpuacct.usage")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	set := func(ns int64) { write(t, usage, strconv.FormatInt(ns, 10)+"\n") }

	if _, ok := m.Look("s1", t0); ok {
		t.Error("a share from a session with no cgroup")
	}
	set(1e9)
	if _, ok := m.Look("s1", t0); ok {
		t.Error("a share on the first look")
	}
	set(1e9 + 5e8) // half a core for a second
	if share, ok := m.Look("s1", t0.Add(time.Second)); !ok || share != 0.5 {
		t.Errorf("share %v, %v: want 0.5", share, ok)
	}
	h := m.History("s1")
	if len(h) != 2 || h[1].CPU != 1500*time.Millisecond || !h[1].Time.Equal(t0.Add(time.Second)) {
		t.Errorf("history %+v", h)
	}
	for i := range HistoryLen + 10 {
		set(int64(2e9 + i))
		m.Look("s1", t0.Add(time.Duration(i+2)*time.Second))
	}
	if h := m.History("s1"); len(h) != HistoryLen || h[len(h)-1].CPU != time.Duration(2e9+HistoryLen+9) {
		t.Errorf("after many looks the history holds %d samples (last %v): want the last %d", len(h), h[len(h)-1], HistoryLen)
	}
	os.Remove(usage) // a real cgroup's files go with its directory
	if err := m.Remove(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	if h := m.History("s1"); len(h) != 0 {
		t.Errorf("a removed session keeps %d samples", len(h))
	}
}

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		budget Budget
		used   time.Duration
		rate   float64
		want   string // "" or a part of the reason
	}{
		{Budget{}, time.Hour, 0.10, ""},
		{Budget{CPU: time.Minute}, 59 * time.Second, 0.10, ""},
		{Budget{CPU: time.Minute}, time.Minute, 0.10, "its CPU budget (1m0s used of 1m0s)"},
		{Budget{Cost: 0.10}, 59 * time.Minute, 0.10, ""},
		{Budget{Cost: 0.10}, time.Hour, 0.10, "its cost budget ($0.1000 of $0.10)"},
		{Budget{Cost: 0.10}, time.Hour, 0.20, "its cost budget ($0.2000 of $0.10)"},
		{Budget{CPU: time.Hour, Cost: 0.01}, 10 * time.Minute, 0.10, "its cost budget"},
	} {
		got := tc.budget.Reached(tc.used, tc.rate)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%+v after %v at $%.2f/core-hour: %q, want %q", tc.budget, tc.used, tc.rate, got, tc.want)
		}
	}
	if c := Cost(90*time.Minute, 0.10); c < 0.1499 || c > 0.1501 {
		t.Errorf("90 core-minutes at $0.10 an hour cost %v", c)
	}
}
