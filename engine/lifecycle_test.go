package engine_test

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

func state(t *testing.T, e *enginetest.Engine, id string) string {
	t.Helper()
	s, err := e.Get(context.Background(), id)
	must(t, err)
	return s.State
}

// A paused session stays paused across an engine restart, reading its
// diff does not wake it, and new work does.
func TestPauseResume(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo a > a.txt")
	must(t, e.Pause(ctx, s.ID))
	if st := state(t, e, s.ID); st != api.StatePaused {
		t.Fatalf("state %s after pause", st)
	}
	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	if st := state(t, e2, s.ID); st != api.StatePaused {
		t.Fatalf("state %s after an engine restart", st)
	}
	if d, err := e2.Diff(ctx, s.ID, nil); err != nil || len(d.Files) != 1 {
		t.Fatalf("diff of a paused session: %v, %v", d, err)
	}
	if st := state(t, e2, s.ID); st != api.StatePaused {
		t.Fatalf("reading the diff woke the session: %s", st)
	}
	if _, out := run(t, e2, s.ID, "cat", "a.txt"); out != "a\n" {
		t.Fatalf("exec on a paused session: %q", out)
	}
	if st := state(t, e2, s.ID); st != api.StateRunning {
		t.Fatalf("state %s after new work", st)
	}
	life, err := e2.Lifecycle(ctx, s.ID)
	must(t, err)
	if len(life) != 2 || life[0].Kind != "paused" || life[1].Kind != "resumed" || life[1].Reason != "new work" {
		t.Fatalf("lifecycle %+v", life)
	}
}

// An idle session pauses; one with a process working in the background
// does not, nor one kept alive.
func TestIdlePause(t *testing.T) {
	e := enginetest.Start(t, func(o *engine.Options) { o.IdleCheck = 200 * time.Millisecond })
	ctx := context.Background()
	idle, err := e.Create(ctx, api.CreateRequest{Project: project(t), IdleTimeout: time.Second})
	must(t, err)
	busy, err := e.Create(ctx, api.CreateRequest{Project: project(t), IdleTimeout: time.Second})
	must(t, err)
	kept, err := e.Create(ctx, api.CreateRequest{Project: project(t), IdleTimeout: -1})
	must(t, err)
	// A background process that keeps working after its command ended.
	run(t, e, busy.ID, "sh", "-c", "(timeout 8 sh -c 'while :; do :; done' >/dev/null 2>&1 &) ; true")
	deadline := time.Now().Add(6 * time.Second)
	for state(t, e, idle.ID) != api.StatePaused && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if st := state(t, e, idle.ID); st != api.StatePaused {
		t.Fatalf("the idle session is %s", st)
	}
	if st := state(t, e, busy.ID); st != api.StateRunning {
		t.Errorf("a session with a busy process was paused")
	}
	if st := state(t, e, kept.ID); st != api.StateRunning {
		t.Errorf("a session kept alive was paused")
	}
	life, _ := e.Lifecycle(ctx, idle.ID)
	if len(life) != 1 || !strings.HasPrefix(life[0].Reason, "idle for") {
		t.Errorf("lifecycle %+v", life)
	}
}

// The meter's CPU time is the session's cgroup's own count, kept after
// the burning process is gone.
func TestMeterCPU(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), IdleTimeout: -1})
	must(t, err)
	// A known amount of CPU: a loop of fixed work, which reports its own
	// CPU time (utime and stime, in ticks) from /proc, whatever the load.
	_, stat := run(t, e, s.ID, "sh", "-c", "i=0; while [ $i -lt 600000 ]; do i=$((i+1)); done; cat /proc/$$/stat")
	f := strings.Fields(stat)
	if len(f) < 15 {
		t.Fatalf("stat %q", stat)
	}
	ut, _ := strconv.Atoi(f[13])
	st, _ := strconv.Atoi(f[14])
	burnt := float64(ut+st) / 100
	m, err := e.Meter(ctx, s.ID)
	must(t, err)
	var own float64
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/airlock/" + s.ID + "/cpuacct.usage"); err == nil { // cgroup v1
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		own = float64(ns) / 1e9
	} else { // v2
		b, err := os.ReadFile("/sys/fs/cgroup/airlock/" + s.ID + "/cpu.stat")
		must(t, err)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				us, _ := strconv.ParseInt(v, 10, 64)
				own = float64(us) / 1e6
			}
		}
	}
	if math.Abs(m.CPUSeconds-own)/own > 0.01 {
		t.Fatalf("metered %.3f s, the cgroup counts %.3f s: want within 1%%", m.CPUSeconds, own)
	}
	// The session's cgroup holds the loop, plus the shell's start, cat and
	// the container's own processes (its init serving the command), which
	// take more on a loaded machine (0.77 s for a 0.63 s loop at load 10).
	if burnt < 0.3 || m.CPUSeconds < burnt-0.01 || m.CPUSeconds > burnt*1.1+0.25 {
		t.Fatalf("metered %.3f s for a loop that used %.2f s", m.CPUSeconds, burnt)
	}
	if m.MemoryPeak <= 0 || m.CostUSD <= 0 || m.Rate != 0.10 {
		t.Errorf("meter %+v", m)
	}
	cmds, err := e.Commands(ctx, s.ID, false)
	must(t, err)
	if len(cmds) != 1 || cmds[0].CPUSeconds < burnt-0.01 || cmds[0].CPUSeconds > own*1.01 {
		t.Errorf("the command's CPU: %+v (the session used %.3f s)", cmds, own)
	}
}

// A session that reaches its CPU budget pauses and refuses new work
// until the budget is raised, which resumes it.
func TestCPUBudget(t *testing.T) {
	e := enginetest.Start(t, func(o *engine.Options) { o.IdleCheck = 100 * time.Millisecond })
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), IdleTimeout: -1, CPUBudget: 300 * time.Millisecond})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "(timeout 5 sh -c 'while :; do :; done' >/dev/null 2>&1 &); true")
	deadline := time.Now().Add(5 * time.Second)
	for state(t, e, s.ID) != api.StatePaused && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if st := state(t, e, s.ID); st != api.StatePaused {
		t.Fatalf("over its budget the session is %s", st)
	}
	_, err = e.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"true"}}, engine.ExecIO{})
	if err == nil || !strings.Contains(err.Error(), "airlock budget") {
		t.Fatalf("new work over budget: %v", err)
	}
	more := time.Hour
	got, err := e.SetBudgets(ctx, s.ID, api.Budgets{CPU: &more})
	must(t, err)
	if got.State != api.StateRunning {
		t.Fatalf("after raising the budget: %s", got.State)
	}
	if code, _ := run(t, e, s.ID, "true"); code != 0 {
		t.Errorf("exec after raising the budget: %d", code)
	}
	life, _ := e.Lifecycle(ctx, s.ID)
	if len(life) < 2 || !strings.Contains(life[0].Reason, "CPU budget") || life[1].Reason != "budget raised" {
		t.Errorf("lifecycle %+v", life)
	}
}

// Limits change on a running session: the workspace grows in place (and
// refuses to shrink below what is written), CPUs, memory and pids through
// Docker.
func TestSetLimits(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Limits: api.Limits{WorkspaceSize: 8 << 20, Memory: 256 << 20}})
	must(t, err)
	if code, _ := run(t, e, s.ID, "sh", "-c", "dd if=/dev/zero of=big bs=1M count=12 2>/dev/null"); code == 0 {
		t.Fatalf("12 MiB fit in an 8 MiB workspace")
	}
	got, err := e.SetLimits(ctx, s.ID, api.Limits{WorkspaceSize: 32 << 20, CPUs: 0.5, Pids: 64})
	must(t, err)
	if got.Limits.WorkspaceSize != 32<<20 || got.Limits.CPUs != 0.5 || got.Limits.Pids != 64 || got.Limits.Memory != 256<<20 {
		t.Fatalf("limits %+v", got.Limits)
	}
	if code, out := run(t, e, s.ID, "sh", "-c", "rm -f big; dd if=/dev/zero of=big bs=1M count=12 2>&1"); code != 0 {
		t.Fatalf("12 MiB in the grown workspace: %d %q", code, out)
	}
	ins, err := e.Docker.ContainerInspect(ctx, got.ContainerID)
	must(t, err)
	if ins.HostConfig.NanoCPUs != 5e8 || *ins.HostConfig.PidsLimit != 64 {
		t.Errorf("Docker has cpus %d, pids %d", ins.HostConfig.NanoCPUs, *ins.HostConfig.PidsLimit)
	}
	if _, err := e.SetLimits(ctx, s.ID, api.Limits{WorkspaceSize: 4 << 20}); err == nil || !strings.Contains(err.Error(), "already wrote") {
		t.Errorf("shrinking below what is written: %v", err)
	}
	if _, err := e.SetLimits(ctx, s.ID, api.Limits{Memory: 16 << 20}); err == nil {
		t.Errorf("memory below the workspace was accepted")
	}
}
