// Package api is the contract between the engine and its clients (the CLI,
// the desktop app, CI tooling): the JSON types of the local HTTP API, its
// version, the error body and the framing of interactive streams. It
// imports nothing of the project (layout_test.go holds it to that), so a
// client depends on it without pulling in the engine, the review or the
// agents: the engine converts its own types to these (engine/wire.go).
// docs/API.md documents the endpoints.
package api

import (
	"time"
)

// Version is the API version; it is the path prefix of every endpoint.
const Version = "v1"

// Level counts the additions made to the API within Version (endpoints,
// query parameters, fields), so that a client can tell whether an engine
// has what it needs: what came at level N is there when the engine's
// level is N or more. An engine from before levels reports none (0).
// Level 1: GET /version reports the level; GET /sessions/{id}/commands
// takes since=ID.
// Level 2: /sessions/{id}/ports (preview ports).
// Level 3: the ask mode (/net/pending, /net/decide, ask_timeout),
// /sessions/{id}/policy/save.
// Level 4: POST /sessions/{id}/hibernate and /wake; the hibernated state;
// CreateRequest.Workspace; /schedules; a diff's stats as text lines
// (StatLines) for a client that accepts them.
// Level 5: GET /sessions/{id}/ports/listening, basic auth on ports.
// Level 6: /sessions/{id}/checkpoints, .../checkpoints/diff, .../undo,
// .../fork, .../blame (the timeline of checkpoints).
// Level 7: a blame's hunks name their command's line and the agent's
// call (HunkBlame.CommandLine, .Call); events carry a call's id and an
// edit's text (Event.ID, .Wrote).
// Level 8: ignore rules: Diff.ignored/session_ignored, ?ignored=only|all,
// Change.ignored/ignored_by/generated, the stat flags g, i and s,
// Selection.include_ignored, Outcomes.ignored/session_ignored.
const Level = 8

// Session states.
const (
	StateCreating = "creating"
	StateRunning  = "running"
	StateStopped  = "stopped" // the container exited; the workspace is intact
	StateFailed   = "failed"  // the workspace is gone (e.g. a host reboot)
	// StateHibernated: no container and no tmpfs (no memory used); the
	// workspace is in its last checkpoint on disk and new work wakes it.
	StateHibernated = "hibernated"
)

// Workspace kinds (CreateRequest.Workspace, Settings.Workspace).
const (
	WorkspaceTmpfs = "tmpfs" // the default: in memory, size-capped
	WorkspaceDisk  = "disk"  // on the state directory's file system
)

// Limits are a session's resource caps. Memory includes the workspace,
// whose writes are charged to the container's memory.
type Limits struct {
	CPUs          float64 `json:"cpus"`
	Memory        int64   `json:"memory"`
	Pids          int64   `json:"pids"`
	WorkspaceSize int64   `json:"workspace_size"`
}

// Session is one sandbox: a container over an overlay of a project.
type Session struct {
	ID          string    `json:"id"`
	Project     string    `json:"project"`
	Image       string    `json:"image"`
	State       string    `json:"state"`
	Created     time.Time `json:"created"`
	ContainerID string    `json:"container_id,omitempty"`
	User        string    `json:"user"`
	Limits      Limits    `json:"limits"`
	// Changed counts changed paths; -1 when the workspace is unreadable.
	Changed   int        `json:"changed"`
	Workspace *Workspace `json:"workspace,omitempty"`
	Error     string     `json:"error,omitempty"`
	// Egress is the session's network policy (nil: no network of its own).
	Egress *EgressPolicy `json:"egress,omitempty"`
	// IdleTimeout is how long idle before it pauses (negative: never).
	IdleTimeout time.Duration `json:"idle_timeout"`
	CPUBudget   time.Duration `json:"cpu_budget,omitempty"`
	CostBudget  float64       `json:"cost_budget,omitempty"`
	// Agent is the agent of the session's last turn ("" if none).
	Agent string `json:"agent,omitempty"`
	// CPUSeconds is the session's active CPU time; CostUSD its cost.
	CPUSeconds float64 `json:"cpu_seconds"`
	CostUSD    float64 `json:"cost_usd"`
	// IdleFor is how long a running session has been idle (no work, no
	// API call, its processes quiet).
	IdleFor time.Duration `json:"idle_for,omitempty"`
	// WorkspaceKind is where the workspace layer lives: tmpfs or disk.
	WorkspaceKind string `json:"workspace_kind,omitempty"`
	// HibernateAfter is how long idle before it hibernates (negative:
	// never).
	HibernateAfter time.Duration `json:"hibernate_after,omitempty"`
	// Hibernation describes a hibernated session (nil otherwise).
	Hibernation *Hibernation `json:"hibernation,omitempty"`
}

// Hibernation is what a hibernated session kept: the checkpoint it
// wakes from and what it holds on disk. Processes are never kept.
type Hibernation struct {
	Checkpoint uint64    `json:"checkpoint,omitempty"` // 0: a disk workspace kept as it is
	Time       time.Time `json:"time"`                 // of that checkpoint, or of the hibernation
	DiskBytes  int64     `json:"disk_bytes"`           // its checkpoints (and disk workspace) on disk
	Reason     string    `json:"reason,omitempty"`     // asked, idle for 2h0m0s, host restarted
	Processes  bool      `json:"processes,omitempty"`  // its processes were kept (CRIU): a wake restores them
}

// HibernateRequest hibernates a session.
type HibernateRequest struct {
	// KeepProcesses checkpoints the session's running processes (CRIU,
	// through Docker's checkpoint API) so that a wake restores them; refused
	// where the host cannot. Without it they are stopped.
	KeepProcesses bool `json:"keep_processes,omitempty"`
}

// Workspace is the fill level of a session's tmpfs.
type Workspace struct {
	Used  int64 `json:"used"`
	Size  int64 `json:"size"`
	Full  bool  `json:"full"`
	Files int64 `json:"files"`
}

// CreateRequest creates a session. Zero values take the engine's defaults.
type CreateRequest struct {
	Project string `json:"project"`
	Image   string `json:"image,omitempty"`
	// User is "uid:gid" or a name known to the image; empty means the
	// project owner's uid and gid.
	User   string   `json:"user,omitempty"`
	Limits Limits   `json:"limits,omitempty"`
	Env    []string `json:"env,omitempty"`
	// CABundle is a PEM file on the engine's host added to the session's
	// trusted CAs.
	CABundle string `json:"ca_bundle,omitempty"`
	// Egress is the session's network policy; nil takes the engine's
	// default.
	Egress *EgressPolicy `json:"egress,omitempty"`
	// IdleTimeout pauses the session after that long idle (0: the
	// engine's default; negative: never, `--keep-alive`).
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// Budgets pause the session once it used that much active CPU, or
	// cost that much (0: none).
	CPUBudget  time.Duration `json:"cpu_budget,omitempty"`
	CostBudget float64       `json:"cost_budget,omitempty"`
	// Workspace is where the workspace layer lives: "tmpfs" or "disk"
	// ("": the engine's default).
	Workspace string `json:"workspace,omitempty"`
	// HibernateAfter hibernates the session after that long idle (0: the
	// engine's default, 2h; negative: never).
	HibernateAfter time.Duration `json:"hibernate_after,omitempty"`
}

// Budgets changes a session's budgets; raising one that paused it
// resumes it. Nil fields stay as they are; 0 removes a budget.
type Budgets struct {
	CPU  *time.Duration `json:"cpu,omitempty"`
	Cost *float64       `json:"cost,omitempty"`
}

// Error is the body of every non-2xx response and of FrameError.
type Error struct {
	Class   string `json:"class"`
	Message string `json:"message"`
}

// Image is a local image Airlock knows how to build or use.
type Image struct {
	Name    string    `json:"name"`
	ID      string    `json:"id"`
	Size    int64     `json:"size"`
	Created time.Time `json:"created"`
	Recipe  string    `json:"recipe,omitempty"`
}

// ImageBuildRequest builds an image locally.
type ImageBuildRequest struct {
	// Kind is "base" (Debian with build tools, the default), "agents"
	// (base plus agent CLIs) or "tiny" (busybox, for tests).
	Kind string `json:"kind,omitempty"`
	// Agents, for kind "agents", names the agent CLIs to install on top
	// of the default image.
	Agents []string `json:"agents,omitempty"`
	Name   string   `json:"name,omitempty"`
	Force  bool     `json:"force,omitempty"`
	Suite  string   `json:"suite,omitempty"`
	Mirror string   `json:"mirror,omitempty"`
}

// Progress is one line of a streamed long operation (JSON lines).
type Progress struct {
	Stage   string        `json:"stage,omitempty"`
	Message string        `json:"message,omitempty"`
	Current int           `json:"current,omitempty"`
	Total   int           `json:"total,omitempty"`
	Elapsed time.Duration `json:"elapsed"`
	Done    bool          `json:"done,omitempty"`
	Image   *Image        `json:"image,omitempty"`
	Error   *Error        `json:"error,omitempty"`
}

// VersionInfo answers GET /v1/version.
type VersionInfo struct {
	API           string `json:"api"`
	Level         int    `json:"level"` // the engine's API level (see Level)
	Engine        string `json:"engine"`
	DockerVersion string `json:"docker_version,omitempty"`
	DockerAPI     string `json:"docker_api,omitempty"`
	PID           int    `json:"pid"`
}

// StatePaused is a session frozen by `airlock pause` or for being idle;
// new work resumes it.
const StatePaused = "paused"

// Settings are the engine's defaults for new sessions. In a change, zero
// fields stay as they are.
type Settings struct {
	Image       string        `json:"image,omitempty"`
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// HibernateAfter hibernates sessions idle that long (0: the
	// default, 2h; negative: never).
	HibernateAfter time.Duration `json:"hibernate_after,omitempty"`
	// Workspace is where new sessions' workspaces live: tmpfs or disk.
	Workspace       string       `json:"workspace,omitempty"`
	CostPerCoreHour float64      `json:"cost_per_core_hour,omitempty"`
	CABundle        string       `json:"ca_bundle,omitempty"`
	Limits          Limits       `json:"limits"`
	Egress          EgressPolicy `json:"egress"`
	Review          ReviewLimits `json:"review"`
	// WarmPool is how many warm containers the engine keeps ready for
	// each of the two kinds of session asked for last (0: unchanged, or
	// the default, 2; negative: none).
	WarmPool int `json:"warm_pool,omitempty"`
}

// ReviewLimits bound what a review reads and renders of one session's
// files; zero fields are the defaults (8 MiB, 64 KiB, 64 MiB). A file over
// a limit is shown by its size and SHA-256 and left out of patches (a
// comment says how to accept it).
type ReviewLimits struct {
	// MaxText is the largest file (either side) given a text diff or put
	// in a patch, in bytes.
	MaxText int64 `json:"max_text,omitempty"`
	// MaxLine is the longest line a text diff shows, in bytes.
	MaxLine int `json:"max_line,omitempty"`
	// MaxTotalText is the text one review diffs over all its files.
	MaxTotalText int64 `json:"max_total_text,omitempty"`
}

// SessionEvent is one message of GET /v1/events, a stream of server-sent
// events (text/event-stream) whose every `data:` line is one of these as
// JSON. The first is the whole list; after it, each change as it happens.
type SessionEvent struct {
	Type SessionEventType `json:"type"`
	// Sessions: every session (type "sessions").
	Sessions []Session `json:"sessions,omitempty"`
	// Session: one that was created or changed, as it is now (type
	// "session").
	Session *Session `json:"session,omitempty"`
	// ID: the session that is gone (type "removed").
	ID string `json:"id,omitempty"`
}

// SessionEventType says what a SessionEvent carries.
type SessionEventType string

// The types of SessionEvent.
const (
	SessionsListed SessionEventType = "sessions" // the whole list (the stream's first event)
	SessionChanged SessionEventType = "session"  // one session as it is now
	SessionRemoved SessionEventType = "removed"  // a session is gone
)
