package api

import (
	"time"
)

// Command is one command run in a session.
type Command struct {
	ID        int64      `json:"id"`
	Session   string     `json:"session"`
	Argv      []string   `json:"argv"`
	TTY       bool       `json:"tty"`
	User      string     `json:"user"`
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	State     string     `json:"state"` // running, exited, interrupted
	Output    string     `json:"output,omitempty"`
	Truncated bool       `json:"truncated,omitempty"`
	// CPUSeconds is the session's active CPU while the command ran
	// (everything running in the session then counts).
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
}

// ExecRequest runs a command in a session over an upgraded connection
// (see Frame).
type ExecRequest struct {
	Argv   []string `json:"argv"`
	TTY    bool     `json:"tty,omitempty"`
	Stdin  bool     `json:"stdin,omitempty"`
	User   string   `json:"user,omitempty"`
	Env    []string `json:"env,omitempty"`
	Width  uint     `json:"width,omitempty"`
	Height uint     `json:"height,omitempty"`
}

// RunRequest creates a session and runs its first command over an
// upgraded connection: FrameSession comes first, then as for an exec.
type RunRequest struct {
	Create CreateRequest `json:"create"`
	Exec   ExecRequest   `json:"exec"`
}

// ExecStarted is the payload of FrameStarted.
type ExecStarted struct {
	Session string `json:"session"`
	Command int64  `json:"command"`
}

// ExecExit is the payload of FrameExit.
type ExecExit struct {
	ExitCode int `json:"exit_code"`
}

// Resize is the payload of FrameResize.
type Resize struct {
	Width  uint `json:"width"`
	Height uint `json:"height"`
}

// Signal is the payload of FrameSignal: a signal number for the command.
type Signal struct {
	Signal int `json:"signal"`
}
