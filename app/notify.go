package app

import (
	"context"
	"fmt"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// notifier shows a desktop notification (runtime.go; a fake in tests).
type notifier interface {
	notify(title, body string)
}

// runsPoll is how often the app asks the engine about scheduled runs.
const runsPoll = 30 * time.Second

// watchRuns tells the desktop when a scheduled run ends: it reads the
// schedules every runsPoll until ctx ends, and notifies for each last run
// that ended since the read before. What had ended before the app started
// is not news.
func (a *App) watchRuns(ctx context.Context, n notifier, every time.Duration) {
	var seen map[string]api.ScheduleRun
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if list, err := a.client.Schedules(ctx); err == nil {
			var ended []api.ScheduleRun
			ended, seen = runsEnded(seen, list)
			for _, r := range ended {
				n.notify(runNotice(r))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runsEnded compares the schedules' last runs with those seen before (nil:
// none read yet, nothing is news) and returns the runs that ended since,
// and what is seen now.
func runsEnded(before map[string]api.ScheduleRun, list []api.Schedule) ([]api.ScheduleRun, map[string]api.ScheduleRun) {
	now := map[string]api.ScheduleRun{}
	var ended []api.ScheduleRun
	for _, s := range list {
		if s.Last == nil {
			continue
		}
		r := *s.Last
		now[s.Name] = r
		if before == nil || r.Outcome == api.RunRunning || r.Outcome == api.RunSkipped {
			continue
		}
		if prev, ok := before[s.Name]; !ok || prev.ID != r.ID || prev.Outcome == api.RunRunning {
			ended = append(ended, r)
		}
	}
	return ended, now
}

// runNotice is the title and body of a run's notification.
func runNotice(r api.ScheduleRun) (string, string) {
	title := fmt.Sprintf("Airlock: %s %s", r.Schedule, r.Outcome)
	switch {
	case r.Session != "" && r.Changed > 0:
		return title, fmt.Sprintf("session %s: %d change(s) to review", r.Session, r.Changed)
	case r.Session != "":
		return title, fmt.Sprintf("session %s: no changes", r.Session)
	}
	return title, r.Error
}
