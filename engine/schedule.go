package engine

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/schedule"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
)

// AddSchedule records a schedule (see schedule.Scheduler.Add).
func (e *Engine) AddSchedule(ctx context.Context, s api.Schedule) (api.Schedule, error) {
	return e.schedules.Add(ctx, s)
}

// Schedules lists the schedules with their next time and last run.
func (e *Engine) Schedules(ctx context.Context) ([]api.Schedule, error) {
	return e.schedules.List(ctx)
}

// Schedule returns one schedule.
func (e *Engine) Schedule(ctx context.Context, name string) (api.Schedule, error) {
	return e.schedules.Get(ctx, name)
}

// RemoveSchedule forgets a schedule and its log; its sessions stay.
func (e *Engine) RemoveSchedule(ctx context.Context, name string) error {
	return e.schedules.Remove(ctx, name)
}

// RunSchedule runs a schedule now (see schedule.Scheduler.RunNow).
func (e *Engine) RunSchedule(ctx context.Context, name string, req api.ScheduleRunRequest) (api.ScheduleRun, error) {
	return e.schedules.RunNow(ctx, name, req.Wait)
}

// ScheduleRuns lists a schedule's runs, oldest first.
func (e *Engine) ScheduleRuns(ctx context.Context, name string) ([]api.ScheduleRun, error) {
	return e.schedules.Runs(ctx, name)
}

// newSchedules wires engine/schedule to the session core; the engine
// starts it once its sessions are adopted.
func newSchedules(e *Engine) *schedule.Scheduler {
	return schedule.New(scheduleCore{e}, e.store, schedule.Options{Logger: e.log})
}

// scheduleCore is the session core as engine/schedule sees it.
type scheduleCore struct{ e *Engine }

var (
	_ schedule.Sessions = scheduleCore{}
	_ schedule.Store    = (*store.Store)(nil)
)

// Run runs an occurrence the way `airlock run` does: a command as the
// session's first process, an agent's turn in a new session of the
// agents image. The agent's key is the engine's (its secrets): no CLI
// environment is there to give it.
func (c scheduleCore) Run(ctx context.Context, s api.Schedule, started func(string)) (int, error) {
	creq := api.CreateRequest{Project: s.Project, Image: s.Image, CostBudget: s.CostBudget}
	if len(s.Command) > 0 {
		return c.e.Run(ctx, creq, api.ExecRequest{Argv: s.Command}, ExecIO{Stdout: io.Discard, Stderr: io.Discard},
			func(sess api.Session) { started(sess.ID) })
	}
	if creq.Image == "" {
		creq.Image = DefaultAgentsImage
	}
	sess, err := c.e.Create(ctx, creq)
	if err != nil {
		if errdefs.IsNotFound(err) && s.Image == "" {
			return -1, errdefs.NotFoundf("image %s is not available: build it with `airlock image build --agents %s`", creq.Image, s.Agent)
		}
		return -1, err
	}
	started(sess.ID)
	turn, err := c.e.Agent(ctx, sess.ID, api.AgentRequest{Agent: s.Agent, Prompt: s.Prompt, Model: s.Model, BaseURL: s.BaseURL}, nil)
	if err != nil {
		return 1, err
	}
	if turn.State != "done" {
		return 1, fmt.Errorf("turn %d %s: %s", turn.N, turn.State, turn.Error)
	}
	return 0, nil
}

// Accept accepts everything the session changed, as `airlock accept`
// does: what the project's policy holds or a scanner flagged stays.
func (c scheduleCore) Accept(ctx context.Context, session string) (int, error) {
	out, err := c.e.Accept(ctx, session, api.Selection{})
	n := 0
	for _, o := range out.Outcomes {
		if o.Applied {
			n++
		}
	}
	return n, err
}

func (c scheduleCore) Changed(ctx context.Context, session string) int {
	s, err := c.e.Get(ctx, session)
	if err != nil || s.Changed < 0 {
		return 0
	}
	return s.Changed
}

// CheckPolicy reviews the session's changes under the accept policy in
// file (instead of the project's), as `airlock ci` does: a change the
// policy holds for a human, or a scanner's finding, breaks it; the error
// names them.
func (c scheduleCore) CheckPolicy(ctx context.Context, session, file string) error {
	sid, l, layers, err := c.e.reviewable(ctx, session)
	if err != nil {
		return err
	}
	optional := false
	if file == "" { // the project's own, if it has one
		file, optional = filepath.Join(layers.Project, review.PolicyFile), true
	}
	pol, err := review.LoadPolicy(file, optional)
	if err != nil {
		return errdefs.Wrap(errdefs.Invalid, err)
	}
	h, err := c.e.heavy(ctx, sid, l)
	if err != nil {
		return err
	}
	defer h.done()
	var breaks []string
	// Hunks: the secrets scanner reads what was added.
	err = review.ReviewEach(ctx, layers, review.Options{Hunks: true, Limits: c.e.reviewLimits(), Workers: c.e.reviewers}, func(batch []review.FileDiff) error {
		if err := pol.Check(ctx, layers, batch, c.e.scanner); err != nil {
			return err
		}
		for _, d := range batch {
			if d.Held != "" {
				breaks = append(breaks, d.Path+": "+d.Held)
			}
			for _, f := range d.Findings {
				breaks = append(breaks, d.Path+": "+f.Scanner+": "+f.Message)
			}
		}
		return nil
	})
	if err := c.e.reviewErr(sid, err); err != nil {
		return err
	}
	if n := len(breaks); n > 0 {
		more := ""
		if n > 5 {
			breaks, more = breaks[:5], fmt.Sprintf(" and %d more", n-5)
		}
		return fmt.Errorf("%d change(s) need a human under %s: %s%s", n, file, strings.Join(breaks, "; "), more)
	}
	return nil
}
