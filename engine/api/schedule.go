package api

import "time"

// Schedule runs an agent turn or a command in a new session of a project
// at the times of a cron expression (`airlock schedule add`). Exactly one
// of Prompt (with Agent) and Command is set.
type Schedule struct {
	// Name names the schedule; it is unique.
	Name string `json:"name"`
	// Cron is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week) or a descriptor such as @daily, in
	// the engine's local time zone.
	Cron    string `json:"cron"`
	Project string `json:"project"`
	// Image is the session's image (default: the agents image for an
	// agent, the default image for a command).
	Image  string `json:"image,omitempty"`
	Agent  string `json:"agent,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	Model  string `json:"model,omitempty"`
	// BaseURL is the agent's provider endpoint (default: the engine's
	// config).
	BaseURL string   `json:"base_url,omitempty"`
	Command []string `json:"command,omitempty"`
	// CostBudget pauses each run's session once it cost that much, in
	// USD (0: none).
	CostBudget float64 `json:"cost_budget,omitempty"`
	// Policy is an accept policy file on the engine's host that each
	// run's changes are checked against once it ends; a violation is the
	// run's outcome (the session still waits for review).
	Policy string `json:"policy,omitempty"`
	// OnDone is a shell command run on the engine's host after each run
	// ends, as the project folder's owner, with AIRLOCK_SCHEDULE, AIRLOCK_SESSION, AIRLOCK_OUTCOME,
	// AIRLOCK_EXIT_CODE and AIRLOCK_CHANGED in its environment.
	OnDone string `json:"on_done,omitempty"`
	// ApplyPolicy accepts each run's changes into the project when they
	// pass the accept policy (Policy, else the project's
	// .airlock/policy.yaml), as `airlock ci --apply` does; a run whose
	// changes break it waits for review.
	ApplyPolicy bool `json:"apply_policy,omitempty"`
	// AllowOverlap lets a run start while the last one still runs
	// (otherwise that occurrence is skipped and logged).
	AllowOverlap bool      `json:"allow_overlap,omitempty"`
	Created      time.Time `json:"created"`
	// Next is when the schedule runs next (set in answers only).
	Next *time.Time `json:"next,omitempty"`
	// Last is the schedule's last run (set in answers only).
	Last *ScheduleRun `json:"last,omitempty"`
}

// Outcomes of a scheduled run.
const (
	RunRunning = "running" // the session runs the turn or command
	RunDone    = "done"    // it ended well: the session waits for review
	RunApplied = "applied" // it ended well and its changes passed the policy: accepted (ApplyPolicy)
	RunFailed  = "failed"  // the command exited non-zero or the turn failed
	RunPolicy  = "policy"  // the changes break the schedule's accept policy
	RunError   = "error"   // no session could run it (Error says why)
	RunSkipped = "skipped" // the last run still ran (no overlap allowed)
)

// Triggers of a scheduled run.
const (
	TriggerCron    = "cron"     // at its time
	TriggerCatchUp = "catch-up" // late: the engine was not running, or the machine slept
	TriggerManual  = "manual"   // `airlock schedule run`
)

// ScheduleRun is one occurrence of a schedule (`airlock schedule log`).
type ScheduleRun struct {
	ID       int64  `json:"id"`
	Schedule string `json:"schedule"`
	// Due is the occurrence's time by the cron expression (the request's
	// time for a manual run).
	Due      time.Time  `json:"due"`
	Trigger  string     `json:"trigger"`
	Started  time.Time  `json:"started"`
	Ended    *time.Time `json:"ended,omitempty"`
	Session  string     `json:"session,omitempty"`
	Outcome  string     `json:"outcome"`
	ExitCode *int       `json:"exit_code,omitempty"`
	// Changed counts the session's changed paths once the run ended.
	Changed int `json:"changed,omitempty"`
	// Applied counts the paths accepted into the project (ApplyPolicy).
	Applied int    `json:"applied,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ScheduleRunRequest runs a schedule now (`airlock schedule run`).
type ScheduleRunRequest struct {
	// Wait answers once the run ended instead of once its session runs.
	Wait bool `json:"wait,omitempty"`
}
