package ci

import (
	"encoding/json"

	"github.com/airlock/airlock/engine/api"
)

// SchemaVersion names the verdict's format; it changes only when a field
// is removed or changes meaning (fields are added freely).
const SchemaVersion = "airlock.verdict/v1"

// Outcomes and their exit codes (docs/CI.md).
const (
	Success        = "success"              // 0: the work succeeded; nothing held, flagged or conflicting
	AgentFailed    = "agent_failed"         // 1: the agent or command failed
	Held           = "held"                 // 2: changes need a human (held by policy, or conflicts)
	Violation      = "policy_violation"     // 3: a scanner flagged a change (a secret, a setuid file...)
	Infrastructure = "infrastructure_error" // 4: Docker, the engine or the machine failed
	InvalidInput   = "invalid_input"        // 64: bad flags, prompt file, policy or project
	OutputFailed   = "output_failed"        // 73: out/ could not be written (full, read-only)
)

// ExitCode is the process exit code of an outcome.
func ExitCode(outcome string) int {
	switch outcome {
	case Success:
		return 0
	case AgentFailed:
		return 1
	case Held:
		return 2
	case Violation:
		return 3
	case InvalidInput:
		return 64
	case OutputFailed:
		return 73
	}
	return 4
}

// Verdict is verdict.json: what a CI run did and found.
type Verdict struct {
	Schema   string `json:"schema"`
	Outcome  string `json:"outcome"`
	ExitCode int    `json:"exit_code"`
	// Message says in a sentence what happened and what to do.
	Message string `json:"message"`

	Project Project `json:"project"`
	Session string  `json:"session,omitempty"`
	Kept    bool    `json:"kept,omitempty"` // --keep: the session was left for debugging

	Changes   []Change   `json:"changes"`
	Held      []HeldFile `json:"held"`
	Findings  []Finding  `json:"findings"`
	Conflicts []Conflict `json:"conflicts"`
	// Ignored and SessionIgnored count the changes ignore rules cover (the
	// project's own, a rule only the session wrote): not reviewed, not in
	// the patch, never applied; a finding in them is listed there and
	// fails nothing.
	Ignored        *api.Ignored `json:"ignored,omitempty"`
	SessionIgnored *api.Ignored `json:"session_ignored,omitempty"`
	// Applied are the paths written into the project (--apply).
	Applied []string `json:"applied"`
	Patch   string   `json:"patch,omitempty"` // the patch file, relative to out/
	// Audit is the run's audit bundle (docs/AUDIT.md), relative to out/.
	Audit string `json:"audit,omitempty"`
	// TurnPatches are turn-N.patch, one per agent turn (--patch-per-turn).
	TurnPatches []string `json:"turn_patches,omitempty"`

	Agent   *AgentResult   `json:"agent,omitempty"`
	Command *CommandResult `json:"command,omitempty"`
	Usage   Usage          `json:"usage"`
	Egress  Egress         `json:"egress"`
	Timings Timings        `json:"timings"`
}

// Project is the checkout the run worked on.
type Project struct {
	Path string `json:"path"`
	// Dirty: the checkout had uncommitted changes, which the session saw
	// and the patch is relative to.
	Dirty bool   `json:"dirty"`
	Head  string `json:"head,omitempty"` // the git commit, when a repository
}

// Change is one changed path.
type Change struct {
	Path     string `json:"path"`
	Kind     string `json:"kind"` // added, modified, deleted, renamed, type_changed
	From     string `json:"from,omitempty"`
	Added    int    `json:"added"`
	Removed  int    `json:"removed"`
	Binary   bool   `json:"binary,omitempty"`
	Held     bool   `json:"held,omitempty"`
	Flagged  bool   `json:"flagged,omitempty"`
	Conflict bool   `json:"conflict,omitempty"`
	Applied  bool   `json:"applied,omitempty"`
}

// HeldFile is a change the policy keeps for a human.
type HeldFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Finding is a scanner's finding in a change.
type Finding struct {
	Path    string `json:"path"`
	Scanner string `json:"scanner"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
}

// Conflict is a change the project's checkout also changed since the run
// started.
type Conflict struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// AgentResult is the agent's turn.
type AgentResult struct {
	Agent    string          `json:"agent"`
	Model    string          `json:"model,omitempty"`
	State    string          `json:"state"` // done, failed, interrupted
	ExitCode *int            `json:"exit_code,omitempty"`
	Final    string          `json:"final,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"` // the typed answer, with --schema
	Error    string          `json:"error,omitempty"`
	Tokens   api.Usage       `json:"tokens"`
	Events   int             `json:"events"`
}

// CommandResult is the command's run.
type CommandResult struct {
	Argv     []string `json:"argv"`
	ExitCode int      `json:"exit_code"`
}

// Usage is what the session used.
type Usage struct {
	CPUSeconds     float64 `json:"cpu_seconds"`
	CostUSD        float64 `json:"cost_usd"`
	MemoryPeak     int64   `json:"memory_peak"`
	WorkspaceBytes int64   `json:"workspace_bytes"`
}

// Egress summarizes the session's connections.
type Egress struct {
	Connections int        `json:"connections"`
	BytesOut    int64      `json:"bytes_out"`
	BytesIn     int64      `json:"bytes_in"`
	Hosts       []string   `json:"hosts"`
	Blocked     []Blockage `json:"blocked"`
}

// Blockage is a connection the policy refused.
type Blockage struct {
	Host   string `json:"host"`
	Port   int    `json:"port,omitempty"`
	Kind   string `json:"kind"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Timings are seconds spent in each step.
type Timings struct {
	Total  float64 `json:"total"`
	Create float64 `json:"create"`
	Work   float64 `json:"work"` // the agent's turn or the command
	Review float64 `json:"review"`
	Apply  float64 `json:"apply,omitempty"`
}
