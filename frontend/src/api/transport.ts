// How the interface reaches the engine: in a browser, HTTP and a WebSocket
// to the engine that served the page (its token is in a cookie); in the
// desktop app, the Go bindings of app/ (which talk to the engine's socket).

export class ApiError extends Error {
  constructor(
    public cls: string,
    message: string,
  ) {
    super(message);
  }
}

export interface TerminalHandlers {
  onData(data: Uint8Array): void;
  onExit(code: number | null, error?: string): void;
}

export interface TerminalConn {
  write(data: string): void;
  resize(cols: number, rows: number): void;
  close(): void;
}

// A stream of server-sent events the client follows until it calls
// close. ended resolves when the stream ends (the engine closed it, or
// close was called) and rejects when it breaks.
export interface Subscription {
  ended: Promise<void>;
  close(): void;
}

export interface Transport {
  kind: "browser" | "desktop";
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
  // stream calls onLine with each JSON line of an application/x-ndjson
  // answer and resolves when it ends.
  stream(method: string, path: string, body: unknown, onLine: (line: unknown) => void): Promise<void>;
  // read calls onChunk with an answer's bytes as they arrive (a large diff,
  // read with lib/arraystream's readArray) and resolves at its end; it
  // rejects when the engine answers an error or cuts the answer short.
  read?(method: string, path: string, onChunk: (bytes: Uint8Array) => void): Promise<void>;
  // watch follows a text/event-stream answer to GET path, calling onData
  // with each event's JSON data.
  watch(path: string, onData: (data: unknown) => void): Subscription;
  terminal(session: string, cols: number, rows: number, h: TerminalHandlers): TerminalConn;
  // pickFolder opens the native folder dialog (desktop only; null in a
  // browser, where the path is typed).
  pickFolder(): Promise<string | null>;
}

async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text();
  try {
    const e = JSON.parse(text) as { class?: string; message?: string } | null;
    if (e?.message) return new ApiError(e.class || "unknown", e.message);
  } catch {
    /* not JSON */
  }
  return new ApiError("unknown", `the engine answered ${res.status}: ${text.trim() || res.statusText}`);
}

// lines calls onLine with each non-empty line of text that comes in
// chunks.
function lines(onLine: (line: string) => void) {
  let buf = "";
  return {
    push(chunk: string) {
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) onLine(line);
      }
    },
    end() {
      if (buf.trim()) onLine(buf.trim());
      buf = "";
    },
  };
}

// splitLines parses JSON lines (application/x-ndjson).
export function splitLines(onLine: (line: unknown) => void) {
  return lines((l) => onLine(JSON.parse(l)));
}

// eventData takes the lines of a text/event-stream and calls onData with
// each event's data as JSON. The engine's events are one `data:` line
// each; comments (keep-alives) and other fields are skipped.
export function eventData(onData: (data: unknown) => void) {
  return (line: string) => {
    if (line.startsWith("data:")) onData(JSON.parse(line.slice(5)));
  };
}

// What the engine's TCP listener asks of a browser's request that changes
// something (docs/API.md): the page's own Origin, which the browser adds
// to every fetch and WebSocket of this origin, and a body declared as
// `application/json`. Keep both: without them the engine refuses the call.
export class HttpTransport implements Transport {
  kind = "browser" as const;
  constructor(private base = "") {}

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(this.base + "/v1" + path, {
        method,
        headers: body === undefined ? {} : { "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "same-origin",
      });
    } catch {
      throw new ApiError(
        "unavailable",
        "The engine is not answering. Start it with `sudo airlock serve` (or `airlock ui` again), then reload.",
      );
    }
    if (!res.ok) throw await errorOf(res);
    if (res.status === 204) return undefined as T;
    const ct = res.headers.get("Content-Type") || "";
    return (ct.includes("json") ? await res.json() : await res.text()) as T;
  }

  async stream(method: string, path: string, body: unknown, onLine: (line: unknown) => void): Promise<void> {
    const res = await fetch(this.base + "/v1" + path, {
      method,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    if (!res.ok) throw await errorOf(res);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    const lines = splitLines(onLine);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      lines.push(dec.decode(value, { stream: true }));
    }
    lines.end();
  }

  async read(method: string, path: string, onChunk: (bytes: Uint8Array) => void): Promise<void> {
    let res: Response;
    try {
      res = await fetch(this.base + "/v1" + path, { method, credentials: "same-origin" });
    } catch {
      throw new ApiError(
        "unavailable",
        "The engine is not answering. Start it with `sudo airlock serve` (or `airlock ui` again), then reload.",
      );
    }
    if (!res.ok) throw await errorOf(res);
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onChunk(value);
    }
  }

  watch(path: string, onData: (data: unknown) => void): Subscription {
    const abort = new AbortController();
    const follow = async () => {
      const res = await fetch(this.base + "/v1" + path, { credentials: "same-origin", signal: abort.signal });
      if (!res.ok) throw await errorOf(res);
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      const split = lines(eventData(onData));
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        split.push(dec.decode(value, { stream: true }));
      }
    };
    const ended = follow().catch((e) => {
      if (!abort.signal.aborted) throw e;
    });
    return { ended, close: () => abort.abort() };
  }

  terminal(session: string, cols: number, rows: number, h: TerminalHandlers): TerminalConn {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(
      `${proto}//${location.host}${this.base}/v1/sessions/${encodeURIComponent(session)}/terminal?cols=${cols}&rows=${rows}`,
    );
    ws.binaryType = "arraybuffer";
    let exited = false;
    ws.onmessage = (m) => {
      if (typeof m.data === "string") {
        const ctl = JSON.parse(m.data) as { exit_code?: number; error?: { message?: string } };
        exited = true;
        h.onExit(ctl.exit_code ?? null, ctl.error?.message);
      } else {
        h.onData(new Uint8Array(m.data as ArrayBuffer));
      }
    };
    ws.onclose = () => {
      if (!exited) h.onExit(null, "the connection to the engine closed");
    };
    const enc = new TextEncoder();
    return {
      write: (d) => ws.readyState === WebSocket.OPEN && ws.send(enc.encode(d)),
      resize: (c, r) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ resize: { width: c, height: r } })),
      close: () => ws.close(),
    };
  }

  pickFolder(): Promise<string | null> {
    return Promise.resolve(null);
  }
}

// streamId is a new id for StreamAs: the window's own, unlike the
// numbers Stream gives.
let streams = 0;
function streamId(): string {
  streams++;
  return `w${streams}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

// The desktop app's bindings (app/app.go), as Wails exposes them.
interface WailsApp {
  Request(method: string, path: string, body: string): Promise<string>;
  Stream(method: string, path: string, body: string): Promise<string>;
  StreamAs(id: string, method: string, path: string, body: string): Promise<void>;
  ReadAs(id: string, method: string, path: string): Promise<void>;
  StreamClose(id: string): Promise<void>;
  TerminalOpen(session: string, cols: number, rows: number): Promise<string>;
  TerminalInput(id: string, b64: string): Promise<void>;
  TerminalResize(id: string, cols: number, rows: number): Promise<void>;
  TerminalClose(id: string): Promise<void>;
  PickProject(): Promise<string>;
}

interface WailsRuntime {
  EventsOn(name: string, cb: (...data: unknown[]) => void): () => void;
}

declare global {
  interface Window {
    go?: { app?: { App?: WailsApp } };
    runtime?: WailsRuntime;
  }
}

function b64decode(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function b64encode(s: string): string {
  const bytes = new TextEncoder().encode(s);
  let bin = "";
  bytes.forEach((b) => (bin += String.fromCharCode(b)));
  return btoa(bin);
}

// Go bindings reject with the error's text; the app prefixes it with the
// class ("not_found: ...").
function wailsError(e: unknown): ApiError {
  const msg = String((e as Error)?.message ?? e);
  const m = /^([a-z_]+): ([\s\S]*)$/.exec(msg);
  return m ? new ApiError(m[1], m[2]) : new ApiError("unknown", msg);
}

export class WailsTransport implements Transport {
  kind = "desktop" as const;
  constructor(
    private app: WailsApp,
    private rt: WailsRuntime,
  ) {}

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let out: string;
    try {
      out = await this.app.Request(method, path, body === undefined ? "" : JSON.stringify(body));
    } catch (e) {
      throw wailsError(e);
    }
    if (!out) return undefined as T;
    try {
      return JSON.parse(out) as T;
    } catch {
      return out as T;
    }
  }

  // stream listens for the stream's events before it starts (StreamAs
  // under an id of its own), so that no line can come before it listens.
  async stream(method: string, path: string, body: unknown, onLine: (line: unknown) => void): Promise<void> {
    const id = streamId();
    let offs: (() => void)[] = [];
    const off = () => offs.splice(0).forEach((f) => f());
    const done = new Promise<void>((resolve, reject) => {
      offs = [
        this.rt.EventsOn("stream:" + id, (line) => onLine(JSON.parse(String(line)))),
        this.rt.EventsOn("stream-end:" + id, (err) => {
          off();
          if (err) reject(wailsError(err));
          else resolve();
        }),
      ];
    });
    try {
      await this.app.StreamAs(id, method, path, JSON.stringify(body));
    } catch (e) {
      off();
      throw wailsError(e);
    }
    await done;
  }

  // read is StreamAs for an answer read as bytes (ReadAs): its chunks
  // come as base64, in order, then the end.
  async read(method: string, path: string, onChunk: (bytes: Uint8Array) => void): Promise<void> {
    const id = streamId();
    let offs: (() => void)[] = [];
    const off = () => offs.splice(0).forEach((f) => f());
    const done = new Promise<void>((resolve, reject) => {
      offs = [
        this.rt.EventsOn("read:" + id, (b64) => onChunk(b64decode(String(b64)))),
        this.rt.EventsOn("read-end:" + id, (err) => {
          off();
          if (err) reject(wailsError(err));
          else resolve();
        }),
      ];
    });
    try {
      await this.app.ReadAs(id, method, path);
    } catch (e) {
      off();
      throw wailsError(e);
    }
    await done;
  }

  // watch is a Stream whose lines are server-sent events.
  watch(path: string, onData: (data: unknown) => void): Subscription {
    const id = streamId();
    let started = false;
    const offs: (() => void)[] = [];
    const off = () => offs.splice(0).forEach((f) => f());
    let stop = () => {};
    const ended = new Promise<void>((resolve, reject) => {
      stop = () => {
        off();
        resolve();
      };
      // Listening first: the stream's first line (the whole list) must
      // not come before anyone hears it.
      const data = eventData(onData);
      offs.push(this.rt.EventsOn("stream:" + id, (line) => data(String(line))));
      offs.push(
        this.rt.EventsOn("stream-end:" + id, (err) => {
          off();
          if (typeof err === "string" && err) reject(wailsError(err));
          else resolve();
        }),
      );
      this.app.StreamAs(id, "GET", path, "").then(
        () => {
          started = true;
          if (offs.length === 0) void this.app.StreamClose(id); // closed meanwhile
        },
        (e) => {
          off();
          reject(wailsError(e));
        },
      );
    });
    return {
      ended,
      close: () => {
        if (started) void this.app.StreamClose(id);
        stop();
      },
    };
  }

  terminal(session: string, cols: number, rows: number, h: TerminalHandlers): TerminalConn {
    let id = "";
    const pending: string[] = [];
    const offs: (() => void)[] = [];
    this.app.TerminalOpen(session, cols, rows).then(
      (tid) => {
        id = tid;
        offs.push(this.rt.EventsOn("term:" + tid, (b64) => h.onData(b64decode(String(b64)))));
        offs.push(
          this.rt.EventsOn("term-exit:" + tid, (code, err) => {
            offs.forEach((f) => f());
            h.onExit(typeof code === "number" && code >= 0 ? code : null, typeof err === "string" && err ? err : undefined);
          }),
        );
        pending.splice(0).forEach((d) => void this.app.TerminalInput(id, b64encode(d)));
      },
      (e) => h.onExit(null, wailsError(e).message),
    );
    return {
      write: (d) => {
        if (id) void this.app.TerminalInput(id, b64encode(d));
        else pending.push(d);
      },
      resize: (c, r) => {
        if (id) void this.app.TerminalResize(id, c, r);
      },
      close: () => {
        if (id) void this.app.TerminalClose(id);
      },
    };
  }

  async pickFolder(): Promise<string | null> {
    try {
      return (await this.app.PickProject()) || null;
    } catch (e) {
      throw wailsError(e);
    }
  }
}

export function detectTransport(): Transport {
  const app = window.go?.app?.App;
  if (app && window.runtime) return new WailsTransport(app, window.runtime);
  return new HttpTransport();
}
