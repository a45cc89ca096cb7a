import type { FileDiff } from "../api/types";

// The review's file tree: files added as the diff streams in, laid out
// as rows (in path order, as git and `airlock diff` list them) with
// folds and a filter. Building rows is linear in the files, so the tree is built once
// however many slices the files come in, and laid out again per render.

interface Dir {
  path: string; // "" for the root, else "a/b"
  name: string;
  dirs: Map<string, Dir>;
  files: Map<string, FileDiff>; // by name
  sorted: (Dir | FileDiff)[] | null; // null: sort again
}

export type Row =
  | { dir: true; path: string; name: string; depth: number; count: number; flagged: number; folded: boolean }
  | { dir: false; path: string; name: string; depth: number; file: FileDiff };

// rowKey names a row uniquely (a folder and a file may share a path after
// one replaced the other).
export const rowKey = (r: Row) => (r.dir ? "d:" : "f:") + r.path;

// flaggedFile says whether a file needs a look before anything else: a
// finding, a conflict or a policy hold.
export const flaggedFile = (f: FileDiff) => !!(f.findings?.length || f.conflict || f.held);

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function newDir(path: string, name: string): Dir {
  return { path, name, dirs: new Map(), files: new Map(), sorted: null };
}

export class FileTree {
  private root = newDir("", "");
  private paths = new Map<string, FileDiff>();

  get size() {
    return this.paths.size;
  }

  get(path: string): FileDiff | undefined {
    return this.paths.get(path);
  }

  // add puts files in the tree (a file of a path already there replaces it).
  add(files: FileDiff[]) {
    for (const f of files) {
      const parts = f.path.split("/");
      let d = this.root;
      for (let i = 0; i < parts.length - 1; i++) {
        let sub = d.dirs.get(parts[i]);
        if (!sub) {
          sub = newDir(parts.slice(0, i + 1).join("/"), parts[i]);
          d.dirs.set(parts[i], sub);
          d.sorted = null;
        }
        d = sub;
      }
      const name = parts[parts.length - 1];
      d.sorted = null; // a replaced file is a new object too
      d.files.set(name, f);
      this.paths.set(f.path, f);
    }
  }

  // rows lays the tree out: folded folders hide what is under them; a
  // filter (case-insensitive, on the whole path) keeps the files that hold
  // it and the folders above them, with counts of those files. A folder
  // that holds only one folder shows as one row ("a/b/c").
  rows(folded: { has(path: string): boolean }, filter = ""): Row[] {
    const out: Row[] = [];
    const q = filter.trim().toLowerCase();
    const walk = (d: Dir, depth: number): [number, number] => {
      let count = 0,
        flagged = 0;
      for (const e of sorted(d)) {
        if (!("dirs" in e)) {
          const f = e;
          if (q && !f.path.toLowerCase().includes(q)) continue;
          count++;
          if (flaggedFile(f)) flagged++;
          out.push({ dir: false, path: f.path, name: f.path.slice(f.path.lastIndexOf("/") + 1), depth, file: f });
          continue;
        }
        let sub = e;
        let name = sub.name;
        while (sub.files.size === 0 && sub.dirs.size === 1) {
          sub = sub.dirs.values().next().value!;
          name += "/" + sub.name;
        }
        const at = out.length;
        const isFolded = folded.has(sub.path);
        out.push({ dir: true, path: sub.path, name, depth, count: 0, flagged: 0, folded: isFolded });
        const [n, fl] = walk(sub, depth + 1);
        if (n === 0) {
          out.length = at; // nothing under it passes the filter
          continue;
        }
        if (isFolded) out.length = at + 1;
        out[at] = { ...(out[at] as Row & { dir: true }), count: n, flagged: fl };
        count += n;
        flagged += fl;
      }
      return [count, flagged];
    };
    walk(this.root, 0);
    return out;
  }

  // files are the files in the order the rows show them, folds aside.
  files(filter = ""): FileDiff[] {
    return this.rows(new Set(), filter).flatMap((r) => (r.dir ? [] : [r.file]));
  }
}

// sorted are a folder's folders and files in path order (a folder sorts
// as its name and a slash, as in git).
function sorted(d: Dir): (Dir | FileDiff)[] {
  if (!d.sorted) {
    const keyed: [string, Dir | FileDiff][] = [];
    for (const [n, sub] of d.dirs) keyed.push([n + "/", sub]);
    for (const [n, f] of d.files) keyed.push([n, f]);
    d.sorted = keyed.sort((a, b) => byName(a[0], b[0])).map((k) => k[1]);
  }
  return d.sorted;
}

// ancestors are the folders a path is under, outermost first.
export function ancestors(path: string): string[] {
  const parts = path.split("/");
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join("/"));
}
