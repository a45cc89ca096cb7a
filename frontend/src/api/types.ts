// The engine's API types, from src/api/schema.d.ts, which `npm run
// gen:api` generates from docs/openapi.yaml (itself checked against
// engine/api by engine/server's openapi_test.go). Durations are
// nanoseconds, times RFC 3339.
//
// Most types are the generated ones under their own names. Where the UI
// relies on more than the spec can say, a type here narrows the generated
// one, with the reason beside it: the known values of a string field
// (kept open with `string & {}`, since v1 only adds values), a list the
// engine may write as null, a request whose every field may be left out.
import type { components } from "./schema";

type Schemas = components["schemas"];

// Narrow<T, N> is T with N's fields in place of T's.
type Narrow<T, N> = Omit<T, keyof N> & N;

export type Limits = Schemas["Limits"];
export type Workspace = Schemas["Workspace"];
export type Hunk = Schemas["Hunk"];
export type Finding = Schemas["Finding"];
export type Stat = Schemas["Stat"];
export type Commit = Schemas["Commit"];
export type Usage = Schemas["Usage"];
export type Turn = Schemas["Turn"];
export type AgentRequest = Schemas["AgentRequest"];
export type AgentLine = Schemas["AgentLine"];
export type ApiErrorBody = Schemas["Error"];
export type EgressEntry = Schemas["EgressEntry"];
// A connection or request of a session under --net ask, held while the
// user is asked (GET /v1/net/pending), and the answers it takes.
export type PendingQuestion = Schemas["PendingQuestion"];
export type Answer = Schemas["Decide"]["answer"];
export type SavedPolicy = Schemas["SavedPolicy"];
export type CPUSample = Schemas["CPUSample"];
export type Meter = Schemas["Meter"];
export type Restored = Schemas["Restored"];
export type Command = Schemas["Command"];
export type LifecycleEvent = Schemas["LifecycleEvent"];
export type Secret = Schemas["Secret"];
export type Image = Schemas["Image"];
export type Progress = Schemas["Progress"];
export type VersionInfo = Schemas["VersionInfo"];
export type Settings = Schemas["Settings"];
// What a review reads and diffs at most (0: the default).
export type ReviewLimits = Schemas["ReviewLimits"];
// One event of GET /v1/events.
export type SessionEvent = Schemas["SessionEvent"];
export type Snapshot = Schemas["Snapshot"];
export type Schedule = Schemas["Schedule"];
// One run of a schedule; its outcome is one of engine/api's Run* values.
export type ScheduleRun = Narrow<
  Schemas["ScheduleRun"],
  { outcome: "running" | "done" | "failed" | "policy" | "error" | "skipped" | (string & {}) }
>;

// The modes the settings and the network view offer.
export type EgressPolicy = Narrow<Schemas["EgressPolicy"], { mode: "allow-all" | "deny-all" | "custom" | (string & {}) }>;

// The states the session list shows and filters by.
export type Session = Narrow<
  Schemas["Session"],
  { state: "creating" | "running" | "paused" | "hibernated" | "stopped" | "failed" | (string & {}) }
>;

// A request leaves out what it does not set; the engine fills in the
// defaults (the spec's required fields are what the engine writes).
export type CreateRequest = Omit<Partial<Schemas["CreateRequest"]>, "limits"> & { project: string; limits?: Partial<Limits> };

// A change's kind (engine/api's Kind* constants).
export type Kind = "added" | "modified" | "mode" | "deleted" | "replaced" | "renamed" | (string & {});

// A side of a conflict the file lacks (added on one side only) comes as
// null: a Go nil list.
export type Conflict = Narrow<
  Schemas["Conflict"],
  {
    base: string[] | null;
    host: string[] | null;
    agent: string[] | null;
  }
>;

export type FileDiff = Narrow<
  Schemas["FileDiff"],
  {
    kind: Kind;
    conflicts?: Conflict[];
  }
>;

// files is there unless stat=1 (the UI never asks it), and the UI reads the
// FileDiffs it narrowed above.
export type Diff = Narrow<Schemas["Diff"], { files: FileDiff[] }>;

// What ignore rules left out of a review (or an accept): counted, not listed.
export type Ignored = Schemas["Ignored"];
// How a diff treats ignored changes: summarised (the default), listed alone, or with the rest.
export type IgnoredMode = "" | "only" | "all";

// The sides an accept of a conflict can take.
export type Selection = Narrow<Schemas["Selection"], { take?: "agent" | "host" | "markers" }>;

export type Outcomes = Narrow<Schemas["Outcomes"], { outcomes: Outcome[] }>;

export type Outcome = Narrow<
  Schemas["Outcome"],
  {
    kind: Kind;
    // Set when the accept left the change in the session on purpose.
    left?: "held" | "flagged" | "unreviewed" | (string & {});
  }
>;

// The event types the agent view renders each its own way.
export type AgentEvent = Narrow<
  Schemas["Event"],
  { type: "session" | "message" | "tool_call" | "file_edit" | "command" | "usage" | "error" | "turn_done" | (string & {}) }
>;

// The layers a snapshot's view names.
export type SnapshotLayer = Narrow<Schemas["SnapshotLayer"], { what: "container" | "workspace" | (string & {}) }>;

// A session port forwarded to the host (engine/api Port).
export type Port = Schemas["Port"];
// A port the session listens on that is not forwarded (engine/api ListeningPort).
export type ListeningPort = Schemas["ListeningPort"];

// The session's timeline (engine/api Checkpoint): one state of its
// workspace, after a turn, a command, an undo, a fork, or periodically.
export type Checkpoint = Narrow<
  Schemas["Checkpoint"],
  { kind: "turn" | "command" | "periodic" | "undo" | "fork" | "hibernate" | (string & {}) }
>;
// What an undo did.
export type Undone = Narrow<Schemas["Undone"], { to: Checkpoint; checkpoint: Checkpoint }>;
export type UndoRequest = Schemas["UndoRequest"];
export type ForkRequest = Schemas["ForkRequest"];
// A session's diff with, for each hunk, the checkpoint that last changed it.
export type HunkBlame = Schemas["HunkBlame"];
export type Blame = Narrow<Schemas["Blame"], { diff: Diff }>;
