package schedule

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
	"github.com/robfig/cron/v3"
)

// Parse parses a cron expression: five fields (minute hour day-of-month
// month day-of-week) or a descriptor (@daily, @every 1h), in the local
// time zone unless it starts with CRON_TZ=.
func Parse(expr string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, errdefs.Invalidf("cron expression %q: %v: give five fields (minute hour day-of-month month day-of-week), e.g. \"0 6 * * 1-5\" for 06:00 on weekdays, or a descriptor such as @daily", expr, err)
	}
	return s, nil
}

// validName is a schedule's name, at most maxName bytes long (checked
// apart: `{0,63}` compiles to 64 copies, 60 KB at every start).
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

const maxName = 64

// check validates a schedule as `airlock schedule add` gives it.
func check(s api.Schedule) error {
	if len(s.Name) > maxName || !validName.MatchString(s.Name) {
		return errdefs.Invalidf("schedule name %q: give up to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", s.Name)
	}
	if _, err := Parse(s.Cron); err != nil {
		return err
	}
	if !filepath.IsAbs(s.Project) {
		return errdefs.Invalidf("project %q: give the project folder's absolute path", s.Project)
	}
	fi, err := os.Stat(s.Project)
	if err != nil {
		return errdefs.NotFoundf("project %s: %v: give an existing project folder (--project)", s.Project, unwrapPath(err))
	}
	if !fi.IsDir() {
		return errdefs.Invalidf("project %s is not a folder: give the project folder (--project)", s.Project)
	}
	switch {
	case len(s.Command) > 0 && (s.Agent != "" || s.Prompt != ""):
		return errdefs.Invalidf("schedule %s: give either an agent with a prompt or a command, not both", s.Name)
	case len(s.Command) == 0 && s.Agent == "":
		return errdefs.Invalidf("schedule %s runs nothing: give --agent NAME with --prompt or --prompt-file, or a command after `--`", s.Name)
	case s.Agent != "" && strings.TrimSpace(s.Prompt) == "":
		return errdefs.Invalidf("schedule %s: agent %s has no prompt: give --prompt or --prompt-file", s.Name, s.Agent)
	}
	if s.Agent != "" {
		if s.Agent == "custom" {
			return errdefs.Invalidf("schedules run the agents Airlock knows (%s): run another tool as a command after `--`", strings.Join(harness.Names(), ", "))
		}
		if _, err := harness.Lookup(s.Agent); err != nil {
			return errdefs.Wrap(errdefs.Invalid, err)
		}
	}
	if s.CostBudget < 0 {
		return errdefs.Invalidf("cost budget %v: give a positive amount in USD (or none)", s.CostBudget)
	}
	if s.Policy != "" {
		if !filepath.IsAbs(s.Policy) {
			return errdefs.Invalidf("policy %q: give the policy file's absolute path", s.Policy)
		}
		if _, err := os.Stat(s.Policy); err != nil {
			return errdefs.NotFoundf("policy %s: %v: give an existing accept policy file (--policy)", s.Policy, unwrapPath(err))
		}
	}
	return nil
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// lastDue is the latest occurrence of s after from and at or before now,
// and how many there were, counting at most two (0: none; 2: several,
// missed). It looks for the latest from the nearest window back from now
// that holds one, so that a machine asleep for months costs no more than
// one asleep for a night, even for @every 1s.
func lastDue(s cron.Schedule, from, now time.Time) (time.Time, int) {
	first := s.Next(from)
	if first.IsZero() || first.After(now) {
		return time.Time{}, 0
	}
	last := first
	for _, w := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 31 * 24 * time.Hour, 366 * 24 * time.Hour} {
		start := now.Add(-w)
		if start.Before(from) {
			break
		}
		if t := s.Next(start); !t.IsZero() && !t.After(now) {
			last = t
			break
		}
	}
	for t := s.Next(last); !t.IsZero() && !t.After(now); t = s.Next(t) {
		last = t
	}
	if last.Equal(first) {
		return last, 1
	}
	return last, 2
}
