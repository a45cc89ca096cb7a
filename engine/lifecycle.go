package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/criu"
	"github.com/airlock/airlock/engine/meter"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/container"
)

// Idle sessions are frozen (Docker's pause: the cgroup freezer) and new
// work thaws them. A session is idle only when no command or agent turn
// runs in it, no API call touched it, and its processes used less than
// idleCPU of a core, all for its whole idle timeout: a process busy in
// the background keeps it awake. Idle for the engine's HibernateAfter
// (default 2h), a session hibernates (hibernate.go), paused or not.

// DefaultIdleTimeout is how long a session may be idle before it pauses.
const DefaultIdleTimeout = 30 * time.Minute

// idleCPU is the share of one core under which a session counts as idle.
const idleCPU = 0.02

// activity is what the idle watcher knows of a session.
type activity struct {
	busy     int       // commands and turns running (through this engine)
	lastBusy time.Time // last time it was busy or touched
	// gate orders new work against the watcher's pauses: work marks
	// itself busy under it, and the watcher decides and pauses under it,
	// so work never starts in a session being paused (or hibernated).
	gate sync.Mutex
	// wake is held while the session wakes from hibernation.
	wake sync.Mutex
}

func (e *Engine) activityOf(id string) *activity {
	e.actMu.Lock()
	defer e.actMu.Unlock()
	if e.act == nil {
		e.act = map[string]*activity{}
	}
	a := e.act[id]
	if a == nil {
		a = &activity{lastBusy: time.Now()}
		e.act[id] = a
	}
	return a
}

// touch records that the session was used now.
func (e *Engine) touch(id string) {
	a := e.activityOf(id)
	e.actMu.Lock()
	a.lastBusy = time.Now()
	e.actMu.Unlock()
}

// working marks work running in the session until the returned func is
// called; a paused session is resumed first, a hibernated one woken. It
// returns the session's record as it is then.
func (e *Engine) working(ctx context.Context, id string) (store.Session, func(), error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return rec, nil, err
	}
	if why := e.overBudget(rec); why != "" {
		return rec, nil, errdefs.Conflictf("session %s reached %s: raise it with `airlock budget %s --cpu DURATION` or `--cost USD`", rec.ID, why, rec.ID)
	}
	if l := e.liveSession(rec.ID); l != nil {
		l.freeze.RLock() // a snapshot being taken: wait for the thaw
		l.freeze.RUnlock()
	}
	a := e.activityOf(rec.ID)
	a.gate.Lock()
	e.actMu.Lock()
	a.busy++
	a.lastBusy = time.Now()
	e.actMu.Unlock()
	a.gate.Unlock()
	// Busy now, so no pause comes after this look at the state; one that
	// came before it is undone.
	if cur, err := e.store.Session(ctx, rec.ID); err == nil {
		rec.State = cur.State
	}
	var err2 error
	switch rec.State {
	case api.StatePaused:
		if err2 = e.resume(ctx, rec.ID, rec.ContainerID, "new work"); err2 == nil {
			rec.State = api.StateRunning
		}
	case api.StateHibernated:
		rec, err2 = e.wake(ctx, rec.ID, "new work")
	}
	if err2 != nil {
		e.actMu.Lock()
		a.busy--
		e.actMu.Unlock()
		return rec, nil, err2
	}
	var once sync.Once
	return rec, func() {
		once.Do(func() {
			e.actMu.Lock()
			a.busy--
			a.lastBusy = time.Now()
			e.actMu.Unlock()
		})
	}, nil
}

// Pause freezes a session.
func (e *Engine) Pause(ctx context.Context, id string) error {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return err
	}
	return e.pause(ctx, rec.ID, rec.ContainerID, rec.State, "asked")
}

func (e *Engine) pause(ctx context.Context, id, containerID, state, reason string) error {
	switch state {
	case api.StatePaused:
		return nil
	case api.StateRunning:
	default:
		return errdefs.Conflictf("session %s is %s: only a running session pauses", id, state)
	}
	if err := e.freeze(ctx, containerID); err != nil {
		return dockerError("pause the session", err)
	}
	if err := e.store.SetSessionState(ctx, id, api.StatePaused, ""); err != nil {
		return err
	}
	e.log.Info("session paused", "session", id, "reason", reason)
	return e.store.AddLifecycle(ctx, id, "paused", reason, time.Now())
}

// freeze pauses a container, trying again a few times when the cgroup v1
// freezer gives up ("unable to freeze": runc stops waiting when a task is
// in uninterruptible sleep, as heavy writes to the workspace put them).
func (e *Engine) freeze(ctx context.Context, containerID string) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = e.docker.ContainerPause(ctx, containerID); err == nil || !strings.Contains(err.Error(), "unable to freeze") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try+1) * 50 * time.Millisecond):
		}
	}
	return err
}

// Resume thaws a paused session.
func (e *Engine) Resume(ctx context.Context, id string) error {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return err
	}
	if rec.State != api.StatePaused {
		return nil
	}
	return e.resume(ctx, rec.ID, rec.ContainerID, "asked")
}

func (e *Engine) resume(ctx context.Context, id, containerID, reason string) error {
	if err := e.docker.ContainerUnpause(ctx, containerID); err != nil {
		if derr := dockerError("resume the session", err); !errdefs.IsConflict(derr) { // not paused: fine
			return derr
		}
	}
	if err := e.store.SetSessionState(ctx, id, api.StateRunning, ""); err != nil {
		return err
	}
	e.touch(id)
	e.log.Info("session resumed", "session", id, "reason", reason)
	return e.store.AddLifecycle(ctx, id, "resumed", reason, time.Now())
}

// Lifecycle lists a session's pauses and resumes.
func (e *Engine) Lifecycle(ctx context.Context, id string) ([]api.LifecycleEvent, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.store.Lifecycle(ctx, rec.ID)
}

// watchIdle pauses idle sessions, looking every interval, until ctx ends.
func (e *Engine) watchIdle(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.checkIdle(ctx)
		}
	}
}

func (e *Engine) checkIdle(ctx context.Context) {
	recs, err := e.store.Sessions(ctx)
	if err != nil {
		return
	}
	now := time.Now()
	for _, r := range recs {
		if r.State == api.StatePaused {
			if r.IdleTimeout >= 0 { // not kept alive
				e.checkHibernate(ctx, r, now)
			}
			continue
		}
		if r.State != api.StateRunning {
			continue
		}
		timeout := r.IdleTimeout
		if timeout == 0 {
			timeout = e.defs().IdleTimeout
		}
		a := e.activityOf(r.ID)
		used, looked := e.meter.Look(r.ID, now)
		e.actMu.Lock()
		if looked && used >= idleCPU {
			a.lastBusy = now // a process is working in there
		}
		if a.busy > 0 {
			a.lastBusy = now
		}
		idleFor := now.Sub(a.lastBusy)
		e.actMu.Unlock()
		if why := e.overBudget(r); why != "" {
			if err := e.pause(ctx, r.ID, r.ContainerID, r.State, "reached "+why); err != nil {
				e.log.Warn("pause a session over budget", "session", r.ID, "err", err)
			}
			continue
		}
		if hib := e.hibernateAfter(r); timeout >= 0 && hib > 0 && idleFor >= hib && hib <= timeout {
			// Idle long enough to hibernate before it pauses. A session
			// kept alive (negative timeout) keeps its processes: it
			// neither pauses nor hibernates.
			e.checkHibernate(ctx, r, now)
			continue
		}
		if timeout >= 0 && idleFor >= timeout {
			a.gate.Lock()
			e.actMu.Lock()
			still := a.busy == 0 && time.Since(a.lastBusy) >= timeout
			e.actMu.Unlock()
			if still {
				if err := e.pause(ctx, r.ID, r.ContainerID, r.State, "idle for "+idleFor.Round(time.Second).String()); err != nil {
					e.log.Warn("pause an idle session", "session", r.ID, "err", err)
				}
			}
			a.gate.Unlock()
		}
	}
}

// checkHibernate hibernates session r, running or paused, once it has
// been idle for the engine's HibernateAfter. Its processes are kept only
// under HibernateKeepProcesses and where the host can; otherwise they
// stop (a background process using CPU keeps the session from counting
// as idle in the first place).
func (e *Engine) checkHibernate(ctx context.Context, r store.Session, now time.Time) {
	hib := e.hibernateAfter(r)
	if hib <= 0 {
		return
	}
	a := e.activityOf(r.ID)
	a.gate.Lock()
	defer a.gate.Unlock()
	e.actMu.Lock()
	idleFor := now.Sub(a.lastBusy)
	still := a.busy == 0 && idleFor >= hib
	e.actMu.Unlock()
	if !still {
		return
	}
	if cur, err := e.store.Session(ctx, r.ID); err != nil || cur.State != r.State {
		return
	}
	reason := "idle for " + idleFor.Round(time.Second).String()
	keep := e.defs().HibernateKeepProcesses
	if keep {
		if err := criu.Check(ctx, e.docker); err != nil {
			e.log.Warn("an idle session hibernates without its processes: the host cannot keep them", "session", r.ID, "err", err)
			keep = false
		}
	}
	err := e.hibernate(ctx, r, reason, keep)
	if err != nil && keep {
		e.log.Warn("an idle session hibernates without its processes", "session", r.ID, "err", err)
		err = e.hibernate(ctx, r, reason, false)
	}
	if err != nil {
		e.log.Warn("hibernate an idle session", "session", r.ID, "err", err)
	}
}

// hibernateAfter is how long session r may be idle before it hibernates
// (not positive: never).
func (e *Engine) hibernateAfter(r store.Session) time.Duration {
	if r.HibernateAfter != 0 {
		return r.HibernateAfter
	}
	return e.defs().HibernateAfter
}

// Meter reports what a session used.
func (e *Engine) Meter(ctx context.Context, id string) (api.Meter, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Meter{}, err
	}
	m := api.Meter{Session: rec.ID, Rate: e.defs().CostPerCoreHour}
	used, _ := e.meter.CPU(rec.ID) // 0 when unknown
	m.CPUSeconds, m.CostUSD = used.Seconds(), meter.Cost(used, m.Rate)
	if mem, err := e.meter.Memory(rec.ID); err == nil {
		m.MemoryPeak = mem.Peak
	}
	if l := e.liveSession(rec.ID); l != nil {
		if u, err := l.ws.Usage(); err == nil {
			m.WorkspaceBytes = u.Used
		}
	}
	m.EgressOut, m.EgressIn, _ = e.store.EgressBytes(ctx, rec.ID)
	m.CPUBudgetSeconds, m.CostBudget = rec.CPUBudget.Seconds(), rec.CostBudget
	m.History = []api.CPUSample{}
	for _, s := range e.meter.History(rec.ID) {
		m.History = append(m.History, api.CPUSample{Time: s.Time, CPUSeconds: s.CPU.Seconds()})
	}
	return m, nil
}

// idleFor is how long a session has been idle by the engine's measure (no
// work, no API call, its processes under the CPU threshold at the last
// look).
func (e *Engine) idleFor(id string) time.Duration {
	a := e.activityOf(id)
	e.actMu.Lock()
	defer e.actMu.Unlock()
	if a.busy > 0 {
		return 0
	}
	return time.Since(a.lastBusy)
}

// overBudget says, in words, which budget of the session its use has
// reached ("" if none).
func (e *Engine) overBudget(rec store.Session) string {
	b := meter.Budget{CPU: rec.CPUBudget, Cost: rec.CostBudget}
	if !b.Set() {
		return ""
	}
	used, err := e.meter.CPU(rec.ID)
	if err != nil {
		return ""
	}
	return b.Reached(used, e.defs().CostPerCoreHour)
}

// SetBudgets changes a session's budgets; if that leaves a session paused
// by a budget under its budgets, it resumes.
func (e *Engine) SetBudgets(ctx context.Context, id string, b api.Budgets) (api.Session, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Session{}, err
	}
	if b.CPU != nil {
		if *b.CPU < 0 {
			return api.Session{}, errdefs.Invalidf("a CPU budget must be positive (0 removes it)")
		}
		rec.CPUBudget = *b.CPU
	}
	if b.Cost != nil {
		if *b.Cost < 0 {
			return api.Session{}, errdefs.Invalidf("a cost budget must be positive (0 removes it)")
		}
		rec.CostBudget = *b.Cost
	}
	if err := e.store.SetBudgets(ctx, rec.ID, rec.CPUBudget, rec.CostBudget); err != nil {
		return api.Session{}, err
	}
	if rec.State == api.StatePaused && e.overBudget(rec) == "" {
		life, _ := e.store.Lifecycle(ctx, rec.ID)
		if n := len(life); n > 0 && strings.HasPrefix(life[n-1].Reason, "reached its") {
			if err := e.resume(ctx, rec.ID, rec.ContainerID, "budget raised"); err != nil {
				return api.Session{}, err
			}
		}
	}
	return e.Get(ctx, rec.ID)
}

// SetLimits changes a running session's limits: CPUs, memory and pids
// through Docker, the workspace size by resizing its tmpfs. Zero fields
// stay as they are.
func (e *Engine) SetLimits(ctx context.Context, id string, req api.Limits) (api.Session, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Session{}, err
	}
	if rec.State != api.StateRunning && rec.State != api.StatePaused {
		return api.Session{}, errdefs.Conflictf("session %s is %s: limits change on a running session", rec.ID, rec.State)
	}
	next := mergeLimits(req, rec.Limits)
	if err := checkLimits(next); err != nil {
		return api.Session{}, err
	}
	l := e.liveSession(rec.ID)
	if next.WorkspaceSize != rec.Limits.WorkspaceSize {
		if l == nil {
			return api.Session{}, errdefs.Conflictf("session %s's workspace is not mounted", rec.ID)
		}
		if err := l.ws.Resize(next.WorkspaceSize); err != nil {
			return api.Session{}, err
		}
	}
	pids := next.Pids
	// Only what Docker holds goes to Docker: Podman 4 has no update call,
	// and a workspace resize alone then still works.
	var updateErr error
	if next.CPUs != rec.Limits.CPUs || next.Memory != rec.Limits.Memory || next.Pids != rec.Limits.Pids {
		_, updateErr = e.docker.ContainerUpdate(ctx, rec.ContainerID, container.UpdateConfig{Resources: container.Resources{
			NanoCPUs: int64(next.CPUs * 1e9), Memory: next.Memory, MemorySwap: next.Memory, PidsLimit: &pids,
		}})
	}
	if updateErr != nil {
		if l != nil && next.WorkspaceSize != rec.Limits.WorkspaceSize {
			l.ws.Resize(rec.Limits.WorkspaceSize)
		}
		return api.Session{}, dockerError("change the session's limits (memory can only shrink to what it uses)", updateErr)
	}
	rec.Limits = next
	if err := e.store.PutSession(ctx, rec); err != nil {
		return api.Session{}, err
	}
	e.log.Info("session limits changed", "session", rec.ID, "limits", fmt.Sprintf("%+v", next))
	return e.Get(ctx, rec.ID)
}
