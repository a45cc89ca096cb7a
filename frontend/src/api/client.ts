import type {
  AgentLine,
  Blame,
  Checkpoint,
  ForkRequest,
  UndoRequest,
  Undone,
  AgentEvent,
  AgentRequest,
  Command,
  CreateRequest,
  Diff,
  FileDiff,
  IgnoredMode,
  Outcomes,
  EgressEntry,
  EgressPolicy,
  Image,
  LifecycleEvent,
  PendingQuestion,
  Answer,
  SavedPolicy,
  ListeningPort,
  Port,
  Meter,
  Outcome,
  Progress,
  Restored,
  Schedule,
  ScheduleRun,
  Secret,
  Selection,
  Session,
  SessionEvent,
  Settings,
  Snapshot,
  Turn,
  VersionInfo,
} from "./types";
import { readArray } from "../lib/arraystream";
import type { TerminalConn, TerminalHandlers, Transport } from "./transport";

const p = encodeURIComponent;

// Client is the engine's API (docs/API.md) over a transport.
export class Client {
  constructor(public t: Transport) {}

  version = () => this.t.request<VersionInfo>("GET", "/version");
  sessions = () => this.t.request<Session[]>("GET", "/sessions");
  // watchSessions follows the engine's session events (see live.ts).
  watchSessions = (onEvent: (e: SessionEvent) => void) => this.t.watch("/events", (d) => onEvent(d as SessionEvent));
  session = (id: string) => this.t.request<Session>("GET", `/sessions/${p(id)}`);
  create = (req: CreateRequest) => this.t.request<Session>("POST", "/sessions", req);
  remove = (id: string) => this.t.request<void>("DELETE", `/sessions/${p(id)}`);
  pause = (id: string) => this.t.request<Session>("POST", `/sessions/${p(id)}/pause`);
  resume = (id: string) => this.t.request<Session>("POST", `/sessions/${p(id)}/resume`);
  hibernate = (id: string) => this.t.request<Session>("POST", `/sessions/${p(id)}/hibernate`);
  wake = (id: string) => this.t.request<Session>("POST", `/sessions/${p(id)}/wake`);

  diff = (id: string) => this.t.request<Diff>("GET", `/sessions/${p(id)}/diff`);
  // readDiff streams the diff: onFiles gets its files a slice at a time
  // as they arrive (the page stays live on 50 MB), and it resolves with
  // the rest (the session, the workspace, the ignored summaries).
  // ignored "only" lists just the changes ignore rules cover.
  readDiff = async (id: string, onFiles: (files: FileDiff[]) => void, ignored: IgnoredMode = ""): Promise<Diff> => {
    const path = `/sessions/${p(id)}/diff` + (ignored ? `?ignored=${ignored}` : "");
    if (!this.t.read) {
      const d = await this.t.request<Diff>("GET", path);
      onFiles(d.files ?? []);
      return { ...d, files: [] };
    }
    const read = this.t.read.bind(this.t);
    return (await readArray<FileDiff>("files", (onChunk) => read("GET", path, onChunk), onFiles)) as unknown as Diff;
  };
  accept = (id: string, sel: Selection) => this.t.request<Outcomes>("POST", `/sessions/${p(id)}/accept`, sel);
  discard = (id: string, sel: Selection) => this.t.request<{ outcomes: Outcome[] }>("POST", `/sessions/${p(id)}/discard`, sel);
  commands = (id: string) => this.t.request<Command[]>("GET", `/sessions/${p(id)}/commands`);

  turns = (id: string) => this.t.request<Turn[]>("GET", `/sessions/${p(id)}/turns`);
  events = (id: string) => this.t.request<AgentEvent[]>("GET", `/sessions/${p(id)}/events`);
  agent = (id: string, req: AgentRequest, onLine: (l: AgentLine) => void) =>
    this.t.stream("POST", `/sessions/${p(id)}/agent`, req, (l) => onLine(l as AgentLine));

  // The timeline: checkpoints oldest first, what one changed (one turn, or
  // between two checkpoints by id; 0: the session's start), undo and fork.
  checkpoints = (id: string) => this.t.request<Checkpoint[]>("GET", `/sessions/${p(id)}/checkpoints`);
  checkpointDiff = (id: string, q: { turn: number } | { from_checkpoint: number; to_checkpoint: number }) =>
    this.t.request<Diff>(
      "GET",
      `/sessions/${p(id)}/checkpoints/diff?` +
        Object.entries(q)
          .map(([k, v]) => `${k}=${v}`)
          .join("&"),
    );
  undo = (id: string, req: UndoRequest) => this.t.request<Undone>("POST", `/sessions/${p(id)}/undo`, req);
  fork = (id: string, req: ForkRequest) => this.t.request<Restored>("POST", `/sessions/${p(id)}/fork`, req);
  // blame of the session's changes, or of the one file at path.
  blame = (id: string, path?: string) =>
    this.t.request<Blame>("GET", `/sessions/${p(id)}/blame` + (path ? `?path=${encodeURIComponent(path)}` : ""));

  netLog = (id: string) => this.t.request<EgressEntry[]>("GET", `/sessions/${p(id)}/net`);
  allowFromLog = (id: string, entry: number) => this.t.request<EgressPolicy>("POST", `/sessions/${p(id)}/policy`, { from_log: entry });
  savePolicy = (id: string) => this.t.request<SavedPolicy>("POST", `/sessions/${p(id)}/policy/save`);
  // What sessions under --net ask wait on (every session's), and an answer.
  pending = () => this.t.request<PendingQuestion[]>("GET", "/net/pending");
  decide = (id: number, answer: Answer) => this.t.request<void>("POST", "/net/decide", { id, answer });

  ports = (id: string) => this.t.request<Port[]>("GET", `/sessions/${p(id)}/ports`);
  openPort = (id: string, port: number) => this.t.request<Port>("POST", `/sessions/${p(id)}/ports`, { port });
  closePort = (id: string, port: number) => this.t.request<void>("DELETE", `/sessions/${p(id)}/ports/${port}`);
  // The ports the session listens on that are not forwarded (read without waking it).
  listeningPorts = (id: string) => this.t.request<ListeningPort[]>("GET", `/sessions/${p(id)}/ports/listening`);

  meter = (id: string) => this.t.request<Meter>("GET", `/sessions/${p(id)}/meter`);
  lifecycle = (id: string) => this.t.request<LifecycleEvent[]>("GET", `/sessions/${p(id)}/lifecycle`);

  snapshot = (id: string, name?: string) => this.t.request<Snapshot>("POST", `/sessions/${p(id)}/snapshots`, { name: name || undefined });
  snapshots = () => this.t.request<Snapshot[]>("GET", "/snapshots");
  removeSnapshot = (ref: string) => this.t.request<void>("DELETE", `/snapshots/${p(ref)}`);
  restore = (ref: string, n = 1) => this.t.request<Restored>("POST", `/snapshots/${p(ref)}/restore`, { n });

  schedules = () => this.t.request<Schedule[]>("GET", "/schedules");
  scheduleRuns = (name: string) => this.t.request<ScheduleRun[]>("GET", `/schedules/${p(name)}/runs`);
  runSchedule = (name: string) => this.t.request<ScheduleRun>("POST", `/schedules/${p(name)}/run`, {});
  removeSchedule = (name: string) => this.t.request<void>("DELETE", `/schedules/${p(name)}`);

  secrets = () => this.t.request<Secret[]>("GET", "/secrets");
  setSecret = (name: string, value: string) => this.t.request<void>("PUT", `/secrets/${p(name)}`, { value });
  removeSecret = (name: string) => this.t.request<void>("DELETE", `/secrets/${p(name)}`);
  settings = () => this.t.request<Settings>("GET", "/settings");
  setSettings = (s: Partial<Settings>) => this.t.request<Settings>("PUT", "/settings", s);
  images = () => this.t.request<Image[]>("GET", "/images");
  buildImage = (kind: string, onLine: (p: Progress) => void) =>
    this.t.stream("POST", "/images/build", { kind }, (l) => onLine(l as Progress));

  terminal = (id: string, cols: number, rows: number, h: TerminalHandlers): TerminalConn => this.t.terminal(id, cols, rows, h);
  pickFolder = () => this.t.pickFolder();
}
