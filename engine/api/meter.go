package api

import (
	"time"
)

// LifecycleEvent is a pause or resume of a session.
type LifecycleEvent struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // paused, resumed, hibernated, woken
	Reason string    `json:"reason"`
}

// Meter is what a session used.
type Meter struct {
	Session string `json:"session"`
	// CPUSeconds is active CPU time of the session's processes, kept
	// across container restarts.
	CPUSeconds     float64 `json:"cpu_seconds"`
	MemoryPeak     int64   `json:"memory_peak"`
	WorkspaceBytes int64   `json:"workspace_bytes"`
	EgressOut      int64   `json:"egress_out"`
	EgressIn       int64   `json:"egress_in"`
	// CostUSD is CPUSeconds at the engine's rate per core-hour.
	CostUSD float64 `json:"cost_usd"`
	Rate    float64 `json:"rate_per_core_hour"`
	// History is the session's CPU time as the engine sampled it (every
	// idle check, the last hour).
	History []CPUSample `json:"history,omitempty"`
	// The session's budgets (0: none).
	CPUBudgetSeconds float64 `json:"cpu_budget_seconds,omitempty"`
	CostBudget       float64 `json:"cost_budget,omitempty"`
}

// CPUSample is a session's CPU time at a moment.
type CPUSample struct {
	Time       time.Time `json:"time"`
	CPUSeconds float64   `json:"cpu_seconds"`
}
