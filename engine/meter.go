package engine

import (
	"context"
	"time"

	"github.com/airlock/airlock/engine/meter"
)

// Meter is what the session core asks of engine/meter, declared by its
// consumer; the real one is *meter.Meter.
type Meter interface {
	// CgroupParent is the cgroup parent of a session's containers, as
	// the host's Docker takes it (a path under cgroupfs, a slice under
	// systemd).
	CgroupParent(ctx context.Context, id string) (string, error)
	// CPU is the CPU time the session used so far, across containers.
	CPU(id string) (time.Duration, error)
	// Memory is the session's memory now and at most.
	Memory(id string) (meter.Memory, error)
	// Procs lists the session's processes, its containers' and their
	// execs' (none when it has no cgroup).
	Procs(id string) ([]int, error)
	// Look samples the session's CPU for the idle watcher: the share of
	// a core used since the previous look (ok false on the first).
	Look(id string, now time.Time) (share float64, ok bool)
	// History is the session's recent samples, oldest first.
	History(id string) []meter.Sample
	// Remove deletes the session's cgroups once its containers are gone.
	Remove(ctx context.Context, id string) error
}

var _ Meter = (*meter.Meter)(nil)

// sessionCPU is the session's CPU ns so far (0 if unknown).
func (e *Engine) sessionCPU(id string) int64 {
	d, _ := e.meter.CPU(id)
	return int64(d)
}

// SessionUse is one session's state and what it used so far.
type SessionUse struct {
	ID    string
	State string
	CPU   time.Duration
	// Memory is zero when the session's cgroup cannot be read (a session
	// with no container).
	Memory              meter.Memory
	EgressOut, EgressIn int64 // bytes through the session's proxy
}

// Usage lists every session's state and use: what the engine's metrics
// show. Unlike List it reads no workspace, so a scrape costs little.
func (e *Engine) Usage(ctx context.Context) ([]SessionUse, error) {
	recs, err := e.store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SessionUse, 0, len(recs))
	for _, r := range recs {
		u := SessionUse{ID: r.ID, State: r.State}
		u.CPU, _ = e.meter.CPU(r.ID)
		u.Memory, _ = e.meter.Memory(r.ID)
		if u.EgressOut, u.EgressIn, err = e.store.EgressBytes(ctx, r.ID); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
