// @vitest-environment node
import { describe, expect, it } from "vitest";
import { ancestors, FileTree, type Row } from "../lib/filetree";
import type { FileDiff } from "../api/types";

const file = (path: string, more: Partial<FileDiff> = {}): FileDiff => ({
  id: path,
  path,
  kind: "added",
  type: "file",
  size: 1,
  old_size: 0,
  ...more,
});

const show = (rows: Row[]) =>
  rows.map((r) => "  ".repeat(r.depth) + (r.dir ? `${r.name}/ (${r.count}${r.flagged ? ", " + r.flagged + " flagged" : ""})` : r.name));

describe("FileTree", () => {
  const t = new FileTree();
  // In slices, out of order, as a stream brings them.
  t.add([file("src/b.go"), file("README.md")]);
  t.add([file("src/a.go", { findings: [{ scanner: "secrets", message: "a key" }] }), file("web/node_modules/x/index.js")]);
  t.add([file("web/node_modules/x/package.json"), file("src/lib/util.go"), file("Makefile")]);

  it("lays files out in path order, as git lists them, with counts", () => {
    expect(show(t.rows(new Set()))).toEqual([
      "Makefile",
      "README.md",
      "src/ (3, 1 flagged)",
      "  a.go",
      "  b.go",
      "  lib/ (1)",
      "    util.go",
      "web/node_modules/x/ (2)",
      "  index.js",
      "  package.json",
    ]);
    expect(t.size).toBe(7);
  });

  it("hides what a folded folder holds, and keeps its count", () => {
    expect(show(t.rows(new Set(["src", "web/node_modules/x"])))).toEqual([
      "Makefile",
      "README.md",
      "src/ (3, 1 flagged)",
      "web/node_modules/x/ (2)",
    ]);
  });

  it("filters on the whole path, counting what passes", () => {
    expect(show(t.rows(new Set(), "NODE_mod"))).toEqual(["web/node_modules/x/ (2)", "  index.js", "  package.json"]);
    expect(show(t.rows(new Set(["src"]), ".go"))).toEqual(["src/ (3, 1 flagged)"]);
    expect(t.rows(new Set(), "nothing like it")).toEqual([]);
  });

  it("orders the files for j/k as the rows do", () => {
    expect(t.files().map((f) => f.path)).toEqual([
      "Makefile",
      "README.md",
      "src/a.go",
      "src/b.go",
      "src/lib/util.go",
      "web/node_modules/x/index.js",
      "web/node_modules/x/package.json",
    ]);
  });

  it("replaces a file added again", () => {
    const u = new FileTree();
    u.add([file("a/b", { kind: "added" })]);
    u.add([file("a/b", { kind: "modified" })]);
    expect(u.size).toBe(1);
    expect(u.get("a/b")?.kind).toBe("modified");
  });

  it("keeps hostile names as they are, one row each", () => {
    const names = ["x\n--- a\ta.txt", "uni\u202egnp.exe", "README.md\u200b", "README.md", "<img src=x>", "d\u202e/in.txt"];
    const u = new FileTree();
    u.add(names.map((n) => file(n)));
    const rows = u.rows(new Set());
    expect(
      rows
        .filter((r) => !r.dir)
        .map((r) => r.path)
        .sort(),
    ).toEqual([...names].sort());
    expect(rows.filter((r) => r.dir).map((r) => r.path)).toEqual(["d\u202e"]);
  });

  it("lays 10,000 files in 100 folders out, counted right", () => {
    const u = new FileTree();
    for (let s = 0; s < 10; s++)
      u.add(Array.from({ length: 1000 }, (_, i) => file(`pkg${String((s * 1000 + i) % 100).padStart(2, "0")}/f${s * 1000 + i}.js`)));
    const rows = u.rows(new Set());
    expect(rows.length).toBe(10_100);
    expect(rows.filter((r) => r.dir).every((r) => r.dir && r.count === 100)).toBe(true);
    expect(u.rows(new Set(rows.filter((r) => r.dir).map((r) => r.path))).length).toBe(100);
  });
});

describe("ancestors", () => {
  it("names the folders above a path", () => {
    expect(ancestors("a/b/c.txt")).toEqual(["a", "a/b"]);
    expect(ancestors("c.txt")).toEqual([]);
  });
});
