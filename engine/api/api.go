// Package api is the contract between the engine and its clients (the CLI,
// the desktop app, CI tooling): the JSON types of the local HTTP API, its
// version, the error body and the framing of interactive streams. It
// imports nothing of the project (layout_test.go holds it to that), so a
// client depends on it without pulling in the engine, the review or the
// agents: the engine converts its own types to these (engine/wire.go).
// docs/API.md documents the endpoints.
package api

import (
	"encoding/json"
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
const Level = 6

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

// Secret is a stored secret's name (values never leave the engine).
type Secret struct {
	Name    string    `json:"name"`
	Updated time.Time `json:"updated"`
}

// SecretRequest sets a secret.
type SecretRequest struct {
	Value string `json:"value"`
}

// EgressPolicy is a session's network policy. Mode is allow-all, deny-all
// or custom; rules are domains (example.com), wildcards (*.example.com)
// or CIDRs (198.51.100.0/24), each with an optional :PORT. Deny beats
// allow. Private, loopback, link-local and metadata addresses stay
// blocked unless Private is set (and, for metadata, a rule names it).
type EgressPolicy struct {
	Mode    string   `json:"mode"`
	Allow   []string `json:"allow,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	Private bool     `json:"private,omitempty"`
	// Inject adds headers holding secrets to a host's requests in
	// transit: "api.example.com:x-api-key=secret:NAME".
	Inject []string `json:"inject,omitempty"`
	// Inspect names hosts whose TLS the proxy ends with the engine's CA,
	// so that request rules ("GET api.example.com/v1/**": a method and
	// a path glob) apply to their HTTPS requests.
	Inspect []string `json:"inspect,omitempty"`
	// AskTimeout is how long the ask mode holds a question before it is
	// a deny (0: 60 s; at most an hour).
	AskTimeout time.Duration `json:"ask_timeout,omitempty"`
}

// PolicyChange edits a running session's policy: rules to add to each
// list, or a whole new policy.
type PolicyChange struct {
	Set     *EgressPolicy `json:"set,omitempty"`
	Allow   []string      `json:"allow,omitempty"`
	Deny    []string      `json:"deny,omitempty"`
	Inject  []string      `json:"inject,omitempty"`
	Inspect []string      `json:"inspect,omitempty"`
	Mode    string        `json:"mode,omitempty"`
	Private *bool         `json:"private,omitempty"`
	// AskTimeout, when set, replaces the ask mode's timeout.
	AskTimeout time.Duration `json:"ask_timeout,omitempty"`
	// FromLog allows what log entry FromLog was about.
	FromLog int64 `json:"from_log,omitempty"`
}

// SavedPolicy is what `airlock policy save` wrote: a session's policy,
// in the egress section of its project's policy file.
type SavedPolicy struct {
	File   string       `json:"file"`
	Policy EgressPolicy `json:"policy"`
}

// EgressEntry is one connection (or DNS lookup) of a session.
type EgressEntry struct {
	ID       int64         `json:"id"`
	Time     time.Time     `json:"time"`
	Kind     string        `json:"kind"` // http, connect, tcp, dns
	Host     string        `json:"host"`
	Port     int           `json:"port,omitempty"`
	Method   string        `json:"method,omitempty"` // of a request the proxy read
	Path     string        `json:"path,omitempty"`   // cleaned as rules match it, no query
	Addr     string        `json:"addr,omitempty"`
	BytesOut int64         `json:"bytes_out"`
	BytesIn  int64         `json:"bytes_in"`
	Allowed  bool          `json:"allowed"`
	Rule     string        `json:"rule,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Duration time.Duration `json:"duration"`
}

// PendingQuestion is a connection or request of a session under the ask
// mode that no rule decided, held while the user is asked.
type PendingQuestion struct {
	ID      int64     `json:"id"`
	Session string    `json:"session"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // connect, http, https
	Host    string    `json:"host"`
	Port    int       `json:"port"`
	Method  string    `json:"method,omitempty"` // "" for a CONNECT whose requests the proxy does not read
	Path    string    `json:"path,omitempty"`
}

// Decide answers a pending question: allow-once, allow-always (adds the
// destination to the session's running policy) or deny.
type Decide struct {
	ID     int64  `json:"id"`
	Answer string `json:"answer"`
}

// StatePaused is a session frozen by `airlock pause` or for being idle;
// new work resumes it.
const StatePaused = "paused"

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

// Snapshot is a session's state captured as an OCI image in the engine's
// snapshot store: the container's own changes (installed packages, the
// agent's home) and the workspace's changes, each a layer.
type Snapshot struct {
	ID      string    `json:"id"`
	Name    string    `json:"name,omitempty"`
	Session string    `json:"session"` // the session it was taken of
	Project string    `json:"project"`
	Image   string    `json:"image"`    // the session's image, by name
	ImageID string    `json:"image_id"` // and by id
	Created time.Time `json:"created"`
	// Digest is the image manifest's digest in the store.
	Digest string          `json:"digest"`
	Layers []SnapshotLayer `json:"layers"`
	// Frozen is how long the session was frozen to capture it; Took the
	// whole snapshot.
	Frozen time.Duration `json:"frozen"`
	Took   time.Duration `json:"took"`
	// Spec is what a restore creates the new session with. It is empty for
	// a snapshot imported from an archive: an archive's settings are never
	// used, a restore takes them from its request.
	Spec CreateRequest `json:"spec"`
}

// SnapshotLayer is one layer of a snapshot.
type SnapshotLayer struct {
	What   string `json:"what"` // "container" or "workspace"
	Digest string `json:"digest"`
	Size   int64  `json:"size"`   // bytes of the layer tar
	Files  int    `json:"files"`  // files, links and devices in it
	Bytes  int64  `json:"bytes"`  // file content
	Delete int    `json:"delete"` // deletions and opaque directories
}

// SnapshotRequest takes a snapshot of a session.
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// RestoreRequest makes sessions from a snapshot.
type RestoreRequest struct {
	// N sessions (1 when 0), made in parallel.
	N int `json:"n,omitempty"`
	// Project replaces the snapshot's project. An imported snapshot needs
	// it: it has no settings of its own.
	Project string `json:"project,omitempty"`
	// Image and User replace the snapshot's; for an imported snapshot the
	// image defaults to the one its archive carried, the user to the
	// project's owner.
	Image string `json:"image,omitempty"`
	User  string `json:"user,omitempty"`
}

// Restored is what a restore made.
type Restored struct {
	Sessions []Session `json:"sessions"`
	// Warnings are things the user should know, e.g. the image was
	// rebuilt since the snapshot.
	Warnings []string `json:"warnings,omitempty"`
}

// Imported is what an import made.
type Imported struct {
	Snapshot Snapshot `json:"snapshot"`
	Warnings []string `json:"warnings,omitempty"`
}

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
