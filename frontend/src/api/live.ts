import type { Client } from "./client";
import type { Session, SessionEvent } from "./types";

// How the interface keeps its list of sessions: it follows the engine's
// event stream (GET /v1/events) and reads the list only when it
// (re)connects. While the stream is down it reconnects, waiting longer
// each time, and reads the list every fallbackPoll meanwhile.
export interface FollowOptions {
  fallbackPoll?: number; // ms between list reads while the stream is down
  retry?: (attempt: number) => number; // ms before reconnect attempt n (1, 2, ...)
}

export interface Follower {
  // refresh reads the list now (after the interface changed something).
  refresh(): Promise<void>;
  stop(): void;
}

export interface FollowHandlers {
  sessions(list: Session[]): void;
  // status: live while the stream is connected; down with the reason
  // while it is not.
  status(live: boolean, error?: unknown): void;
}

const defaults: Required<FollowOptions> = {
  fallbackPoll: 15000,
  retry: (n) => Math.min(30000, 1000 * 2 ** (n - 1)),
};

// The engine's order: oldest first.
const byAge = (a: Session, b: Session) => a.created.localeCompare(b.created) || a.id.localeCompare(b.id);

export function followSessions(client: Client, h: FollowHandlers, opts: FollowOptions = {}): Follower {
  const o = { ...defaults, ...opts };
  const known = new Map<string, Session>();
  let stopped = false;
  let attempt = 0;
  let sub: { close(): void } | null = null;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  let pollTimer: ReturnType<typeof setInterval> | undefined;

  const emit = () => h.sessions([...known.values()].sort(byAge));
  const replace = (list: Session[]) => {
    known.clear();
    list.forEach((s) => known.set(s.id, s));
    emit();
  };
  const refresh = async () => {
    const list = await client.sessions();
    if (!stopped) replace(list ?? []);
  };
  const poll = () => refresh().catch((e) => !stopped && h.status(false, e));

  const onEvent = (ev: SessionEvent) => {
    if (stopped) return;
    if (attempt > 0 || pollTimer !== undefined) {
      attempt = 0;
      clearInterval(pollTimer);
      pollTimer = undefined;
      h.status(true);
    }
    if (ev.type === "sessions") replace(ev.sessions ?? []);
    else if (ev.type === "session" && ev.session) {
      known.set(ev.session.id, ev.session);
      emit();
    } else if (ev.type === "removed" && ev.id) {
      known.delete(ev.id);
      emit();
    }
  };

  const broken = (e?: unknown) => {
    if (stopped) return;
    sub = null;
    h.status(false, e ?? new Error("The connection to the engine ended: reconnecting…"));
    if (pollTimer === undefined) {
      void poll();
      pollTimer = setInterval(() => void poll(), o.fallbackPoll);
    }
    attempt++;
    retryTimer = setTimeout(connect, o.retry(attempt));
  };

  function connect() {
    if (stopped) return;
    const s = client.watchSessions(onEvent);
    sub = s;
    s.ended.then(
      () => sub === s && broken(),
      (e) => sub === s && broken(e),
    );
  }

  // Until the first event arrives the stream counts as not yet live.
  attempt = 1;
  connect();
  return {
    refresh,
    stop() {
      stopped = true;
      clearTimeout(retryTimer);
      clearInterval(pollTimer);
      sub?.close();
      sub = null;
    },
  };
}
