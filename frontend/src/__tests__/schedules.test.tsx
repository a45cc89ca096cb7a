import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { Schedules } from "../components/Schedules";
import { Client } from "../api/client";
import type { Schedule, ScheduleRun } from "../api/types";
import type { Transport } from "../api/transport";

const run: ScheduleRun = {
  id: 1,
  schedule: "nightly",
  due: "2026-11-23T06:00:00Z",
  trigger: "catch-up",
  started: "2026-11-23T07:12:00Z",
  ended: "2026-11-23T07:14:00Z",
  session: "3f2a00000001",
  outcome: "done",
  exit_code: 0,
  changed: 2,
};

const nightly: Schedule = {
  name: "nightly",
  cron: "0 6 * * 1-5",
  project: "/src/app",
  agent: "claude",
  prompt: "Review yesterday's commits\nand fix what is broken",
  created: "2026-11-20T10:00:00Z",
  next: "2026-11-24T06:00:00Z",
  last: run,
};

// A transport with one schedule and its run, as the engine answers them.
function fake() {
  const calls: { method: string; path: string }[] = [];
  const t: Transport = {
    kind: "browser",
    async request<T>(method: string, path: string) {
      calls.push({ method, path });
      if (path === "/schedules") return [nightly] as T;
      if (path === "/schedules/nightly/runs") return [run] as T;
      if (path === "/schedules/nightly/run") return { ...run, id: 2, outcome: "running", trigger: "manual" } as T;
      return undefined as T;
    },
    async stream() {},
    watch: () => ({ ended: new Promise<void>(() => {}), close() {} }),
    terminal: () => ({ write() {}, resize() {}, close() {} }),
    pickFolder: async () => null,
  };
  return { client: new Client(t), calls };
}

afterEach(cleanup);

describe("Schedules", () => {
  it("lists schedules with their cron and last outcome, runs one now, and opens a run's session", async () => {
    const { client, calls } = fake();
    const opened: string[] = [];
    render(
      <Schedules
        client={client}
        onOpen={(id) => opened.push(id)}
        onError={(e) => {
          throw e;
        }}
      />,
    );
    await screen.findByText("nightly");
    expect(screen.getByText("0 6 * * 1-5")).toBeTruthy();
    expect(screen.getByText(/claude: Review yesterday's commits$/)).toBeTruthy();
    expect(screen.getByText("done")).toBeTruthy();

    fireEvent.click(screen.getByRole("button", { name: "Run now" }));
    await waitFor(() => expect(calls.some((c) => c.method === "POST" && c.path === "/schedules/nightly/run")).toBe(true));

    fireEvent.click(screen.getByText("nightly"));
    const link = await screen.findByRole("link", { name: "session 3f2a00000001" });
    expect(screen.getByText("catch-up")).toBeTruthy();
    expect(screen.getByText("2 change(s)")).toBeTruthy();
    fireEvent.click(link);
    expect(opened).toEqual(["3f2a00000001"]);
  });
});
