import type { Conflict, FileDiff, Hunk, Selection } from "../api/types";

// The selections the review screen sends to accept: each pinned to the
// digests of what it showed, so the engine takes exactly that version or
// refuses ("changed since you reviewed it").

// everything shown: only these files, never one added since.
export function acceptShown(files: FileDiff[]): Selection {
  const digests: Record<string, string> = {};
  for (const f of files) digests[f.id] = f.digest ?? "";
  return { digests };
}

export function acceptFile(f: FileDiff, take?: "agent" | "host"): Selection {
  return { paths: [f.path], ...(take ? { take } : {}), digests: { [f.id]: f.digest ?? "" } };
}

export function acceptHunk(h: Hunk): Selection {
  return { hunks: [h.id], digests: { [h.id]: h.digest ?? "" } };
}

// A conflict region is pinned by its file's digest.
export function acceptConflict(f: FileDiff, c: Conflict, take: "agent" | "host"): Selection {
  return { hunks: [c.id], take, digests: { [f.id]: f.digest ?? "" } };
}
