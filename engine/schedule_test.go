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

// TestSchedulePolicyScansSecrets: a scheduled run whose changes hold a
// secret breaks the schedule's accept policy, as in `airlock ci`, and
// nothing of it is applied, even where the project's own policy does not
// scan for secrets.
func TestSchedulePolicyScansSecrets(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	p := project(t)
	must(t, os.MkdirAll(filepath.Join(p, ".airlock"), 0o755))
	must(t, os.WriteFile(filepath.Join(p, ".airlock/policy.yaml"), []byte("scanners:\n  secrets: false\n"), 0o644))
	strict := filepath.Join(t.TempDir(), "policy.yaml")
	must(t, os.WriteFile(strict, []byte("auto_accept: ['**']\n"), 0o644))
	_, err := e.AddSchedule(ctx, api.Schedule{Name: "keys", Cron: "@yearly", Project: p, Policy: strict, ApplyPolicy: true,
		Command: []string{"sh", "-c", "echo 'stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF' > keys.txt"}})
	must(t, err)
	run, err := e.RunSchedule(ctx, "keys", api.ScheduleRunRequest{Wait: true})
	must(t, err)
	if run.Outcome != api.RunPolicy || !strings.Contains(run.Error, "keys.txt: secrets") {
		t.Errorf("a run that wrote a Stripe key: %s (%s); want it to break the policy on keys.txt's secret", run.Outcome, run.Error)
	}
	if _, err := os.Stat(filepath.Join(p, "keys.txt")); err == nil {
		t.Errorf("the run's secret was applied to the project")
	}
}
