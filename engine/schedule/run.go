package schedule

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// flight is a run in progress.
type flight struct {
	mu      sync.Mutex
	run     api.ScheduleRun
	started chan struct{} // closed once the session runs, or the run ended
	done    chan struct{} // closed once the run ended
	once    sync.Once
}

func (f *flight) get() api.ScheduleRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.run
}

func (f *flight) markStarted() { f.once.Do(func() { close(f.started) }) }

// launch starts a run of sch for its occurrence due. When the schedule's
// last run still runs and it allows no overlap, the occurrence is logged
// as skipped and launch returns nil.
func (s *Scheduler) launch(sch api.Schedule, due time.Time, trigger string) (*flight, error) {
	ctx := s.ctx
	run := api.ScheduleRun{Schedule: sch.Name, Due: due.UTC(), Trigger: trigger, Started: s.clock.Now().UTC(), Outcome: api.RunRunning}
	s.mu.Lock()
	busy := s.running[sch.Name] > 0 && !sch.AllowOverlap
	if !busy {
		s.running[sch.Name]++
	}
	s.mu.Unlock()
	if busy {
		if trigger == api.TriggerManual {
			return nil, nil // the caller says so
		}
		s.log.Info("skipped: the schedule's last run still runs (add it with --allow-overlap to run both)", "schedule", sch.Name, "due", due)
		end := run.Started
		run.Outcome, run.Ended, run.Error = api.RunSkipped, &end, "the last run still ran"
		_, err := s.store.AddScheduleRun(ctx, run)
		return nil, err
	}
	id, err := s.store.AddScheduleRun(ctx, run)
	if err != nil {
		s.finished(sch.Name)
		return nil, err
	}
	run.ID = id
	f := &flight{run: run, started: make(chan struct{}), done: make(chan struct{})}
	s.log.Info("scheduled run starts", "schedule", sch.Name, "run", id, "due", due, "trigger", trigger)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.finished(sch.Name)
		defer close(f.done)
		defer f.markStarted()
		s.execute(ctx, sch, f)
	}()
	return f, nil
}

func (s *Scheduler) finished(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[name]--; s.running[name] <= 0 {
		delete(s.running, name)
	}
}

// execute runs one occurrence to its end and records how it ended.
func (s *Scheduler) execute(ctx context.Context, sch api.Schedule, f *flight) {
	code, err := s.sessions.Run(ctx, sch, func(session string) {
		f.mu.Lock()
		f.run.Session = session
		run := f.run
		f.mu.Unlock()
		if err := s.store.EndScheduleRun(context.WithoutCancel(ctx), run); err != nil { // still running: the session is known
			s.log.Warn("could not record a run's session", "schedule", sch.Name, "err", err)
		}
		f.markStarted()
	})
	// What follows is recorded even when the scheduler stops.
	ctx = context.WithoutCancel(ctx)
	f.mu.Lock()
	run := f.run
	f.mu.Unlock()
	switch {
	case err != nil && s.ctx.Err() != nil:
		run.Outcome, run.Error = api.RunError, "the engine stopped during the run: see its session for what it did"
	case err != nil && run.Session == "":
		run.Outcome, run.Error = api.RunError, err.Error()
	case err != nil:
		run.Outcome, run.Error = api.RunFailed, err.Error()
	case code != 0:
		run.Outcome = api.RunFailed
	default:
		run.Outcome = api.RunDone
	}
	if run.Session != "" && code >= 0 {
		run.ExitCode = &code
	}
	if run.Session != "" {
		run.Changed = s.sessions.Changed(ctx, run.Session)
		if run.Outcome == api.RunDone && (sch.Policy != "" || sch.ApplyPolicy) {
			if err := s.sessions.CheckPolicy(ctx, run.Session, sch.Policy); err != nil {
				run.Outcome, run.Error = api.RunPolicy, err.Error()
			} else if sch.ApplyPolicy {
				n, err := s.sessions.Accept(ctx, run.Session)
				run.Applied = n
				if err != nil {
					run.Outcome, run.Error = api.RunFailed, "accepting the changes: "+err.Error()+": review the session"
				} else {
					run.Outcome = api.RunApplied
				}
			}
		}
	}
	end := s.clock.Now().UTC()
	run.Ended = &end
	if err := s.store.EndScheduleRun(ctx, run); err != nil {
		s.log.Warn("could not record how a run ended", "schedule", sch.Name, "err", err)
	}
	f.mu.Lock()
	f.run = run
	f.mu.Unlock()
	s.log.Info("scheduled run ended", "schedule", sch.Name, "run", run.ID, "session", run.Session, "outcome", run.Outcome, "changed", run.Changed, "err", run.Error)
	if sch.OnDone != "" {
		s.onDone(ctx, sch, run)
	}
}

// onDone runs the schedule's on-done command on the host, in the project
// folder, with the run in its environment. Its output goes to the log.
// An engine running as root runs it as the project folder's owner, with
// that user's desktop session bus, so that `notify-send` reaches them.
func (s *Scheduler) onDone(ctx context.Context, sch api.Schedule, run api.ScheduleRun) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OnDoneTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", sch.OnDone)
	cmd.Dir = sch.Project
	cmd.Env = os.Environ()
	if fi, err := os.Stat(sch.Project); err == nil && os.Geteuid() == 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid}}
			cmd.Env = userEnv(st.Uid)
		}
	}
	code := ""
	if run.ExitCode != nil {
		code = strconv.Itoa(*run.ExitCode)
	}
	cmd.Env = append(cmd.Env,
		"AIRLOCK_SCHEDULE="+sch.Name,
		"AIRLOCK_SESSION="+run.Session,
		"AIRLOCK_OUTCOME="+run.Outcome,
		"AIRLOCK_EXIT_CODE="+code,
		"AIRLOCK_CHANGED="+strconv.Itoa(run.Changed),
		"AIRLOCK_PROJECT="+sch.Project,
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := out.String()
	if len(text) > 2048 {
		text = text[:2048] + "…"
	}
	if err != nil {
		s.log.Warn("the schedule's on-done command failed", "schedule", sch.Name, "run", run.ID, "err", err, "output", text)
		return
	}
	s.log.Info("the schedule's on-done command ran", "schedule", sch.Name, "run", run.ID, "output", text)
}

// userEnv is the environment of a command run as uid: its home, and its
// session bus when it has one (a desktop session).
func userEnv(uid uint32) []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		env = append(env, "HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username)
	}
	run := "/run/user/" + strconv.Itoa(int(uid))
	if _, err := os.Stat(run); err == nil {
		env = append(env, "XDG_RUNTIME_DIR="+run)
		if _, err := os.Stat(run + "/bus"); err == nil {
			env = append(env, "DBUS_SESSION_BUS_ADDRESS=unix:path="+run+"/bus")
		}
	}
	return env
}
