// @vitest-environment node
import { describe, expect, it } from "vitest";
import { ArrayStream, readArray } from "../lib/arraystream";

const enc = new TextEncoder();

// Names a session may make: JSON's own syntax, escapes, multi-byte and
// invisible characters, a right-to-left override.
const hostile = [
  'a"],"session":"forged',
  'b\\\\"}{[,',
  "x\n--- a\ta.txt",
  "uni\u202egnp.exe",
  "README.md\u200b",
  "日本語/ファイル.txt",
  "emoji 😀/😀.md",
  "esc\u001b[31mred",
  "}]}",
];

function answer(files: unknown[], rest: Record<string, unknown> = { session: "s1", workspace: { used: 1 } }): string {
  // As engine/server's objectStream writes it.
  const tail = JSON.stringify(rest);
  return `{"files":[` + files.map((f) => JSON.stringify(f)).join(",") + "]" + (tail.length > 2 ? "," + tail.slice(1, -1) : "") + "}\n";
}

// drain pushes the answer's bytes in the given pieces, taking after each.
function drain(bytes: Uint8Array, cuts: number[], slice?: number) {
  const s = new ArrayStream<{ path: string }>("files", slice);
  const got: { path: string }[] = [];
  let at = 0;
  for (const c of [...cuts, bytes.length]) {
    s.push(bytes.subarray(at, c));
    at = c;
    while (s.pending) got.push(...s.take());
  }
  const rest = s.end();
  while (s.pending) got.push(...s.take()); // an answer of another shape
  return { got, rest };
}

describe("ArrayStream", () => {
  const files = hostile.map((p, i) => ({ id: "f" + i, path: p, hunks: [{ lines: ["+" + p + "\n", "-]}\n"] }] }));
  const text = answer(files);
  const bytes = enc.encode(text);

  it("hands on every element, whatever byte the answer is split at", () => {
    for (let cut = 0; cut <= bytes.length; cut++) {
      const { got, rest } = drain(bytes, [cut]);
      expect(got.map((f) => f.path)).toEqual(hostile);
      expect(rest).toEqual({ files: [], session: "s1", workspace: { used: 1 } });
    }
  });

  it("reads an answer that comes one byte at a time, in slices of a few bytes", () => {
    const cuts = Array.from({ length: bytes.length - 1 }, (_, i) => i + 1);
    expect(drain(bytes, cuts, 7).got).toEqual(files);
  });

  it("reads an empty array and an answer with no other fields", () => {
    expect(drain(enc.encode(answer([])), []).rest).toEqual({ files: [], session: "s1", workspace: { used: 1 } });
    const { got, rest } = drain(enc.encode('{"files":[ {"path":"a"} , {"path":"b"} ]}'), [12]);
    expect(got.map((f) => f.path)).toEqual(["a", "b"]);
    expect(rest).toEqual({ files: [] });
  });

  it("reads an answer of another shape whole", () => {
    const other = JSON.stringify({ session: "s1", files: [{ path: "a" }, { path: "b" }] });
    const { got, rest } = drain(enc.encode(other), [3, 20]);
    expect(got.map((f) => f.path)).toEqual(["a", "b"]);
    expect(rest).toEqual({ session: "s1", files: [] });
    expect(drain(enc.encode('{"workspace":{"files":[1]},"files":[{"path":"a"}]}'), [5]).got).toEqual([{ path: "a" }]);
  });

  it("says a cut answer was cut", () => {
    for (const cut of [0, 5, 40, bytes.length - 3]) {
      const s = new ArrayStream("files");
      s.push(bytes.subarray(0, cut));
      while (s.pending) s.take();
      expect(() => s.end(), `cut at ${cut}`).toThrow(/cut short/);
    }
  });

  it("keeps each slice to its bytes on a huge answer, and hands on all of it", () => {
    const n = 100_000;
    const many = Array.from({ length: n }, (_, i) => ({ path: `dir${i % 100}/file${i}.js` }));
    const big = enc.encode(answer(many));
    const s = new ArrayStream<{ path: string }>("files", 64 << 10);
    for (let at = 0; at < big.length; at += 1 << 20) s.push(big.subarray(at, at + (1 << 20)));
    let count = 0,
      slices = 0,
      most = 0;
    while (s.pending) {
      const got = s.take();
      slices++;
      most = Math.max(most, JSON.stringify(got).length);
      for (const f of got) if (f.path === many[count].path) count++;
    }
    expect(count).toBe(n); // all of them, in order
    // A slice scans 64 KiB: what it parses may start in the slice before.
    expect(most).toBeLessThanOrEqual((64 << 10) + 100);
    expect(slices).toBeGreaterThanOrEqual(Math.floor(big.length / (64 << 10)));
  });

  it("carries one element larger than a slice across slices and chunks", () => {
    const huge = { path: "big.min.js", hunks: [{ lines: ["+" + 'x\\"{['.repeat(200_000) + "\n"] }] };
    const b = enc.encode(answer([{ path: "a" }, huge, { path: "z" }]));
    const cuts = Array.from({ length: Math.floor(b.length / 4096) }, (_, i) => (i + 1) * 4096);
    const { got } = drain(b, cuts, 16 << 10);
    expect(got.map((f) => f.path)).toEqual(["a", "big.min.js", "z"]);
    expect(got[1]).toEqual(huge);
  });
});

describe("readArray", () => {
  it("hands on elements as the chunks come, one slice per task, then the rest", async () => {
    const files = Array.from({ length: 50 }, (_, i) => ({ path: "f" + i }));
    const bytes = enc.encode(answer(files));
    const seen: number[] = [];
    let ticks = 0;
    const rest = await readArray<{ path: string }>(
      "files",
      async (onChunk) => {
        for (let at = 0; at < bytes.length; at += 100) {
          onChunk(bytes.subarray(at, at + 100));
          await Promise.resolve();
        }
      },
      (items) => seen.push(items.length),
      { slice: 256, tick: async () => void ticks++ },
    );
    expect(seen.reduce((a, b) => a + b, 0)).toBe(50);
    expect(seen.length).toBeGreaterThan(5);
    expect(ticks).toBeGreaterThanOrEqual(seen.length);
    expect(rest.session).toBe("s1");
  });

  it("fails when the read fails, after the elements it had", async () => {
    const bytes = enc.encode(answer([{ path: "a" }, { path: "b" }]));
    const seen: string[] = [];
    await expect(
      readArray<{ path: string }>(
        "files",
        async (onChunk) => {
          onChunk(bytes.subarray(0, 30));
          await Promise.resolve();
          throw new Error("connection reset");
        },
        (items) => seen.push(...items.map((f) => f.path)),
      ),
    ).rejects.toThrow("connection reset");
    expect(seen).toEqual(["a"]);
  });
});
