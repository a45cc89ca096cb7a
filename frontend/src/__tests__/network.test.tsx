import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { AskPrompt, Network } from "../components/Network";
import { Client } from "../api/client";
import type { EgressEntry, PendingQuestion, Session } from "../api/types";
import type { Transport } from "../api/transport";

// A transport holding what the engine would: the questions waiting (an
// answer removes one), a session's log, and the saved policy's file.
function fake(questions: PendingQuestion[], log: EgressEntry[] = []) {
  let open = [...questions];
  const calls: { method: string; path: string; body?: unknown }[] = [];
  const t: Transport = {
    kind: "browser",
    async request<T>(method: string, path: string, body?: unknown) {
      calls.push({ method, path, body });
      if (path === "/net/pending") return open as T;
      if (path === "/net/decide") {
        open = open.filter((q) => q.id !== (body as { id: number }).id);
        return undefined as T;
      }
      if (path.endsWith("/policy/save")) return { file: "/p/.airlock/policy.yaml", policy: { mode: "ask" } } as T;
      if (path.endsWith("/net")) return log as T;
      return undefined as T;
    },
    async stream() {},
    watch: () => ({ ended: new Promise<void>(() => {}), close() {} }),
    terminal: () => ({ write() {}, resize() {}, close() {} }),
    pickFolder: async () => null,
  };
  return { client: new Client(t), calls };
}

const when = "2026-11-25T10:00:00Z";
const q = (id: number, session: string, extra: Partial<PendingQuestion> = {}): PendingQuestion => ({
  id,
  session,
  time: when,
  kind: "https",
  host: "api.github.com",
  port: 443,
  ...extra,
});
const fail = (e: unknown) => {
  throw e;
};

afterEach(cleanup);

describe("AskPrompt", () => {
  it("shows the session's questions with method and path, and answers each", async () => {
    const { client, calls } = fake([
      q(1, "s1", { method: "POST", path: "/repos/x/issues" }),
      q(2, "s1", { kind: "connect", host: "new.example" }),
      q(3, "other", { host: "elsewhere.example" }),
    ]);
    render(<AskPrompt client={client} session="s1" onError={fail} interval={60000} />);
    expect(await screen.findByText("POST api.github.com/repos/x/issues")).toBeTruthy();
    expect(screen.getByText("new.example")).toBeTruthy();
    expect(screen.queryByText("elsewhere.example")).toBeNull(); // another session's

    fireEvent.click(screen.getAllByRole("button", { name: "Allow once" })[0]);
    await waitFor(() => expect(screen.queryByText("POST api.github.com/repos/x/issues")).toBeNull());
    expect(calls).toContainEqual({ method: "POST", path: "/net/decide", body: { id: 1, answer: "allow-once" } });

    fireEvent.click(screen.getByRole("button", { name: "Deny" }));
    await waitFor(() => expect(screen.queryByRole("alert")).toBeNull());
    expect(calls).toContainEqual({ method: "POST", path: "/net/decide", body: { id: 2, answer: "deny" } });
  });

  it("answers allow-always, and shows every session's questions without one", async () => {
    const { client, calls } = fake([q(7, "s1"), q(8, "s2", { host: "b.example" })]);
    render(<AskPrompt client={client} onError={fail} interval={60000} />);
    expect(await screen.findByText("b.example")).toBeTruthy();
    fireEvent.click(screen.getAllByRole("button", { name: "Allow always" })[0]);
    await waitFor(() => expect(calls).toContainEqual({ method: "POST", path: "/net/decide", body: { id: 7, answer: "allow-always" } }));
  });
});

describe("Network", () => {
  const session = {
    id: "s1",
    egress: { mode: "ask", allow: ["GET api.github.com/repos/**"], inspect: ["api.github.com"], ask_timeout: 90e9 },
  } as unknown as Session;

  it("shows requests by method and path, the prompt, and saves the policy for the project", async () => {
    const log: EgressEntry[] = [
      {
        id: 1,
        time: when,
        kind: "https",
        host: "api.github.com",
        port: 443,
        method: "GET",
        path: "/repos/a",
        allowed: true,
        rule: "GET api.github.com/repos/**",
        bytes_in: 10,
        bytes_out: 5,
        duration: 1,
      },
      {
        id: 2,
        time: when,
        kind: "https",
        host: "api.github.com",
        port: 443,
        method: "POST",
        path: "/repos/a/issues",
        allowed: false,
        rule: "ask",
        reason: "no answer",
        bytes_in: 0,
        bytes_out: 0,
        duration: 1,
      },
      {
        id: 3,
        time: when,
        kind: "connect",
        host: "other.example",
        port: 443,
        allowed: false,
        rule: "custom",
        bytes_in: 0,
        bytes_out: 0,
        duration: 1,
      },
    ];
    const { client, calls } = fake([q(4, "s1", { host: "waiting.example", kind: "connect" })], log);
    render(<Network client={client} session={session} onError={fail} />);
    expect(await screen.findByText("GET api.github.com/repos/a")).toBeTruthy();
    expect(screen.getByText("POST api.github.com/repos/a/issues")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Allow this request" })).toBeTruthy();
    expect(screen.getByRole("button", { name: "Allow this host" })).toBeTruthy();
    expect(await screen.findByText("waiting.example")).toBeTruthy();
    expect(screen.getByText(/asks wait 90 s/)).toBeTruthy();

    fireEvent.click(screen.getByRole("button", { name: "Save for the project" }));
    expect(await screen.findByText("saved in /p/.airlock/policy.yaml")).toBeTruthy();
    expect(calls).toContainEqual({ method: "POST", path: "/sessions/s1/policy/save", body: undefined });
  });
});
