import { act, cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Review } from "../components/Review";
import { Client } from "../api/client";
import type { Diff, FileDiff, Outcome, Outcomes, Selection } from "../api/types";
import type { Transport } from "../api/transport";

// A transport that answers the review's calls from memory; accept answers
// with outcomes, or throws what a refused accept throws.
function fake(diff: Diff, accept: () => Outcomes = () => ({ outcomes: [{ path: "x", kind: "modified", applied: true }] })) {
  const calls: { method: string; path: string; body?: unknown }[] = [];
  const t: Transport = {
    kind: "browser",
    async request<T>(method: string, path: string, body?: unknown) {
      calls.push({ method, path, body });
      if (path.endsWith("/diff")) return diff as T;
      if (path.endsWith("/net"))
        return [
          {
            id: 7,
            time: "2026-11-22T12:00:00Z",
            kind: "connect",
            host: "evil.example.com",
            port: 443,
            bytes_out: 0,
            bytes_in: 0,
            allowed: false,
            duration: 0,
          },
        ] as T;
      if (path.endsWith("/accept")) return accept() as T;
      return { outcomes: [{ path: "x", kind: "modified", applied: true }] } as T;
    },
    async stream() {},
    watch: () => ({ ended: new Promise<void>(() => {}), close() {} }),
    terminal: () => ({ write() {}, resize() {}, close() {} }),
    pickFolder: async () => null,
  };
  return { client: new Client(t), calls };
}

const diff: Diff = {
  session: "s1",
  stats: [],
  workspace: { used: 1024, size: 2 << 30, full: false, files: 2 },
  files: [
    {
      id: "f1",
      path: "src/main.go",
      kind: "modified",
      type: "file",
      size: 10,
      old_size: 9,
      digest: "sha256:f1",
      hunks: [
        { id: "h1", old_start: 1, old_lines: 1, new_start: 1, new_lines: 1, lines: ["-a\n", "+b\n"], digest: "sha256:h1" },
        { id: "h2", old_start: 9, old_lines: 1, new_start: 9, new_lines: 1, lines: ["-c\n", "+d\n"], digest: "sha256:h2" },
      ],
    },
    {
      id: "f2",
      path: "config.yaml",
      kind: "modified",
      type: "file",
      size: 1,
      old_size: 1,
      conflict: true,
      conflict_reason: "both changed line 1",
      digest: "sha256:f2",
      conflicts: [
        { id: "c1", host_start: 1, host_lines: 1, base: ["mode: careful\n"], host: ["mode: paranoid\n"], agent: ["mode: fast\n"] },
      ],
    },
  ],
};

afterEach(cleanup);

describe("Review", () => {
  it("lists files with badges and shows the first in tree order", async () => {
    const { client } = fake(diff);
    render(<Review client={client} session="s1" theme="light" onError={vi.fn()} />);
    await screen.findByText("config.yaml", { selector: "h3" });
    expect(screen.getByText("conflict", { selector: ".filetree .badge" })).toBeTruthy();
    expect(screen.getByText("Base (when the session started)")).toBeTruthy();
    expect(screen.getByText("mode: paranoid")).toBeTruthy();
    // The network beside the diff: the blocked host, with "allow" at hand.
    expect(await screen.findByText("evil.example.com:443")).toBeTruthy();
  });

  it("accepts one hunk, takes a side of a conflict, and walks with the keyboard", async () => {
    const { client, calls } = fake(diff);
    render(<Review client={client} session="s1" theme="light" onError={vi.fn()} />);
    await screen.findByText("config.yaml", { selector: "h3" });
    // Take the agent's side of the conflict region.
    fireEvent.click(screen.getByText("Take agent"));
    await waitFor(() => expect(calls.some((c) => c.path === "/sessions/s1/accept")).toBe(true));
    // Pinned to the file's digest as shown.
    expect(calls.find((c) => c.path === "/sessions/s1/accept")!.body as Selection).toEqual({
      hunks: ["c1"],
      take: "agent",
      digests: { f2: "sha256:f2" },
    });
    // j: next file; n: next hunk; a: accept it.
    await act(async () => {
      fireEvent.keyDown(window, { key: "j" });
    });
    await screen.findByText("src/main.go", { selector: "h3" });
    await act(async () => {
      fireEvent.keyDown(window, { key: "n" });
    });
    await act(async () => {
      fireEvent.keyDown(window, { key: "a" });
    });
    await waitFor(() => expect(calls.filter((c) => c.path === "/sessions/s1/accept").length).toBe(2));
    expect(calls.filter((c) => c.path === "/sessions/s1/accept")[1].body).toEqual({ hunks: ["h2"], digests: { h2: "sha256:h2" } });
    // x on the focused hunk discards it.
    await act(async () => {
      fireEvent.keyDown(window, { key: "x" });
    });
    await waitFor(() => expect(calls.some((c) => c.path === "/sessions/s1/discard")).toBe(true));
  });

  it("accepts everything it shows by digest, and says what was left and why", async () => {
    const left: Outcome[] = [
      { path: "src/main.go", kind: "modified", applied: true, digest: "sha256:f1" },
      { path: "keys.txt", kind: "added", applied: false, left: "flagged", reason: "flagged by secrets (looks like a secret)" },
      { path: "later.sh", kind: "added", applied: false, left: "unreviewed", reason: "not in the diff you reviewed" },
    ];
    const onError = vi.fn();
    const { client, calls } = fake(diff, () => ({ outcomes: left }));
    render(<Review client={client} session="s1" theme="light" onError={onError} />);
    await screen.findByText("config.yaml", { selector: "h3" });
    fireEvent.click(screen.getByText("Accept all"));
    await waitFor(() => expect(calls.some((c) => c.path === "/sessions/s1/accept")).toBe(true));
    // Only the files shown, each with the digest shown: never "everything".
    expect(calls.find((c) => c.path === "/sessions/s1/accept")!.body).toEqual({ digests: { f1: "sha256:f1", f2: "sha256:f2" } });
    const note = await screen.findByRole("status");
    expect(note.textContent).toContain("keys.txt");
    expect(note.textContent).toContain("flagged by secrets");
    expect(note.textContent).toContain("later.sh");
    expect(onError).not.toHaveBeenCalled();
  });

  it("accepts a file by its digest and shows the session again when it changed since", async () => {
    const onError = vi.fn();
    const { client, calls } = fake(diff, () => {
      throw new Error("src/main.go changed since you reviewed it — review again; nothing was accepted");
    });
    render(<Review client={client} session="s1" theme="light" onError={onError} />);
    await screen.findByText("config.yaml", { selector: "h3" });
    fireEvent.click(document.querySelector(`li[data-path="src/main.go"]`)!);
    await screen.findByText("src/main.go", { selector: "h3" });
    const diffs = calls.filter((c) => c.path.endsWith("/diff")).length;
    fireEvent.click(screen.getByText("Accept file"));
    await waitFor(() => expect(onError).toHaveBeenCalled());
    expect(calls.find((c) => c.path === "/sessions/s1/accept")!.body).toEqual({ paths: ["src/main.go"], digests: { f1: "sha256:f1" } });
    expect(String(onError.mock.calls[0][0])).toContain("changed since you reviewed it");
    await waitFor(() => expect(calls.filter((c) => c.path.endsWith("/diff")).length).toBe(diffs + 1));
  });

  it("shows a misleading name quoted and marked, never as it displays", async () => {
    const named = (path: string, id: string) => ({ id, path, kind: "added" as const, type: "file" as const, size: 3, old_size: 0 });
    const lying: Diff = { ...diff, files: [named("uni\u202egnp.exe", "n1"), named("README.md\u200b", "n2")] };
    const { client } = fake(lying);
    render(<Review client={client} session="s1" theme="light" onError={vi.fn()} />);
    await screen.findByText('"README.md\\u200b"', { selector: "h3 *" });
    expect(screen.getAllByText('"uni\\u202egnp.exe"').length).toBeGreaterThan(0);
    expect(document.body.textContent).not.toMatch(/[\u202e\u200b]/);
    expect(document.querySelectorAll(".name-quoted .badge").length).toBeGreaterThan(1);
  });
});

// A transport that streams the diff as the engine does (one object, its
// files first), in small chunks, and lists the ignored changes on ?ignored=only.
function streaming(d: Diff, ignoredFiles: FileDiff[] = []) {
  const f = fake(d);
  const enc = new TextEncoder();
  const answer = (x: Diff) => {
    const { files, ...rest } = x;
    return enc.encode(`{"files":[${files.map((y) => JSON.stringify(y)).join(",")}],${JSON.stringify(rest).slice(1)}\n`);
  };
  const reads: string[] = [];
  f.client.t.read = async (_method, path, onChunk) => {
    reads.push(path);
    const b = answer(path.includes("ignored=only") ? { ...d, files: ignoredFiles } : d);
    for (let at = 0; at < b.length; at += 97) {
      onChunk(b.subarray(at, at + 97));
      await new Promise((r) => setTimeout(r, 0));
    }
  };
  return { ...f, reads };
}

const mod = (path: string, more: Partial<FileDiff> = {}): FileDiff => ({
  id: "id-" + path,
  path,
  kind: "modified",
  type: "file",
  size: 1,
  old_size: 1,
  digest: "sha256:" + path,
  hunks: [{ id: "h-" + path, old_start: 1, old_lines: 1, new_start: 1, new_lines: 1, lines: ["-old\n", "+new " + path + "\n"] }],
  ...more,
});

const ignoredSummary = {
  paths: 6600,
  bytes: 37 << 20,
  dirs: [{ path: "node_modules/", paths: 6600, bytes: 37 << 20 }],
  rules: [{ source: ".gitignore", line: 1, pattern: "node_modules/", paths: 6600 }],
  findings: [{ path: "node_modules/x/key.pem", scanner: "secrets", message: "a private key" }],
  finding_count: 3,
};

describe("Review as a tree", () => {
  it("fills the tree in as the diff streams, folds folders, filters, and walks with the arrows", async () => {
    const files = [mod("src/a.go"), mod("src/b.go"), mod("web/app.ts"), mod("README.md")];
    const { client } = streaming({ ...diff, files });
    render(<Review client={client} session="s1" theme="light" onError={vi.fn()} />);
    // The first file to come is shown at once; the rest fill the tree in.
    await screen.findByText("src/a.go", { selector: "h3" });
    await waitFor(() => expect(document.querySelector("[data-summary]")!.textContent).toContain("4 changed"));
    const dir = () => document.querySelector('li[data-dir="src"]')!;
    expect(dir().textContent).toContain("2");
    // Fold src/: its files leave the list, its count stays.
    fireEvent.click(dir());
    expect(document.querySelector('li[data-path="src/a.go"]')).toBeNull();
    expect(dir().getAttribute("aria-expanded")).toBe("false");
    // → opens it again; ↓ walks onto its first file and shows it.
    const list = document.querySelector(".filetree > .tree-rows")!;
    fireEvent.keyDown(list, { key: "ArrowRight" });
    expect(document.querySelector('li[data-path="src/a.go"]')).toBeTruthy();
    fireEvent.keyDown(list, { key: "ArrowDown" });
    await screen.findByText("src/a.go", { selector: "h3" });
    // ← on a file goes up to its folder; ← again folds it.
    fireEvent.keyDown(list, { key: "ArrowLeft" });
    fireEvent.keyDown(list, { key: "ArrowLeft" });
    expect(dir().getAttribute("aria-expanded")).toBe("false");
    // The filter keeps the matching files and their folders, counted.
    fireEvent.change(screen.getByLabelText("Filter files by path"), { target: { value: "APP" } });
    expect([...document.querySelectorAll(".filetree > .tree-rows li")].map((li) => li.textContent)).toEqual(["▾web/1", "app.tsM"]);
  });

  it("summarises ignored changes folded, lists them on demand, and flags the session's apart", async () => {
    const sessionIgnored = { paths: 3, bytes: 300, dirs: [{ path: "web/node_modules/", paths: 3, bytes: 300 }] };
    const { client, reads } = streaming({ ...diff, files: [mod("src/a.go")], ignored: ignoredSummary, session_ignored: sessionIgnored }, [
      mod("node_modules/x/index.js", { ignored: "project", ignored_by: ".gitignore:1: node_modules/" }),
      mod("web/node_modules/y/z.js", { ignored: "session", ignored_by: "web/.gitignore:1: node_modules/" }),
    ]);
    render(<Review client={client} session="s1" theme="light" onError={vi.fn()} />);
    const project = await waitFor(() => {
      const d = document.querySelector('details[data-ignored="project"]') as HTMLDetailsElement;
      expect(d).toBeTruthy();
      return d;
    });
    expect(project.open).toBe(false);
    expect(project.textContent).toContain("6,600 paths (37 MB) under node_modules/");
    expect(project.textContent).toContain("node_modules/x/key.pem: secrets: a private key");
    expect(project.textContent).toContain("and 2 more");
    const session = document.querySelector('details[data-ignored="session"]')!;
    expect(session.textContent).toContain("Ignored by a rule this session added");
    expect(session.textContent).toContain("left by Accept all until that rule is accepted or they are named");
    fireEvent.click(within(project).getByText("List them"));
    await waitFor(() => expect(reads).toContain("/sessions/s1/diff?ignored=only"));
    // Listed folded under their top folder, each kind in its own section.
    const top = await waitFor(() => {
      const li = project.querySelector('li[data-dir="node_modules/x"]')!;
      expect(li).toBeTruthy();
      return li;
    });
    expect(top.textContent).toContain("1");
    fireEvent.click(top);
    fireEvent.click(project.querySelector('li[data-path="node_modules/x/index.js"]')!);
    await screen.findByText("node_modules/x/index.js", { selector: "h3" });
    expect(screen.getByText(/Ignored by the project's rules/, { selector: ".filediff .callout div" })).toBeTruthy();
    await waitFor(() => expect(session.querySelector('li[data-dir="web/node_modules/y"]')).toBeTruthy());
  });

  it("folds a generated file's changes behind a click, never one with findings", async () => {
    const files = [
      mod("package-lock.json", { generated: "lockfile" }),
      mod("yarn.lock", { generated: "lockfile", findings: [{ scanner: "secrets", message: "a token" }] }),
    ];
    const { client } = streaming({ ...diff, files });
    render(<Review client={client} session="s1" theme="light" onError={vi.fn()} />);
    await screen.findByText("package-lock.json", { selector: "h3" });
    await waitFor(() => expect(screen.getAllByText("generated", { selector: ".filetree .badge" }).length).toBe(2));
    expect(document.querySelector(".generated")!.textContent).toContain("1 added, 1 removed line in 1 hunk");
    expect(document.querySelector("[data-hunk]")).toBeNull();
    fireEvent.click(screen.getByText("Show the changes"));
    expect(document.querySelector('[data-hunk="h-package-lock.json"]')).toBeTruthy();
    fireEvent.click(document.querySelector('li[data-path="yarn.lock"]')!);
    await screen.findByText("yarn.lock", { selector: "h3" });
    expect(document.querySelector('[data-hunk="h-yarn.lock"]')).toBeTruthy();
    expect(document.querySelector(".generated")!.textContent).toContain("a scanner flagged it");
  });

  it("says what Accept all leaves, and takes the ignored changes only when asked", async () => {
    const { client, calls } = fake({ ...diff, ignored: ignoredSummary }, () => ({
      outcomes: [{ path: "src/main.go", kind: "modified", applied: true }],
      ignored: ignoredSummary,
    }));
    render(<Review client={client} session="s1" theme="light" onError={vi.fn()} />);
    await screen.findByText("config.yaml", { selector: "h3" });
    fireEvent.click(screen.getByText("Accept all"));
    const dialog = screen.getByRole("dialog");
    expect(dialog.textContent).toContain("6,600 paths (37 MB) under node_modules/, ignored by the project's rules");
    fireEvent.click(within(dialog).getByText("Accept all shown"));
    await waitFor(() => expect(calls.some((c) => c.path === "/sessions/s1/accept")).toBe(true));
    expect(calls.find((c) => c.path === "/sessions/s1/accept")!.body).toEqual({ digests: { f1: "sha256:f1", f2: "sha256:f2" } });
    const note = await screen.findByRole("status");
    expect(note.textContent).toContain("6,600 paths (37 MB) under node_modules/: ignored by the project's rules");
    fireEvent.click(screen.getByText("Accept all"));
    fireEvent.click(screen.getByLabelText("include the ignored changes too"));
    fireEvent.click(screen.getByText("Accept all, ignored too"));
    await waitFor(() => expect(calls.filter((c) => c.path === "/sessions/s1/accept").length).toBe(2));
    expect(calls.filter((c) => c.path === "/sessions/s1/accept")[1].body).toEqual({
      digests: { f1: "sha256:f1", f2: "sha256:f2" },
      include_ignored: true,
    });
  });
});
