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
