package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/store"
)

// TestScheduleCatchesUpAtStart: an engine that starts after a schedule's
// occurrences were missed (three days of a daily schedule) runs one, at
// once, as a new session over the project whose change waits for review.
func TestScheduleCatchesUpAtStart(t *testing.T) {
	d := enginetest.Require(t)
	enginetest.TinyImage(t, d)
	ctx := context.Background()
	dir, p := t.TempDir(), project(t)
	st, err := store.Open(ctx, filepath.Join(dir, "airlock.db"))
	must(t, err)
	must(t, st.AddSchedule(ctx, api.Schedule{Name: "nightly", Cron: "0 3 * * *", Project: p, Created: time.Now().AddDate(0, 0, -3),
		Command: []string{"sh", "-c", "echo caught up > caught.txt"}}))
	st.Close()

	e := enginetest.Reopen(t, d, dir)
	t.Cleanup(func() { enginetest.RemoveAll(t, e) })
	var runs []api.ScheduleRun
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if runs, err = e.ScheduleRuns(ctx, "nightly"); err == nil && len(runs) > 0 && runs[0].Outcome != api.RunRunning {
			break
		}
	}
	if len(runs) != 1 || runs[0].Trigger != api.TriggerCatchUp || runs[0].Outcome != api.RunDone || runs[0].Changed != 1 {
		t.Fatalf("runs after the start: %+v", runs)
	}
	if due := runs[0].Due.Local(); due.Hour() != 3 || time.Since(due) > 24*time.Hour {
		t.Errorf("the run is for %v: want the last 03:00 missed", due)
	}
	diff, err := e.Diff(ctx, runs[0].Session, nil)
	must(t, err)
	if len(diff.Files) != 1 || diff.Files[0].Path != "caught.txt" {
		t.Errorf("the run's diff: %+v", diff.Files)
	}
	if _, err := os.Stat(filepath.Join(p, "caught.txt")); err == nil {
		t.Errorf("the run wrote into the project")
	}
	list, err := e.Schedules(ctx)
	must(t, err)
	if len(list) != 1 || list[0].Last == nil || list[0].Last.Session != runs[0].Session || list[0].Next == nil || !strings.Contains(list[0].Next.Local().Format("15:04"), "03:00") {
		t.Errorf("schedules: %+v", list)
	}
}
