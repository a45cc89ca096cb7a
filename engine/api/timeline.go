package api

import "time"

// Kinds of checkpoints (Checkpoint.Kind).
const (
	CheckpointTurn     = "turn"     // the end of an agent turn
	CheckpointCommand  = "command"  // the end of a run or exec command that changed the workspace
	CheckpointPeriodic = "periodic" // while the workspace is dirty
	CheckpointUndo     = "undo"     // the workspace after an undo
	CheckpointFork     = "fork"     // what a session forked from a turn started with
)

// Checkpoint is a recorded state of a session's workspace (its upper
// layer), kept on disk: the session's timeline.
type Checkpoint struct {
	ID   int64     `json:"id"`
	Kind string    `json:"kind"` // Checkpoint*, or another recorder's ("hibernate")
	Time time.Time `json:"time"`
	// Turn is the agent turn it ended (Kind turn), Command the command
	// (Kind command), UndoTo the checkpoint an undo went back to.
	Turn    int   `json:"turn,omitempty"`
	Command int64 `json:"command,omitempty"`
	UndoTo  int64 `json:"undo_to,omitempty"`
	// From is the checkpoint its changes are counted against: the newest
	// before the turn or command started (0: the session's start).
	From int64 `json:"from"`
	// Files, Added and Removed are what changed since From: paths, and
	// lines of text files.
	Files   int `json:"files"`
	Added   int `json:"added"`
	Removed int `json:"removed"`
	// CPUSeconds, Usage: the turn's or command's, where recorded.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	Usage      *Usage  `json:"usage,omitempty"`
	// Pins name what keeps the checkpoint from being pruned (a fork).
	Pins []string `json:"pins,omitempty"`
}

// CheckpointDiffQuery names what a checkpoint diff compares: one turn
// (Turn), or the state after turn From to the state after turn To (0:
// the session's start; To 0: the newest checkpoint), or two checkpoints
// by id.
type CheckpointDiffQuery struct {
	Turn           int
	From, To       int
	FromCheckpoint int64
	ToCheckpoint   int64
}

// UndoRequest says where an undo goes: to the state after turn Turn, or
// to checkpoint Checkpoint; neither: to the state before the last turn.
type UndoRequest struct {
	Turn       int   `json:"turn,omitempty"`
	Checkpoint int64 `json:"checkpoint,omitempty"`
}

// Undone is what an undo did.
type Undone struct {
	// To is the checkpoint the workspace went back to; Checkpoint the
	// undo's own (undo it with `airlock undo --checkpoint` of the one
	// before).
	To         Checkpoint `json:"to"`
	Checkpoint Checkpoint `json:"checkpoint"`
	// Before is the checkpoint of the workspace as it was before the undo.
	Before int64 `json:"before"`
	// Stopped counts the session's processes stopped first.
	Stopped int `json:"stopped"`
	Files   int `json:"files"` // paths put back
	// Layers says the container layer and home went back too (the
	// session's container was made again around its workspace).
	Layers bool `json:"layers,omitempty"`
}

// ForkRequest makes N sessions (1 when 0) from the state after turn Turn
// (or checkpoint Checkpoint) of a session.
type ForkRequest struct {
	Turn       int   `json:"turn,omitempty"`
	Checkpoint int64 `json:"checkpoint,omitempty"`
	N          int   `json:"n,omitempty"`
}

// Blame names, for each hunk of a session's diff, the checkpoint (turn or
// command) that last changed its lines.
type Blame struct {
	Session string      `json:"session"`
	Hunks   []HunkBlame `json:"hunks"`
	// Diff is the diff the hunks are of (as GET .../diff gives it).
	Diff Diff `json:"diff"`
}

// HunkBlame is one hunk's: Checkpoint 0 when its lines changed after the
// newest checkpoint (not recorded yet) or were not found in any.
type HunkBlame struct {
	Path       string `json:"path"`
	Hunk       string `json:"hunk"` // the hunk's id in the diff
	NewStart   int    `json:"new_start"`
	Checkpoint int64  `json:"checkpoint"`
	Kind       string `json:"kind,omitempty"`
	// Turn and Command are the checkpoint's or, for a periodic one, the
	// turn (else the command) that was running when it was taken.
	Turn    int   `json:"turn,omitempty"`
	Command int64 `json:"command,omitempty"`
	// CommandLine is that command's argv, joined (at most 200 bytes).
	CommandLine string `json:"command_line,omitempty"`
	// Call is, for a turn, the agent's tool call that edited the hunk's
	// file, as far as the turn's events tell (Match says how far); nil
	// when no event of the turn names the file (a command the agent ran
	// may have changed it).
	Call *BlameCall `json:"call,omitempty"`
}

// How a hunk was matched to its call (BlameCall.Match).
const (
	// BlameMatchText: the call's new text holds the hunk's added lines,
	// whole or (an edit of a few lines) as part of them: of the turn's
	// edits of the file, the one holding the most of them, the later one
	// when two hold as many.
	BlameMatchText = "text"
	// BlameMatchLast: the last edit of the file in the turn; the events
	// do not tell which of its edits made these lines (they carry no
	// text, the text does not hold them, or the hunk only removes).
	BlameMatchLast = "last"
)

// BlameCall is an agent's tool call named by blame.
type BlameCall struct {
	// Seq is its file_edit event's place in the turn's events (from 1),
	// as GET .../events?turn=N lists them.
	Seq   int       `json:"seq"`
	ID    string    `json:"id,omitempty"` // the agent's id of the call
	Tool  string    `json:"tool"`
	Input string    `json:"input,omitempty"` // its input, summarized: the command or the file's path
	Time  time.Time `json:"time"`
	Match string    `json:"match"` // BlameMatch*
	// Edits counts the turn's edits of the file since the previous
	// checkpoint, this one among them.
	Edits int `json:"edits"`
}
