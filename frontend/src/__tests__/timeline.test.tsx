import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Agent } from "../components/Agent";
import { Review } from "../components/Review";
import { Sessions } from "../components/Sessions";
import { SessionView } from "../components/SessionView";
import { Timeline } from "../components/Timeline";
import { Client } from "../api/client";
import type { Checkpoint, Diff, Session } from "../api/types";
import type { Transport } from "../api/transport";

// The terminal (xterm) is not part of these views and needs a canvas.
vi.mock("../components/Terminal", () => ({ Terminal: () => null }));

const checkpoints: Checkpoint[] = [
  {
    id: 1,
    kind: "turn",
    turn: 1,
    time: "2026-11-25T10:00:00Z",
    from: 0,
    files: 2,
    added: 12,
    removed: 3,
    cpu_seconds: 4.2,
    usage: { input_tokens: 1200, output_tokens: 340, cost_usd: 0.0042 },
  },
  { id: 2, kind: "command", command: 7, time: "2026-11-25T10:05:00Z", from: 1, files: 1, added: 1, removed: 0 },
  { id: 3, kind: "periodic", time: "2026-11-25T10:06:00Z", from: 2, files: 1, added: 2, removed: 2 },
];

const diffOf = (path: string, line: string): Diff => ({
  session: "s1",
  stats: [],
  workspace: { used: 1024, size: 2 << 30, full: false, files: 1 },
  files: [
    {
      id: "f-" + path,
      path,
      kind: "modified",
      type: "file",
      size: 10,
      old_size: 9,
      digest: "sha256:x",
      hunks: [
        { id: "h1", old_start: 1, old_lines: 1, new_start: 1, new_lines: 1, lines: ["-old\n", "+" + line + "\n"], digest: "sha256:h" },
      ],
    },
  ],
});

const session = (id: string, state = "running"): Session => ({
  id,
  project: "/src/app",
  image: "airlock/base",
  state,
  created: "2026-11-25T09:00:00Z",
  user: "agent",
  limits: { cpus: 2, memory: 1 << 30, pids: 512, workspace_size: 1 << 30 },
  changed: 1,
  idle_timeout: 0,
  cpu_seconds: 1,
  cost_usd: 0,
});

// A transport that answers the timeline's calls as the engine does.
function fake() {
  const calls: { method: string; path: string; body?: unknown }[] = [];
  const t: Transport = {
    kind: "browser",
    async request<T>(method: string, path: string, body?: unknown) {
      calls.push({ method, path, body });
      if (path === "/sessions/s1/checkpoints") return checkpoints as T;
      if (path === "/sessions/s1/checkpoints/diff?turn=1") return diffOf("src/app.py", "turn one wrote this") as T;
      if (path === "/sessions/s1/checkpoints/diff?from_checkpoint=1&to_checkpoint=2")
        return diffOf("out.txt", "the command wrote this") as T;
      if (path === "/sessions/s1/undo")
        return {
          to: checkpoints[0],
          checkpoint: { ...checkpoints[0], id: 4, kind: "undo", undo_to: 1 },
          before: 3,
          stopped: 2,
          files: 3,
        } as T;
      if (path === "/sessions/s1/fork") return { sessions: [session("f00d00000001aaaa"), session("f00d00000002bbbb")] } as T;
      if (path === "/sessions/s1/events" || path === "/sessions/s1/turns") return [] as T;
      throw new Error("unexpected " + method + " " + path);
    },
    async stream() {},
    watch: () => ({ ended: new Promise<void>(() => {}), close() {} }),
    terminal: () => ({ write() {}, resize() {}, close() {} }),
    pickFolder: async () => null,
  };
  return { client: new Client(t), calls };
}

afterEach(() => {
  cleanup();
  vi.restoreAllMocks();
});

describe("Timeline", () => {
  it("lists checkpoints newest first with files, lines, tokens and cost", async () => {
    const { client } = fake();
    render(<Timeline client={client} session="s1" theme="light" onOpen={vi.fn()} onError={vi.fn()} />);
    await screen.findByText("Turn 1");
    const items = [...document.querySelectorAll(".timeline li")].map((l) => l.querySelector("b")!.textContent);
    expect(items).toEqual(["Periodic", "Command 7", "Turn 1"]);
    const turn = document.querySelector('li[data-checkpoint="1"]')!.textContent;
    expect(turn).toContain("2 files");
    expect(turn).toContain("+12");
    expect(turn).toContain("−3");
    expect(turn).toContain("1200 in · 340 out");
    expect(turn).toContain("$0.0042");
    expect(turn).toContain("CPU 4.2 s");
    expect(screen.getByText(/3 checkpoints · 1540 tokens · \$0\.0042/)).toBeTruthy();
  });

  it("shows a turn's diff by its number and a command's between checkpoints", async () => {
    const { client, calls } = fake();
    render(<Timeline client={client} session="s1" theme="light" onOpen={vi.fn()} onError={vi.fn()} />);
    fireEvent.click(await screen.findByText("Turn 1"));
    await waitFor(() => expect(document.querySelector('.turn-file[data-path="src/app.py"]')).toBeTruthy());
    expect(document.querySelector(".turn-view")!.textContent).toContain("turn one wrote this");
    fireEvent.click(screen.getByText("Command 7"));
    await waitFor(() => expect(document.querySelector('.turn-file[data-path="out.txt"]')).toBeTruthy());
    expect(document.querySelector(".turn-view")!.textContent).toContain("the command wrote this");
    expect(calls.map((c) => c.path)).toContain("/sessions/s1/checkpoints/diff?from_checkpoint=1&to_checkpoint=2");
  });

  it("undoes to a checkpoint after a confirm and says what it did", async () => {
    const { client, calls } = fake();
    const onChanged = vi.fn();
    const ask = vi.spyOn(window, "confirm").mockReturnValueOnce(false).mockReturnValueOnce(true);
    render(<Timeline client={client} session="s1" theme="light" onOpen={vi.fn()} onChanged={onChanged} onError={vi.fn()} />);
    fireEvent.click(await screen.findByText("Turn 1"));
    fireEvent.click(screen.getByRole("button", { name: "Undo to here" }));
    expect(ask).toHaveBeenCalledTimes(1);
    expect(String(ask.mock.calls[0][0])).toContain("stopped first");
    expect(calls.some((c) => c.path === "/sessions/s1/undo")).toBe(false);
    fireEvent.click(screen.getByRole("button", { name: "Undo to here" }));
    const note = await screen.findByText(/Back to the state after Turn 1/);
    expect(calls.find((c) => c.path === "/sessions/s1/undo")!.body).toEqual({ checkpoint: 1 });
    expect(note.textContent).toContain("3 paths put back");
    expect(note.textContent).toContain("2 processes stopped first");
    expect(note.textContent).toContain("checkpoint #3");
    expect(onChanged).toHaveBeenCalled();
  });

  it("forks n sessions from a checkpoint and links to each", async () => {
    const { client, calls } = fake();
    const onOpen = vi.fn();
    render(<Timeline client={client} session="s1" theme="light" onOpen={onOpen} onError={vi.fn()} />);
    fireEvent.click(await screen.findByText("Turn 1"));
    expect(screen.getByLabelText<HTMLInputElement>("fork count").value).toBe("1");
    fireEvent.change(screen.getByLabelText("fork count"), { target: { value: "2" } });
    fireEvent.click(screen.getByRole("button", { name: "Fork from here" }));
    const link = await screen.findByRole("link", { name: "f00d00000002" });
    expect(calls.find((c) => c.path === "/sessions/s1/fork")!.body).toEqual({ checkpoint: 1, n: 2 });
    expect(screen.getByRole("link", { name: "f00d00000001" })).toBeTruthy();
    fireEvent.click(link);
    expect(onOpen).toHaveBeenCalledWith("f00d00000002bbbb");
  });

  it("is in the Agent tab beside the conversation", async () => {
    const { client } = fake();
    render(<Agent client={client} session="s1" onError={vi.fn()} />);
    await screen.findByText(/No agent has worked/);
    fireEvent.click(screen.getByRole("tab", { name: "Timeline" }));
    await screen.findByText("Turn 1");
    fireEvent.click(screen.getByRole("tab", { name: "Conversation" }));
    expect(screen.getByLabelText("prompt")).toBeTruthy();
  });
});

describe("Sessions", () => {
  it("offers Hibernate beside Pause, and Wake for a hibernated session", () => {
    const hib = {
      ...session("bbbb00000002", "hibernated"),
      hibernation: { time: "2026-11-25T10:00:00Z", disk_bytes: 4096, checkpoint: 3 },
    };
    const onHibernate = vi.fn();
    const onWake = vi.fn();
    const noop = vi.fn();
    render(
      <Sessions
        sessions={[session("aaaa00000001"), hib]}
        onOpen={noop}
        onPause={noop}
        onResume={noop}
        onWake={onWake}
        onHibernate={onHibernate}
        onSnapshot={noop}
        onDelete={noop}
        onNew={noop}
      />,
    );
    const running = document.querySelector('tr[data-session="aaaa00000001"]')!;
    const asleep = document.querySelector('tr[data-session="bbbb00000002"]')!;
    fireEvent.click([...running.querySelectorAll("button")].find((b) => b.textContent === "Hibernate")!);
    expect(onHibernate).toHaveBeenCalledWith(expect.objectContaining({ id: "aaaa00000001" }));
    expect([...asleep.querySelectorAll("button")].map((b) => b.textContent)).not.toContain("Hibernate");
    expect(asleep.textContent).toContain("4.0 KB on disk · processes not kept");
    fireEvent.click([...asleep.querySelectorAll("button")].find((b) => b.textContent === "Wake")!);
    expect(onWake).toHaveBeenCalledWith("bbbb00000002");
  });
});

describe("Review's blame", () => {
  it("names the turn or command that last changed each hunk, and hides it on request", async () => {
    const d: Diff = diffOf("src/app.py", "hi");
    d.files[0].hunks!.push({ id: "h2", old_start: 9, old_lines: 1, new_start: 9, new_lines: 1, lines: ["+late\n"], digest: "sha256:h2" });
    d.files[0].hunks!.push({ id: "h3", old_start: 20, old_lines: 1, new_start: 20, new_lines: 1, lines: ["+fmt\n"], digest: "sha256:h3" });
    const t: Transport = {
      kind: "browser",
      async request<T>(_m: string, path: string) {
        if (path === "/sessions/s1/diff") return d as T;
        if (path.startsWith("/sessions/s1/blame"))
          return {
            session: "s1",
            diff: d,
            hunks: [
              {
                path: "src/app.py",
                hunk: "h1",
                new_start: 1,
                checkpoint: 2,
                kind: "turn",
                turn: 2,
                call: {
                  seq: 3,
                  id: "toolu_1",
                  tool: "Edit",
                  input: "/workspace/src/app.py",
                  time: "2026-11-26T09:55:28Z",
                  match: "text",
                  edits: 2,
                },
              },
              { path: "src/app.py", hunk: "h2", new_start: 9, checkpoint: 0 },
              { path: "src/app.py", hunk: "h3", new_start: 20, checkpoint: 4, kind: "command", command: 7, command_line: "make fmt" },
            ],
          } as T;
        return [] as T;
      },
      async stream() {},
      watch: () => ({ ended: new Promise<void>(() => {}), close() {} }),
      terminal: () => ({ write() {}, resize() {}, close() {} }),
      pickFolder: async () => null,
    };
    render(<Review client={new Client(t)} session="s1" theme="light" onError={vi.fn()} />);
    await waitFor(() => expect(document.querySelector('[data-hunk="h1"] .blame')).toBeTruthy());
    const h1 = document.querySelector('[data-hunk="h1"] .blame')!;
    expect(h1.textContent).toBe("turn 2 · Edit /workspace/src/app.py · toolu_1");
    expect(h1.getAttribute("data-call")).toBe("toolu_1");
    expect(h1.getAttribute("title")).toContain("its new text holds these lines");
    expect(document.querySelector('[data-hunk="h3"] .blame')!.textContent).toBe("command 7 · make fmt");
    expect(document.querySelector('[data-hunk="h2"] .blame')!.textContent).toBe("since the last checkpoint");
    fireEvent.click(screen.getByLabelText("turns"));
    expect(document.querySelector(".blame")).toBeNull();
    expect(localStorage.getItem("airlock.blame")).toBe("0");
    localStorage.removeItem("airlock.blame");
  });
});

describe("SessionView", () => {
  it("hibernates a running session after a confirm, and wakes a hibernated one", async () => {
    const posts: string[] = [];
    const t: Transport = {
      kind: "browser",
      async request<T>(method: string, path: string) {
        if (method === "POST") posts.push(path);
        return [] as T;
      },
      async stream() {},
      watch: () => ({ ended: new Promise<void>(() => {}), close() {} }),
      terminal: () => ({ write() {}, resize() {}, close() {} }),
      pickFolder: async () => null,
    };
    const client = new Client(t);
    const onChanged = vi.fn();
    const props = { client, tab: "snapshots" as const, theme: "light" as const, onTab: vi.fn(), onPath: vi.fn(), onOpen: vi.fn() };
    vi.spyOn(window, "confirm").mockReturnValue(true);
    const { rerender } = render(
      <SessionView {...props} session={session("aaaa00000001")} onChanged={onChanged} onError={vi.fn()} onPromptTaken={vi.fn()} />,
    );
    fireEvent.click(screen.getByRole("button", { name: "Hibernate" }));
    await waitFor(() => expect(posts).toEqual(["/sessions/aaaa00000001/hibernate"]));
    await waitFor(() => expect(onChanged).toHaveBeenCalled());
    const asleep = {
      ...session("aaaa00000001", "hibernated"),
      hibernation: { time: "2026-11-25T10:00:00Z", disk_bytes: 2048, reason: "idle 2h" },
    };
    rerender(<SessionView {...props} session={asleep} onChanged={onChanged} onError={vi.fn()} onPromptTaken={vi.fn()} />);
    expect(screen.getByText(/idle 2h.*2\.0 KB on disk · processes not kept/)).toBeTruthy();
    fireEvent.click(screen.getByRole("button", { name: "Wake" }));
    await waitFor(() => expect(posts).toEqual(["/sessions/aaaa00000001/hibernate", "/sessions/aaaa00000001/wake"]));
  });
});
