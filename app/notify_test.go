package app

import (
	"reflect"
	"strings"
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

// TestQuestionsNew: a notification for each question the first time it
// is seen, those waiting when the app starts included; an answered one is
// forgotten.
func TestQuestionsNew(t *testing.T) {
	q := func(id int64) api.PendingQuestion {
		return api.PendingQuestion{ID: id, Session: "3f2a", Kind: "connect", Host: "example.com", Port: 443}
	}
	seen := map[int64]bool{}
	for _, step := range []struct {
		list []api.PendingQuestion
		want []int64
	}{
		{[]api.PendingQuestion{q(1)}, []int64{1}},
		{[]api.PendingQuestion{q(1), q(2)}, []int64{2}},
		{[]api.PendingQuestion{q(2)}, nil},
		{nil, nil},
	} {
		var asked []api.PendingQuestion
		asked, seen = questionsNew(seen, step.list)
		var got []int64
		for _, x := range asked {
			got = append(got, x.ID)
		}
		if !reflect.DeepEqual(got, step.want) {
			t.Errorf("notified %v, want %v", got, step.want)
		}
	}
	title, body := questionNotice(api.PendingQuestion{ID: 7, Session: "3f2a", Kind: "https", Host: "api.example.com", Port: 443, Method: "POST", Path: "/v1/x"})
	if title != "Airlock: a session waits for your answer" || body != "session 3f2a wants POST api.example.com/v1/x: allow or deny it in the session's Network tab (or `airlock net decide 7`)" {
		t.Errorf("notice %q %q", title, body)
	}
	if _, body := questionNotice(q(3)); !strings.Contains(body, "wants example.com:443:") {
		t.Errorf("a connection's notice: %q", body)
	}
}
