import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { followSessions } from "../api/live";
import type { Client } from "../api/client";
import type { Session, SessionEvent } from "../api/types";

const sess = (id: string, state = "running", created = "2025-01-01T00:00:0" + id.length + "Z") => ({ id, state, created }) as Session;

// A client whose event streams and list reads the test drives: each
// watchSessions call is a stream the test can feed, end or break.
function fakeClient(list: () => Session[]) {
  const streams: { send(e: SessionEvent): void; end(): void; fail(e: Error): void; closed: boolean }[] = [];
  let reads = 0;
  const client = {
    sessions: () => {
      reads++;
      return Promise.resolve(list());
    },
    watchSessions: (onEvent: (e: SessionEvent) => void) => {
      let end = () => {};
      let fail: (e: Error) => void = () => {};
      const ended = new Promise<void>((res, rej) => {
        end = res;
        fail = rej;
      });
      const s = { send: onEvent, end, fail, closed: false };
      streams.push(s);
      return { ended, close: () => (s.closed = true) };
    },
  } as unknown as Client;
  return { client, streams, reads: () => reads };
}

describe("followSessions", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("keeps the list from the events, oldest first", () => {
    const { client, streams, reads } = fakeClient(() => []);
    const lists: string[][] = [];
    const status: boolean[] = [];
    const f = followSessions(client, { sessions: (l) => lists.push(l.map((s) => `${s.id}:${s.state}`)), status: (up) => status.push(up) });
    streams[0].send({ type: "sessions", sessions: [sess("bb"), sess("a")] });
    streams[0].send({ type: "session", session: sess("ccc") });
    streams[0].send({ type: "session", session: sess("a", "paused") });
    streams[0].send({ type: "removed", id: "bb" });
    expect(lists).toEqual([
      ["a:running", "bb:running"],
      ["a:running", "bb:running", "ccc:running"],
      ["a:paused", "bb:running", "ccc:running"],
      ["a:paused", "ccc:running"],
    ]);
    expect(status).toEqual([true]);
    // Following, it never reads the list by itself.
    vi.advanceTimersByTime(120000);
    expect(reads()).toBe(0);
    f.stop();
    expect(streams[0].closed).toBe(true);
  });

  it("reads the list slowly while the stream is down and reconnects, waiting longer each time", async () => {
    let list = [sess("a")];
    const { client, streams, reads } = fakeClient(() => list);
    const lists: string[][] = [];
    const status: [boolean, string?][] = [];
    const f = followSessions(
      client,
      {
        sessions: (l) => lists.push(l.map((s) => `${s.id}:${s.state}`)),
        status: (up, e) => status.push([up, e instanceof Error ? e.message : undefined]),
      },
      { fallbackPoll: 5000, retry: (n) => n * 1000 },
    );
    streams[0].send({ type: "sessions", sessions: list });

    streams[0].fail(new Error("the engine went away"));
    await vi.advanceTimersByTimeAsync(0);
    expect(status.at(-1)).toEqual([false, "the engine went away"]);
    expect(reads()).toBe(1); // at once
    expect(streams.length).toBe(1);

    await vi.advanceTimersByTimeAsync(1000); // retry(1)
    expect(streams.length).toBe(2);
    streams[1].end(); // the engine ended it before any event: still down
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(1999);
    expect(streams.length).toBe(2);
    await vi.advanceTimersByTimeAsync(1); // retry(2)
    expect(streams.length).toBe(3);

    list = [sess("a", "paused")];
    await vi.advanceTimersByTimeAsync(2000); // 5 s since the first read
    expect(reads()).toBe(2);
    expect(lists.at(-1)).toEqual(["a:paused"]);

    // The stream is back: the polling stops.
    streams[2].send({ type: "sessions", sessions: [sess("a", "running")] });
    expect(status.at(-1)).toEqual([true, undefined]);
    await vi.advanceTimersByTimeAsync(60000);
    expect(reads()).toBe(2);
    expect(streams.length).toBe(3);
    expect(lists.at(-1)).toEqual(["a:running"]);

    // A stop ends everything: no reconnect after a break that follows.
    f.stop();
    streams[2].fail(new Error("late"));
    await vi.advanceTimersByTimeAsync(60000);
    expect(streams.length).toBe(3);
    expect(reads()).toBe(2);
  });
});
