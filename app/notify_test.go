package app

import (
	"reflect"
	"testing"

	"github.com/airlock/airlock/engine/api"
)

// TestRunsEnded: a notification for each scheduled run that ended since
// the last read, none for what had ended before the app looked, for a
// run still running, or for an occurrence skipped.
func TestRunsEnded(t *testing.T) {
	sched := func(name string, id int64, outcome string) api.Schedule {
		return api.Schedule{Name: name, Last: &api.ScheduleRun{ID: id, Schedule: name, Outcome: outcome, Session: "s" + name}}
	}
	ended, seen := runsEnded(nil, []api.Schedule{sched("a", 1, api.RunDone), sched("b", 4, api.RunRunning), {Name: "c"}})
	if len(ended) != 0 {
		t.Fatalf("the first read notified %+v", ended)
	}
	for _, step := range []struct {
		list []api.Schedule
		want []string
	}{
		{[]api.Schedule{sched("a", 1, api.RunDone), sched("b", 4, api.RunRunning), {Name: "c"}}, nil},
		{[]api.Schedule{sched("a", 1, api.RunDone), sched("b", 4, api.RunFailed), sched("c", 7, api.RunDone)}, []string{"b failed", "c done"}},
		{[]api.Schedule{sched("a", 2, api.RunSkipped), sched("b", 4, api.RunFailed), sched("c", 8, api.RunRunning)}, nil},
		{[]api.Schedule{sched("a", 3, api.RunPolicy), sched("b", 4, api.RunFailed), sched("c", 8, api.RunDone)}, []string{"a policy", "c done"}},
	} {
		ended, seen = runsEnded(seen, step.list)
		var got []string
		for _, r := range ended {
			got = append(got, r.Schedule+" "+r.Outcome)
		}
		if !reflect.DeepEqual(got, step.want) {
			t.Errorf("notified %v, want %v", got, step.want)
		}
	}
	if title, body := runNotice(api.ScheduleRun{Schedule: "nightly", Outcome: "done", Session: "3f2a", Changed: 2}); title != "Airlock: nightly done" || body != "session 3f2a: 2 change(s) to review" {
		t.Errorf("notice %q %q", title, body)
	}
}
