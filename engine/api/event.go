package api

import (
	"encoding/json"
	"time"
)

// Event types: what an agent did, the same for every agent (package
// harness maps each agent's output to them).
const (
	EventSession  = "session"   // the agent's conversation id, to continue it
	EventMessage  = "message"   // assistant text
	EventToolCall = "tool_call" // the agent called a tool
	EventFileEdit = "file_edit" // the agent changed a file (Path)
	EventCommand  = "command"   // a command the agent ran finished (ExitCode)
	EventUsage    = "usage"     // tokens and cost of a model call or of the turn
	EventError    = "error"     // something went wrong (the turn may go on)
	EventTurnDone = "turn_done" // the turn ended: final text, exit code, total usage
)

// Event is one thing an agent did. Its JSON is harness.Event's.
type Event struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Turn     int       `json:"turn,omitempty"`
	Text     string    `json:"text,omitempty"`
	Tool     string    `json:"tool,omitempty"`
	Input    string    `json:"input,omitempty"` // the tool's input, summarized
	Path     string    `json:"path,omitempty"`  // relative to the workspace
	Command  string    `json:"command,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Usage    *Usage    `json:"usage,omitempty"`
	Session  string    `json:"session,omitempty"`
	// Result is the turn's validated structured answer (with --schema).
	Result json.RawMessage `json:"result,omitempty"`
	// ID is a tool call's id as the agent's CLI names it: a tool_call and
	// the file_edit events of the same call share it.
	ID string `json:"id,omitempty"`
	// Wrote is, on a file_edit, the text the call wrote to Path where the
	// agent's event carries it (at most 8 KiB, whole lines).
	Wrote string `json:"wrote,omitempty"`
}

// Usage is tokens and cost.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}
