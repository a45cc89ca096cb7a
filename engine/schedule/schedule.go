package schedule

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// Sessions is the session core as a scheduled run sees it.
type Sessions interface {
	// Run creates a session over s.Project as the project is now and
	// runs s's agent turn or command in it, to its end; started is called
	// with the session's id once it runs, before the turn or command
	// ends. It returns the command's exit code (for a turn 0 when it is
	// done, 1 when it failed). An error returned before started was
	// called means no session ran it; one after, that the turn or
	// command failed. It never accepts or discards anything.
	Run(ctx context.Context, s api.Schedule, started func(session string)) (int, error)
	// Changed counts the paths the session changed (0 if unknown).
	Changed(ctx context.Context, session string) int
	// CheckPolicy checks the session's changes against the accept policy
	// in file; the error says what breaks it.
	CheckPolicy(ctx context.Context, session, file string) error
	// Accept accepts all of the session's changes into its project (what
	// the project's policy holds stays) and counts the paths written.
	Accept(ctx context.Context, session string) (int, error)
}

// Store keeps schedules and their runs. The engine's is SQLite
// (engine/store).
type Store interface {
	// AddSchedule records a new schedule: errdefs.Conflict if one has
	// its name.
	AddSchedule(ctx context.Context, s api.Schedule) error
	// Schedules lists the schedules by name.
	Schedules(ctx context.Context) ([]api.Schedule, error)
	// DeleteSchedule forgets a schedule and its runs: errdefs.NotFound
	// if there is none of that name.
	DeleteSchedule(ctx context.Context, name string) error
	// ScheduleDue is the last occurrence handled (run or skipped), zero
	// if none; SetScheduleDue records it.
	ScheduleDue(ctx context.Context, name string) (time.Time, error)
	SetScheduleDue(ctx context.Context, name string, due time.Time) error
	// AddScheduleRun records a run and returns its id; EndScheduleRun
	// records its session, outcome and end (by run.ID).
	AddScheduleRun(ctx context.Context, run api.ScheduleRun) (int64, error)
	EndScheduleRun(ctx context.Context, run api.ScheduleRun) error
	// ScheduleRuns lists a schedule's last limit runs, oldest first (all
	// if limit <= 0).
	ScheduleRuns(ctx context.Context, name string, limit int) ([]api.ScheduleRun, error)
	// InterruptScheduleRuns ends the runs still marked running (an engine
	// stopped during them) with outcome error and msg.
	InterruptScheduleRuns(ctx context.Context, msg string, at time.Time) error
}

// Clock is the wall clock (a fake in tests).
type Clock interface{ Now() time.Time }

type wallClock struct{}

// Now is the wall time without its monotonic reading: a machine's sleep
// stops the monotonic clock, not the occurrences.
func (wallClock) Now() time.Time { return time.Now().Round(0) }

// Options tune a Scheduler.
type Options struct {
	Clock  Clock        // nil: the wall clock
	Logger *slog.Logger // nil logs nothing
	// Poll bounds how long the scheduler goes without looking at the
	// clock (default 1 minute): after a machine's sleep, a missed
	// occurrence runs within that long of its waking.
	Poll time.Duration
	// Grace is how late an occurrence may start and still count as on
	// time, not as a catch-up (default 2 minutes).
	Grace time.Duration
	// OnDoneTimeout bounds an on-done command (default 5 minutes).
	OnDoneTimeout time.Duration
}

// Scheduler runs schedules. It is safe for concurrent use.
type Scheduler struct {
	sessions Sessions
	store    Store
	clock    Clock
	log      *slog.Logger
	opts     Options

	mu      sync.Mutex
	running map[string]int // runs in flight, by schedule
	wake    chan struct{}  // the schedules changed: look again
	stop    func()
	wg      sync.WaitGroup
	// ctx is the scheduler's life: runs started on a request outlive it
	// but not the scheduler.
	ctx context.Context
}

// New returns a scheduler over the session core and the store; Start
// starts its clock.
func New(sessions Sessions, store Store, opts Options) *Scheduler {
	if opts.Clock == nil {
		opts.Clock = wallClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Minute
	}
	if opts.Grace <= 0 {
		opts.Grace = 2 * time.Minute
	}
	if opts.OnDoneTimeout <= 0 {
		opts.OnDoneTimeout = 5 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{sessions: sessions, store: store, clock: opts.Clock, log: opts.Logger.With("component", "schedule"), opts: opts,
		running: map[string]int{}, wake: make(chan struct{}, 1), ctx: ctx, stop: cancel}
}

// Start settles the runs an earlier engine left running, runs what was
// missed while no engine ran (once per schedule), then runs each
// occurrence at its time until Stop.
func (s *Scheduler) Start() {
	if err := s.store.InterruptScheduleRuns(s.ctx, "the engine stopped during the run: see its session for what it did", s.clock.Now()); err != nil {
		s.log.Warn("could not settle the runs of the last engine", "err", err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			wait := s.Tick(s.ctx)
			t := time.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-s.wake:
			case <-t.C:
			}
			t.Stop()
		}
	}()
}

// Stop stops the clock and ends the runs in flight (their sessions stay,
// for review), waiting for them until ctx ends.
func (s *Scheduler) Stop(ctx context.Context) {
	s.stop()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Add records a new schedule after checking it: its name, its cron
// expression, its project folder, what it runs.
func (s *Scheduler) Add(ctx context.Context, sch api.Schedule) (api.Schedule, error) {
	sch.Next, sch.Last = nil, nil
	if err := check(sch); err != nil {
		return api.Schedule{}, err
	}
	sch.Created = s.clock.Now().UTC()
	if err := s.store.AddSchedule(ctx, sch); err != nil {
		if errdefs.IsConflict(err) {
			return api.Schedule{}, errdefs.Conflictf("a schedule named %s exists: pick another name, or remove it first with `airlock schedule rm %s`", sch.Name, sch.Name)
		}
		return api.Schedule{}, err
	}
	s.log.Info("schedule added", "schedule", sch.Name, "cron", sch.Cron, "project", sch.Project)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.describe(ctx, sch), nil
}

// List lists the schedules with their next time and last run.
func (s *Scheduler) List(ctx context.Context) ([]api.Schedule, error) {
	all, err := s.store.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		all[i] = s.describe(ctx, all[i])
	}
	return all, nil
}

// Get returns a schedule with its next time and last run.
func (s *Scheduler) Get(ctx context.Context, name string) (api.Schedule, error) {
	all, err := s.store.Schedules(ctx)
	if err != nil {
		return api.Schedule{}, err
	}
	for _, sch := range all {
		if sch.Name == name {
			return s.describe(ctx, sch), nil
		}
	}
	return api.Schedule{}, errdefs.NotFoundf("no schedule %q: `airlock schedule ls` lists them", name)
}

// describe adds the next time and the last run.
func (s *Scheduler) describe(ctx context.Context, sch api.Schedule) api.Schedule {
	if spec, err := Parse(sch.Cron); err == nil {
		if next := spec.Next(s.clock.Now()); !next.IsZero() {
			sch.Next = &next
		}
	}
	if runs, err := s.store.ScheduleRuns(ctx, sch.Name, 1); err == nil && len(runs) == 1 {
		sch.Last = &runs[0]
	}
	return sch
}

// Remove forgets a schedule and its log. A run in flight goes on; its
// session stays for review.
func (s *Scheduler) Remove(ctx context.Context, name string) error {
	if err := s.store.DeleteSchedule(ctx, name); err != nil {
		return err
	}
	s.log.Info("schedule removed", "schedule", name)
	return nil
}

// Runs lists a schedule's runs, oldest first.
func (s *Scheduler) Runs(ctx context.Context, name string) ([]api.ScheduleRun, error) {
	if _, err := s.Get(ctx, name); err != nil {
		return nil, err
	}
	return s.store.ScheduleRuns(ctx, name, 0)
}

// RunNow runs a schedule now, besides its times. It answers once the run's
// session runs, or, with wait, once the run ended (the run goes on if ctx
// ends first). A schedule whose last run still runs is refused unless it
// allows overlap.
func (s *Scheduler) RunNow(ctx context.Context, name string, wait bool) (api.ScheduleRun, error) {
	sch, err := s.Get(ctx, name)
	if err != nil {
		return api.ScheduleRun{}, err
	}
	now := s.clock.Now()
	f, err := s.launch(sch, now, api.TriggerManual)
	if err != nil {
		return api.ScheduleRun{}, err
	}
	if f == nil {
		return api.ScheduleRun{}, errdefs.Conflictf("schedule %s is running: wait for its run to end (`airlock schedule log %s`), or add it with --allow-overlap", name, name)
	}
	ch := f.started
	if wait {
		ch = f.done
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return f.get(), ctx.Err()
	}
	return f.get(), nil
}

// Tick runs what is due at the clock's time: for each schedule, the
// latest occurrence since the last handled, once, however many there were.
// It returns how long to wait before looking again.
func (s *Scheduler) Tick(ctx context.Context) time.Duration {
	now := s.clock.Now()
	wait := s.opts.Poll
	all, err := s.store.Schedules(ctx)
	if err != nil {
		s.log.Warn("could not read the schedules", "err", err)
		return wait
	}
	for _, sch := range all {
		spec, err := Parse(sch.Cron)
		if err != nil {
			s.log.Warn("schedule has a bad cron expression", "schedule", sch.Name, "err", err)
			continue
		}
		from, err := s.store.ScheduleDue(ctx, sch.Name)
		if err != nil {
			s.log.Warn("could not read a schedule's last run", "schedule", sch.Name, "err", err)
			continue
		}
		if from.IsZero() {
			from = sch.Created
		}
		if due, n := lastDue(spec, from, now); n > 0 {
			// Recorded first: an engine that stops during the run does
			// not run this occurrence again.
			if err := s.store.SetScheduleDue(ctx, sch.Name, due); err != nil {
				s.log.Warn("could not record a schedule's run", "schedule", sch.Name, "err", err)
				continue
			}
			trigger := api.TriggerCron
			if n > 1 || now.Sub(due) > s.opts.Grace {
				trigger = api.TriggerCatchUp
				s.log.Info("running a missed occurrence once", "schedule", sch.Name, "due", due, "missed", n)
			}
			if _, err := s.launch(sch, due, trigger); err != nil {
				s.log.Warn("could not start a scheduled run", "schedule", sch.Name, "err", err)
			}
		}
		if next := spec.Next(now); !next.IsZero() && next.Sub(now) < wait {
			wait = next.Sub(now)
		}
	}
	return wait
}
