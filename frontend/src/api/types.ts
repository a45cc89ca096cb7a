// The engine's API types (engine/api, docs/API.md). Durations are
// nanoseconds, times RFC 3339.

export interface Limits {
  cpus: number;
  memory: number;
  pids: number;
  workspace_size: number;
}

export interface EgressPolicy {
  mode: "allow-all" | "deny-all" | "custom" | (string & {});
  allow?: string[];
  deny?: string[];
  private?: boolean;
  inject?: string[];
}

export interface Session {
  id: string;
  project: string;
  image: string;
  state: "creating" | "running" | "paused" | "stopped" | "failed" | (string & {});
  created: string;
  user: string;
  limits: Limits;
  changed: number;
  workspace?: { used: number; size: number; full: boolean; files: number };
  error?: string;
  egress?: EgressPolicy;
  idle_timeout: number;
  cpu_budget?: number;
  cost_budget?: number;
  agent?: string;
  cpu_seconds: number;
  cost_usd: number;
  idle_for?: number;
}

export interface CreateRequest {
  project: string;
  image?: string;
  limits?: Partial<Limits>;
  env?: string[];
  egress?: EgressPolicy;
  idle_timeout?: number;
  cpu_budget?: number;
  cost_budget?: number;
}

export type Kind = "added" | "modified" | "deleted" | "renamed" | "type_changed" | (string & {});

export interface Hunk {
  id: string;
  old_start: number;
  old_lines: number;
  new_start: number;
  new_lines: number;
  lines: string[];
  // What accepting the hunk writes (path, place, lines), for an accept
  // pinned to what was shown; the id is only a short name.
  digest?: string;
}

export interface Conflict {
  id: string;
  host_start: number;
  host_lines: number;
  base: string[] | null;
  host: string[] | null;
  agent: string[] | null;
}

export interface Finding {
  scanner: string;
  message: string;
  line?: number;
  rule?: string;
}

export interface FileDiff {
  id: string;
  path: string;
  kind: Kind;
  type: string;
  old_type?: string;
  size: number;
  old_size: number;
  binary?: boolean;
  content_type?: string;
  // Why a text file gets no text diff (its size, a line's length, the
  // review's text budget): it is shown like a binary.
  too_large?: string;
  // The session's file's SHA-256 when it gets no text diff.
  content_sum?: string;
  link?: string;
  old_link?: string;
  note?: string;
  host_changed?: boolean;
  merged?: boolean;
  conflict?: boolean;
  conflict_reason?: string;
  from?: string;
  similarity?: number;
  hunks?: Hunk[];
  conflicts?: Conflict[];
  held?: string;
  auto_accept?: boolean;
  findings?: Finding[];
  // The session's version as shown (type, mode, content): an accept that
  // sends it takes that version or nothing.
  digest?: string;
}

export interface Diff {
  session: string;
  files: FileDiff[] | null;
  // Only in a summary (?stat=1); a full diff leaves them to the client.
  stats?: unknown[];
  workspace: { used: number; size: number; full: boolean; files: number };
}

export interface Selection {
  paths?: string[];
  hunks?: string[];
  take?: "agent" | "host" | "markers";
  // File id or hunk id -> the digest shown; with no paths or hunks, the
  // pinned changes are the selection.
  digests?: Record<string, string>;
  include_flagged?: boolean;
}

export interface Outcome {
  path: string;
  kind: Kind;
  applied: boolean;
  partial?: boolean;
  error?: string;
  // Set when the accept left the change in the session on purpose.
  left?: "held" | "flagged" | "unreviewed" | (string & {});
  reason?: string;
  digest?: string;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  cost_usd?: number;
}

export interface AgentEvent {
  type: "session" | "message" | "tool_call" | "file_edit" | "command" | "usage" | "error" | "turn_done" | (string & {});
  time: string;
  turn?: number;
  text?: string;
  tool?: string;
  input?: string;
  path?: string;
  command?: string;
  exit_code?: number;
  usage?: Usage;
  session?: string;
}

export interface Turn {
  session: string;
  n: number;
  agent: string;
  prompt: string;
  model?: string;
  state: string;
  started: string;
  ended?: string;
  exit_code?: number;
  final?: string;
  usage: Usage;
  error?: string;
  cpu_seconds?: number;
}

export interface AgentRequest {
  agent?: string;
  prompt: string;
  model?: string;
  base_url?: string;
  cmd?: string;
  events?: string;
  new?: boolean;
}

export interface AgentLine {
  event?: AgentEvent;
  turn?: Turn;
  error?: ApiErrorBody;
}

export interface ApiErrorBody {
  class: string;
  message: string;
}

export interface EgressEntry {
  id: number;
  time: string;
  kind: string;
  host: string;
  port?: number;
  addr?: string;
  bytes_out: number;
  bytes_in: number;
  allowed: boolean;
  rule?: string;
  reason?: string;
  duration: number;
}

export interface CPUSample {
  time: string;
  cpu_seconds: number;
}

export interface Meter {
  session: string;
  cpu_seconds: number;
  memory_peak: number;
  workspace_bytes: number;
  egress_out: number;
  egress_in: number;
  cost_usd: number;
  rate_per_core_hour: number;
  cpu_budget_seconds?: number;
  cost_budget?: number;
  history?: CPUSample[];
}

export interface SnapshotLayer {
  what: "container" | "workspace" | (string & {});
  digest: string;
  size: number;
  files: number;
  bytes: number;
  delete: number;
}

export interface Snapshot {
  id: string;
  name?: string;
  session: string;
  project: string;
  image: string;
  created: string;
  layers: SnapshotLayer[];
  frozen: number;
  took: number;
}

export interface Restored {
  sessions: Session[];
  warnings?: string[];
}

export interface Command {
  id: number;
  argv: string[];
  started: string;
  ended?: string;
  exit_code?: number;
  state: string;
  output?: string;
}

export interface LifecycleEvent {
  time: string;
  kind: string;
  reason: string;
}

// A session port forwarded to the host (engine/api Port).
export interface Port {
  session: string;
  port: number;
  listen: string;
  url: string;
  auth?: string;
  token?: string;
}

export interface Secret {
  name: string;
  updated: string;
}

export interface Image {
  name: string;
  id: string;
  size: number;
  created: string;
}

export interface Progress {
  stage?: string;
  message?: string;
  current?: number;
  total?: number;
  done?: boolean;
  error?: ApiErrorBody;
}

export interface VersionInfo {
  api: string;
  engine: string;
  docker_version?: string;
  pid: number;
}

export interface Settings {
  image: string;
  idle_timeout: number;
  cost_per_core_hour: number;
  ca_bundle: string;
  limits: Limits;
  egress: EgressPolicy;
  review: ReviewLimits;
}

// What a review reads and diffs at most (engine/api ReviewLimits; 0: the
// default).
export interface ReviewLimits {
  max_text?: number;
  max_line?: number;
  max_total_text?: number;
}

// One event of GET /v1/events (engine/api SessionEvent).
export interface SessionEvent {
  type: "sessions" | "session" | "removed" | (string & {});
  sessions?: Session[];
  session?: Session;
  id?: string;
}
