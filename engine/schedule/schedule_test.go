package schedule_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/schedule"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/testenv"
)

// clock is a fake wall clock that tests move.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// sessions is a fake session core: each run makes a session s1, s2...
// and ends when release is closed (nil: at once) with exit.
type sessions struct {
	mu      sync.Mutex
	runs    []api.Schedule
	release chan struct{}
	exit    int
	fail    error // before a session exists
	policy  error
	// accepted are the sessions whose changes were accepted.
	accepted []string
}

func (f *sessions) Run(ctx context.Context, s api.Schedule, started func(string)) (int, error) {
	f.mu.Lock()
	f.runs = append(f.runs, s)
	n := len(f.runs)
	release, exit, fail := f.release, f.exit, f.fail
	f.mu.Unlock()
	if fail != nil {
		return -1, fail
	}
	started("s" + string(rune('0'+n)))
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
	return exit, nil
}

func (f *sessions) Changed(ctx context.Context, session string) int { return 2 }

func (f *sessions) CheckPolicy(ctx context.Context, session, file string) error { return f.policy }

func (f *sessions) Accept(ctx context.Context, session string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accepted = append(f.accepted, session)
	return 2, nil
}

func (f *sessions) count() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.runs) }

// monday0600 is a Monday, 06:00 local time.
var monday0600 = time.Date(2026, 11, 23, 6, 0, 0, 0, time.Local)

type rig struct {
	t     *testing.T
	db    string
	st    *store.Store
	clock *clock
	fake  *sessions
	s     *schedule.Scheduler
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, db: filepath.Join(t.TempDir(), "airlock.db"), clock: &clock{now: monday0600.Add(-time.Hour)}, fake: &sessions{}}
	r.open()
	return r
}

// open opens the store and a scheduler over it, as an engine's start does.
func (r *rig) open() {
	st, err := store.Open(context.Background(), r.db)
	if err != nil {
		r.t.Fatal(err)
	}
	r.st = st
	r.s = schedule.New(r.fake, st, schedule.Options{Clock: r.clock, Poll: time.Hour})
	r.t.Cleanup(r.close)
}

func (r *rig) close() {
	if r.s != nil {
		r.s.Stop(context.Background())
		r.st.Close()
		r.s = nil
	}
}

// weekdays adds a schedule at 06:00 on weekdays over a temporary project.
func (r *rig) weekdays(name string, edit func(*api.Schedule)) api.Schedule {
	r.t.Helper()
	s := api.Schedule{Name: name, Cron: "0 6 * * 1-5", Project: r.t.TempDir(), Command: []string{"make", "test"}}
	if edit != nil {
		edit(&s)
	}
	got, err := r.s.Add(context.Background(), s)
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}

// runs waits for want runs, all ended, and returns them.
func (r *rig) runs(name string, want int) []api.ScheduleRun {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		runs, err := r.s.Runs(context.Background(), name)
		if err != nil {
			r.t.Fatal(err)
		}
		ended := 0
		for _, run := range runs {
			if run.Outcome != api.RunRunning {
				ended++
			}
		}
		if ended == want && len(runs) == want || time.Now().After(deadline) {
			if len(runs) != want {
				r.t.Fatalf("%d runs, want %d: %+v", len(runs), want, runs)
			}
			return runs
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestScheduleRunsAtItsTime(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sch := r.weekdays("nightly", nil)
	if sch.Next == nil || !sch.Next.Equal(monday0600) {
		t.Fatalf("next run %v, want %v", sch.Next, monday0600)
	}
	r.s.Tick(ctx)
	if r.fake.count() != 0 {
		t.Fatal("ran before its time")
	}
	r.clock.set(monday0600.Add(10 * time.Second))
	if wait := r.s.Tick(ctx); wait > time.Hour {
		t.Errorf("waits %v before looking again", wait)
	}
	runs := r.runs("nightly", 1)
	if run := runs[0]; run.Trigger != api.TriggerCron || run.Session != "s1" || run.Outcome != api.RunDone || run.Changed != 2 ||
		!run.Due.Equal(monday0600) || run.ExitCode == nil || *run.ExitCode != 0 {
		t.Errorf("run %+v", run)
	}
	r.s.Tick(ctx)
	r.runs("nightly", 1) // the same occurrence runs once
	all, _ := r.s.List(ctx)
	if len(all) != 1 || all[0].Last == nil || all[0].Last.Session != "s1" || !all[0].Next.Equal(monday0600.AddDate(0, 0, 1)) {
		t.Errorf("ls: %+v", all)
	}
}

// A machine asleep (or an engine stopped) through several occurrences
// runs one when it wakes, not one per occurrence missed.
func TestScheduleCatchesUpOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.weekdays("nightly", nil)
	r.clock.set(monday0600.AddDate(0, 0, 3).Add(4 * time.Hour)) // Thursday 10:00: Mon-Thu missed
	r.s.Tick(ctx)
	r.s.Tick(ctx)
	runs := r.runs("nightly", 1)
	if runs[0].Trigger != api.TriggerCatchUp || !runs[0].Due.Equal(monday0600.AddDate(0, 0, 3)) {
		t.Errorf("catch-up run %+v: want Thursday's occurrence, once", runs[0])
	}
	r.clock.set(monday0600.AddDate(0, 0, 4).Add(time.Second)) // Friday 06:00
	r.s.Tick(ctx)
	if runs := r.runs("nightly", 2); runs[1].Trigger != api.TriggerCron {
		t.Errorf("next run %+v", runs[1])
	}
}

func TestScheduleSkipsOverlap(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "skipped", true: "allowed"}[allow], func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			r.fake.release = make(chan struct{})
			r.weekdays("slow", func(s *api.Schedule) { s.Cron, s.AllowOverlap = "* * * * *", allow })
			r.clock.set(monday0600)
			r.s.Tick(ctx)
			r.clock.set(monday0600.Add(time.Minute))
			r.s.Tick(ctx) // the first still runs
			_, err := r.s.RunNow(ctx, "slow", false)
			if allow != (err == nil) || !allow && !errdefs.IsConflict(err) {
				t.Errorf("run now while running: %v", err)
			}
			close(r.fake.release)
			if !allow {
				runs := r.runs("slow", 2)
				if runs[1].Outcome != api.RunSkipped || runs[1].Session != "" || r.fake.count() != 1 {
					t.Errorf("overlap: %+v, %d runs", runs[1], r.fake.count())
				}
				return
			}
			runs := r.runs("slow", 3)
			for _, run := range runs {
				if run.Outcome != api.RunDone {
					t.Errorf("run %+v", run)
				}
			}
		})
	}
}

// Schedules, the occurrences handled and the runs' log are in SQLite: a
// new engine over the same database neither forgets nor repeats them,
// and settles a run the last engine left running.
func TestScheduleSurvivesRestart(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.fake.release = make(chan struct{})
	r.weekdays("nightly", nil)
	r.clock.set(monday0600.Add(time.Second))
	r.s.Tick(ctx)
	for r.fake.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.close() // the engine stops during the run
	close(r.fake.release)

	r.open()
	r.s.Start()
	runs := r.runs("nightly", 1)
	if runs[0].Outcome != api.RunError || runs[0].Session != "s1" || !strings.Contains(runs[0].Error, "engine stopped") {
		t.Errorf("run of the last engine: %+v", runs[0])
	}
	r.s.Tick(ctx)
	r.runs("nightly", 1) // Monday's occurrence was handled
	r.clock.set(monday0600.AddDate(0, 0, 1).Add(time.Second))
	r.s.Tick(ctx)
	if runs := r.runs("nightly", 2); runs[1].Outcome != api.RunDone {
		t.Errorf("after the restart: %+v", runs[1])
	}
}

func TestScheduleRunNowAndOutcomes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		exit    int
		fail    error
		breaks  error
		policy  bool
		outcome string
		errHas  string
	}{
		{"done", 0, nil, nil, false, api.RunDone, ""},
		{"exit code", 3, nil, nil, false, api.RunFailed, ""},
		{"no session", 0, errdefs.NotFoundf("image gone"), nil, false, api.RunError, "image gone"},
		{"policy", 0, nil, errors.New("secrets.env: a protected path"), true, api.RunPolicy, "protected path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.fake.exit, r.fake.fail, r.fake.policy = tc.exit, tc.fail, tc.breaks
			pol := filepath.Join(t.TempDir(), "policy.yaml")
			os.WriteFile(pol, []byte("{}"), 0o644)
			out := filepath.Join(t.TempDir(), "on-done")
			r.weekdays("job", func(s *api.Schedule) {
				s.OnDone = `echo "$AIRLOCK_SCHEDULE $AIRLOCK_SESSION $AIRLOCK_OUTCOME $AIRLOCK_EXIT_CODE $AIRLOCK_CHANGED" > ` + out
				if tc.policy {
					s.Policy = pol
				}
			})
			run, err := r.s.RunNow(ctx, "job", true)
			if err != nil {
				t.Fatal(err)
			}
			if run.Outcome != tc.outcome || run.Trigger != api.TriggerManual || !strings.Contains(run.Error, tc.errHas) {
				t.Errorf("run %+v, want outcome %s", run, tc.outcome)
			}
			var got []byte
			for i := 0; i < 500 && len(got) == 0; i++ { // on-done runs after the run is recorded
				time.Sleep(5 * time.Millisecond)
				got, _ = os.ReadFile(out)
			}
			want := "job " + run.Session + " " + tc.outcome
			if !strings.HasPrefix(string(got), want) {
				t.Errorf("on-done saw %q, want %q...", got, want)
			}
		})
	}
}

// With ApplyPolicy a run whose changes pass the policy is accepted into
// the project; one whose changes break it is left for review.
func TestScheduleApplyPolicy(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		breaks   error
		outcome  string
		accepted int
	}{
		{"passes", nil, api.RunApplied, 1},
		{"breaks", errors.New("secrets.env: a protected path"), api.RunPolicy, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.fake.policy = tc.breaks
			r.weekdays("job", func(s *api.Schedule) { s.ApplyPolicy = true })
			run, err := r.s.RunNow(ctx, "job", true)
			if err != nil {
				t.Fatal(err)
			}
			r.fake.mu.Lock()
			accepted := len(r.fake.accepted)
			r.fake.mu.Unlock()
			if run.Outcome != tc.outcome || accepted != tc.accepted || tc.accepted > 0 && run.Applied != 2 {
				t.Errorf("run %+v, %d accepted: want outcome %s and %d accepted", run, accepted, tc.outcome, tc.accepted)
			}
		})
	}
}

func TestScheduleBadInput(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.weekdays("taken", nil)
	project := t.TempDir()
	for _, tc := range []struct {
		name  string
		s     api.Schedule
		class errdefs.Class
		says  string
	}{
		{"bad cron", api.Schedule{Name: "a", Cron: "0 6 * *", Project: project, Command: []string{"true"}}, errdefs.Invalid, "five fields"},
		{"bad cron value", api.Schedule{Name: "a", Cron: "61 6 * * *", Project: project, Command: []string{"true"}}, errdefs.Invalid, "cron expression"},
		{"unknown project", api.Schedule{Name: "a", Cron: "@daily", Project: "/no/such/dir", Command: []string{"true"}}, errdefs.NotFound, "give an existing project folder"},
		{"duplicate name", api.Schedule{Name: "taken", Cron: "@daily", Project: project, Command: []string{"true"}}, errdefs.Conflict, "airlock schedule rm taken"},
		{"bad name", api.Schedule{Name: "a b", Cron: "@daily", Project: project, Command: []string{"true"}}, errdefs.Invalid, "letters, digits"},
		{"nothing to run", api.Schedule{Name: "a", Cron: "@daily", Project: project}, errdefs.Invalid, "runs nothing"},
		{"agent without prompt", api.Schedule{Name: "a", Cron: "@daily", Project: project, Agent: "claude"}, errdefs.Invalid, "no prompt"},
		{"unknown agent", api.Schedule{Name: "a", Cron: "@daily", Project: project, Agent: "nope", Prompt: "p"}, errdefs.Invalid, "unknown agent"},
		{"both", api.Schedule{Name: "a", Cron: "@daily", Project: project, Agent: "claude", Prompt: "p", Command: []string{"true"}}, errdefs.Invalid, "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.s.Add(ctx, tc.s)
			if err == nil || errdefs.ClassOf(err) != tc.class || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v (%s), want %s saying %q", err, errdefs.ClassOf(err), tc.class, tc.says)
			}
		})
	}
	if err := r.s.Remove(ctx, "nope"); !errdefs.IsNotFound(err) {
		t.Errorf("rm of an unknown schedule: %v", err)
	}
	if _, err := r.s.RunNow(ctx, "nope", false); !errdefs.IsNotFound(err) {
		t.Errorf("run of an unknown schedule: %v", err)
	}
}

// The scheduler's own loop, on the wall clock: an occurrence a second
// away runs without anyone calling Tick.
func TestScheduleLoopOnTheWallClock(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fake := &sessions{}
	s := schedule.New(fake, st, schedule.Options{})
	s.Start()
	defer s.Stop(context.Background())
	if _, err := s.Add(context.Background(), api.Schedule{Name: "often", Cron: "@every 1s", Project: t.TempDir(), Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fake.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if fake.count() == 0 {
		t.Fatal("no run within 10 s of an occurrence due in 1 s")
	}
}

// An engine running as root runs on-done as the project folder's owner,
// not as root.
func TestScheduleOnDoneRunsAsTheProjectOwner(t *testing.T) {
	testenv.Root(t, "as the engine runs")
	r := newRig(t)
	shared, err := os.MkdirTemp("", "airlock-on-done") // t.TempDir's parent is root's only
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o777)
	project := filepath.Join(shared, "app")
	os.Mkdir(project, 0o755)
	if err := os.Chown(project, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(shared, "who")
	r.weekdays("job", func(s *api.Schedule) {
		s.Project, s.OnDone = project, `echo "$(id -u):$(id -g) $AIRLOCK_OUTCOME" > `+out
	})
	if _, err := r.s.RunNow(context.Background(), "job", true); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for i := 0; i < 500 && len(got) == 0; i++ {
		time.Sleep(5 * time.Millisecond)
		got, _ = os.ReadFile(out)
	}
	if string(got) != "65534:65534 done\n" {
		t.Errorf("on-done ran as %q, want the project's owner 65534:65534", got)
	}
}
