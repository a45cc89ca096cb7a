import type { FileDiff, Hunk } from "../api/types";
import { quote } from "./names";

// Unified diff text of one hunk (or all of a file's), as diff2html reads it.
export function hunkPatch(f: FileDiff, hunks: Hunk[]): string {
  // Names quoted (lib/names.ts): a newline in a name would forge lines of
  // the patch diff2html reads, a bidi control would reorder its title.
  const from = f.kind === "added" ? "/dev/null" : quote(`a/${f.from || f.path}`);
  const to = f.kind === "deleted" ? "/dev/null" : quote(`b/${f.path}`);
  let out = `diff --git ${quote(`a/${f.from || f.path}`)} ${quote(`b/${f.path}`)}\n--- ${from}\n+++ ${to}\n`;
  for (const h of hunks) {
    out += `@@ -${h.old_start},${h.old_lines} +${h.new_start},${h.new_lines} @@\n`;
    for (const l of h.lines) {
      out += l.endsWith("\n") ? l : l + "\n\\ No newline at end of file\n";
    }
  }
  return out;
}

export interface Badge {
  label: string;
  tone: "add" | "mod" | "del" | "ren" | "warn" | "bad" | "info";
  title: string;
}

// badges says what a file change is, for the tree and the header.
export function badges(f: FileDiff): Badge[] {
  const b: Badge[] = [];
  const kinds: Record<string, Badge> = {
    added: { label: "A", tone: "add", title: "added" },
    modified: { label: "M", tone: "mod", title: "modified" },
    deleted: { label: "D", tone: "del", title: "deleted" },
    renamed: { label: "R", tone: "ren", title: `renamed from ${f.from}` },
  };
  b.push(kinds[f.kind] ?? { label: "T", tone: "mod", title: String(f.kind).replace("_", " ") });
  if (f.binary) b.push({ label: "bin", tone: "info", title: "binary: no text diff" });
  if (f.conflict) b.push({ label: "conflict", tone: "bad", title: f.conflict_reason || "the host changed the same lines" });
  else if (f.merged) b.push({ label: "merged", tone: "info", title: "merged with changes made on the host" });
  if (f.held) b.push({ label: "held", tone: "warn", title: `held by policy: ${f.held}` });
  if (f.generated) b.push({ label: "generated", tone: "info", title: `generated (${f.generated}): its changes are folded` });
  if (f.ignored === "session")
    b.push({
      label: "ignored",
      tone: "warn",
      title: `ignored only by a rule this session added${f.ignored_by ? ": " + f.ignored_by : ""}`,
    });
  else if (f.ignored)
    b.push({ label: "ignored", tone: "info", title: `ignored by the project's rules${f.ignored_by ? ": " + f.ignored_by : ""}` });
  for (const x of f.findings ?? []) b.push({ label: x.scanner, tone: "bad", title: x.message });
  return b;
}
