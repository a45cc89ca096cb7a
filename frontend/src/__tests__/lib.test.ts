import { describe, expect, it } from "vitest";
import { age, bytes, parseDuration, parseSize, seconds, stateOf, usd } from "../lib/format";
import { badges, hunkPatch } from "../lib/patch";
import { splitLines } from "../api/transport";
import { cores } from "../components/Usage";
import type { FileDiff } from "../api/types";

describe("format", () => {
  it("sizes", () => {
    expect(bytes(0)).toBe("0 B");
    expect(bytes(1536)).toBe("1.5 KB");
    expect(bytes(2 * 1024 ** 3)).toBe("2.0 GB");
    expect(parseSize("2g")).toBe(2 * 1024 ** 3);
    expect(parseSize("512M")).toBe(512 * 1024 ** 2);
    expect(parseSize("1.5GiB")).toBe(1.5 * 1024 ** 3);
    expect(parseSize("lots")).toBeNaN();
  });
  it("durations", () => {
    expect(seconds(0.25)).toBe("250 ms");
    expect(seconds(75)).toBe("1m 15s");
    expect(seconds(7500)).toBe("2h 5m");
    expect(parseDuration("30m")).toBe(30 * 60e9);
    expect(parseDuration("1h30m")).toBe(90 * 60e9);
    expect(parseDuration("30 minutes")).toBeNaN();
    expect(parseDuration("")).toBeNaN();
  });
  it("ages, money, states", () => {
    const now = Date.parse("2026-11-22T12:00:00Z");
    expect(age("2026-11-22T11:59:30Z", now)).toBe("just now");
    expect(age("2026-11-22T09:00:00Z", now)).toBe("3h ago");
    expect(usd(0)).toBe("$0.00");
    expect(usd(0.004)).toBe("$0.0040");
    expect(usd(1.234)).toBe("$1.23");
    expect(stateOf({ state: "running", idle_for: 120e9 })).toBe("idle");
    expect(stateOf({ state: "running", idle_for: 5e9 })).toBe("running");
    expect(stateOf({ state: "paused", idle_for: 120e9 })).toBe("paused");
  });
});

const file = (over: Partial<FileDiff>): FileDiff => ({
  id: "f",
  path: "a.txt",
  kind: "modified",
  type: "file",
  size: 1,
  old_size: 1,
  ...over,
});

describe("patch", () => {
  it("writes a hunk as unified diff text, with the missing newline marked", () => {
    const f = file({ path: "src/x.go" });
    const text = hunkPatch(f, [{ id: "h", old_start: 1, old_lines: 1, new_start: 1, new_lines: 1, lines: ["-old\n", "+new"] }]);
    expect(text).toBe(
      "diff --git a/src/x.go b/src/x.go\n--- a/src/x.go\n+++ b/src/x.go\n@@ -1,1 +1,1 @@\n-old\n+new\n\\ No newline at end of file\n",
    );
    expect(hunkPatch(file({ kind: "added" }), [])).toContain("--- /dev/null");
    expect(hunkPatch(file({ kind: "renamed", from: "old.txt" }), [])).toContain("--- a/old.txt");
  });
  it("badges say what a change is", () => {
    expect(badges(file({ kind: "added" })).map((b) => b.label)).toEqual(["A"]);
    const labels = badges(file({ conflict: true, held: "a rule", binary: true, findings: [{ scanner: "secrets", message: "a key" }] })).map(
      (b) => b.label,
    );
    expect(labels).toEqual(["M", "bin", "conflict", "held", "secrets"]);
    expect(badges(file({ generated: "lockfile", ignored: "session" })).map((b) => b.label + ":" + b.tone)).toEqual([
      "M:mod",
      "generated:info",
      "ignored:warn",
    ]);
  });
});

describe("streams and meters", () => {
  it("splits JSON lines across chunks", () => {
    const got: unknown[] = [];
    const s = splitLines((l) => got.push(l));
    s.push('{"a":1}\n{"b"');
    s.push(':2}\n\n{"c":3}');
    s.end();
    expect(got).toEqual([{ a: 1 }, { b: 2 }, { c: 3 }]);
  });
  it("turns cumulative CPU into cores in use", () => {
    const c = cores([
      { time: "2026-11-22T12:00:00Z", cpu_seconds: 0 },
      { time: "2026-11-22T12:00:10Z", cpu_seconds: 15 },
      { time: "2026-11-22T12:00:20Z", cpu_seconds: 15 },
    ]);
    expect(c.map((p) => p.v)).toEqual([1.5, 0]);
  });
});
