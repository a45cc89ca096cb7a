import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Review } from "../components/Review";
import { Client } from "../api/client";
import type { Diff, Outcome, Selection } from "../api/types";
import type { Transport } from "../api/transport";

// A transport that answers the review's calls from memory; accept answers
// with outcomes, or throws what a refused accept throws.
function fake(diff: Diff, accept: () => { outcomes: Outcome[] } = () => ({ outcomes: [{ path: "x", kind: "modified", applied: true }] })) {
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
