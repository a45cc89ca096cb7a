package meter

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Meter measures sessions on one host. It learns the host's cgroup
// layout from Docker when first asked (and again after a failed ask, so
// an engine started before Docker still meters once Docker is up), and
// keeps each session's recent CPU samples. It is safe for concurrent use.
type Meter struct {
	docker Docker
	root   string
	stop   func(ctx context.Context, unit string) error // nil: systemctl

	mu     sync.Mutex
	layout *Layout // nil until Docker said
	looks  map[string]*looks
}

// looks are a session's CPU samples, oldest first.
type looks struct {
	samples []Sample
}

// Sample is a session's total CPU time at one moment.
type Sample struct {
	Time time.Time
	CPU  time.Duration
}

// HistoryLen is how many samples a session keeps: an hour at the idle
// watcher's default interval of 10 s.
const HistoryLen = 360

// ErrUnknownLayout is returned by reads before Docker said how its
// cgroups are set up.
var ErrUnknownLayout = errors.New("the host's cgroup layout is not known yet: Docker has not answered")

// New returns a meter over cgroups mounted at root (DefaultRoot on a real
// host), asking d how Docker uses them.
func New(d Docker, root string) *Meter {
	return &Meter{docker: d, root: root, looks: map[string]*looks{}}
}

// Layout is the host's cgroup layout, asking Docker if it has not said
// yet.
func (m *Meter) Layout(ctx context.Context) (Layout, error) {
	m.mu.Lock()
	known := m.layout
	m.mu.Unlock()
	if known != nil {
		return *known, nil
	}
	l, err := Detect(ctx, m.docker, m.root)
	if err != nil {
		return Layout{}, err
	}
	m.mu.Lock()
	m.layout = &l
	m.mu.Unlock()
	return l, nil
}

// known is the layout if Docker said it already.
func (m *Meter) known() (Layout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.layout == nil {
		return Layout{}, ErrUnknownLayout
	}
	return *m.layout, nil
}

// CgroupParent is the cgroup parent for a session's containers.
func (m *Meter) CgroupParent(ctx context.Context, id string) (string, error) {
	l, err := m.Layout(ctx)
	if err != nil {
		return "", err
	}
	return l.Parent(id), nil
}

// CPU is a session's CPU time so far (see Layout.CPU).
func (m *Meter) CPU(id string) (time.Duration, error) {
	l, err := m.known()
	if err != nil {
		return 0, err
	}
	return l.CPU(id)
}

// Procs lists the processes in a session's cgroups (see Layout.Procs).
func (m *Meter) Procs(id string) ([]int, error) {
	l, err := m.known()
	if err != nil {
		return nil, err
	}
	return l.Procs(id)
}

// Memory is a session's memory now and at most (see Layout.Memory).
func (m *Meter) Memory(id string) (Memory, error) {
	l, err := m.known()
	if err != nil {
		return Memory{}, err
	}
	return l.Memory(id)
}

// Look reads a session's CPU time, keeps it as a sample and returns the
// share of one core the session used since the previous look (ok is
// false on the first look, or when the cgroup cannot be read).
func (m *Meter) Look(id string, now time.Time) (share float64, ok bool) {
	cpu, err := m.CPU(id)
	if err != nil {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	lk := m.looks[id]
	if lk == nil {
		lk = &looks{}
		m.looks[id] = lk
	}
	if n := len(lk.samples); n > 0 {
		prev := lk.samples[n-1]
		if dt := now.Sub(prev.Time); dt > 0 {
			share, ok = float64(cpu-prev.CPU)/float64(dt), true
		}
	}
	lk.samples = append(lk.samples, Sample{Time: now, CPU: cpu})
	if over := len(lk.samples) - HistoryLen; over > 0 {
		lk.samples = append(lk.samples[:0], lk.samples[over:]...)
	}
	return share, ok
}

// History is a session's samples, oldest first (a copy).
func (m *Meter) History(id string) []Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	if lk := m.looks[id]; lk != nil {
		return append([]Sample(nil), lk.samples...)
	}
	return nil
}

// Remove forgets a session's samples and deletes its cgroups, once its
// containers are gone.
func (m *Meter) Remove(ctx context.Context, id string) error {
	m.mu.Lock()
	delete(m.looks, id)
	m.mu.Unlock()
	l, err := m.known()
	if err != nil {
		return nil // no container was ever made under a layout
	}
	return l.Remove(ctx, id, m.stop)
}
