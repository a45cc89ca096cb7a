package app

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
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
	return title, names.Safe(r.Error)
}

// questionsPoll is how often the app asks the engine what sessions under
// --net ask wait on (a question waits a minute by default).
const questionsPoll = 3 * time.Second

// watchQuestions tells the desktop when a session under the ask mode
// waits for an answer: each question once, those waiting when the app
// starts too (someone is waiting on them).
func (a *App) watchQuestions(ctx context.Context, n notifier, every time.Duration) {
	seen := map[int64]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if list, err := a.client.Pending(ctx); err == nil {
			var asked []api.PendingQuestion
			asked, seen = questionsNew(seen, list)
			for _, q := range asked {
				n.notify(questionNotice(q))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// questionsNew are the questions of list not in seen, and the ids of
// list (what is answered or timed out is forgotten).
func questionsNew(seen map[int64]bool, list []api.PendingQuestion) ([]api.PendingQuestion, map[int64]bool) {
	now := map[int64]bool{}
	var asked []api.PendingQuestion
	for _, q := range list {
		now[q.ID] = true
		if !seen[q.ID] {
			asked = append(asked, q)
		}
	}
	return asked, now
}

// questionNotice is the title and body of a question's notification.
func questionNotice(q api.PendingQuestion) (string, string) {
	what := net.JoinHostPort(q.Host, strconv.Itoa(q.Port))
	if q.Method != "" {
		what = q.Method + " " + q.Host + q.Path
	}
	what = names.Safe(what) // what the session asked for: its host and path are its own
	return "Airlock: a session waits for your answer", fmt.Sprintf("session %s wants %s: allow or deny it in the session's Network tab (or `airlock net decide %d`)", q.Session, what, q.ID)
}
