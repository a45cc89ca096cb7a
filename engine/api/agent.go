package api

import (
	"encoding/json"
	"time"
)

// AgentRequest runs one agent turn in a session.
type AgentRequest struct {
	// Agent names the agent (claude, codex, opencode, aider, custom);
	// empty continues with the session's last agent.
	Agent  string `json:"agent,omitempty"`
	Prompt string `json:"prompt"`
	Model  string `json:"model,omitempty"`
	// BaseURL is the provider endpoint (a gateway, a local model).
	BaseURL string `json:"base_url,omitempty"`
	// APIKey, when set, is used for this turn instead of the engine's
	// stored secret; it never reaches the engine's records.
	APIKey string `json:"api_key,omitempty"`
	// Cmd and Events describe a custom agent.
	Cmd    string `json:"cmd,omitempty"`
	Events string `json:"events,omitempty"`
	// Schema, when set, is a JSON Schema the final answer must match.
	Schema json.RawMessage `json:"schema,omitempty"`
	// New starts a new conversation instead of continuing the last.
	New bool `json:"new,omitempty"`
}

// Turn is one agent turn and how it ended.
type Turn struct {
	Session      string          `json:"session"`
	N            int             `json:"n"`
	Agent        string          `json:"agent"`
	Prompt       string          `json:"prompt"`
	Model        string          `json:"model,omitempty"`
	AgentSession string          `json:"agent_session,omitempty"`
	State        string          `json:"state"` // running, done, failed, interrupted
	Started      time.Time       `json:"started"`
	Ended        *time.Time      `json:"ended,omitempty"`
	ExitCode     *int            `json:"exit_code,omitempty"`
	Final        string          `json:"final,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Usage        Usage           `json:"usage"`
	Error        string          `json:"error,omitempty"`
	// CPUSeconds is the session's active CPU during the turn.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
}

// AgentLine is one line of an agent turn's response stream (JSON lines):
// events as they happen, then the turn or an error.
type AgentLine struct {
	Event *Event `json:"event,omitempty"`
	Turn  *Turn  `json:"turn,omitempty"`
	Error *Error `json:"error,omitempty"`
}
