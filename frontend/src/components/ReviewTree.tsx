import { useEffect, useLayoutEffect, useMemo, useRef, useState, type KeyboardEvent, type ReactNode } from "react";
import type { Ignored } from "../api/types";
import { bytes } from "../lib/format";
import { badges } from "../lib/patch";
import { rowKey, type FileTree, type Row } from "../lib/filetree";
import { quote } from "../lib/names";
import { PathName } from "./PathName";

// shown is how a path or a name a session made reaches the page as text:
// quoted where it holds what would mislead (controls, bidirectional
// overrides, invisible characters; lib/names.ts).
export function shown(path: string): string {
  return quote(path);
}

export const count = (n: number) => n.toLocaleString("en-US");

const ROW = 24; // px, every row's height
const OVERSCAN = 12;

interface ListProps {
  rows: Row[];
  selected: string | null; // the file shown
  onSelect: (path: string) => void;
  onToggle: (dir: string) => void;
  label: string;
  className?: string;
}

// TreeList shows a tree's rows as a virtual list (only the rows in view
// are on the page: 10,000 files scroll as 40 do) and walks it with the
// keyboard: ↑/↓ move (a file is shown as the cursor reaches it), → opens a
// folder, ← folds it or goes up to the folder above, Enter folds or shows.
export function TreeList({ rows, selected, onSelect, onToggle, label, className }: ListProps) {
  const ref = useRef<HTMLDivElement>(null);
  const [top, setTop] = useState(0);
  const [height, setHeight] = useState(600);
  const [cursor, setCursor] = useState<string | null>(selected ? "f:" + selected : null);
  useEffect(() => {
    if (selected) setCursor("f:" + selected);
  }, [selected]);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    const measure = () => setHeight(el.clientHeight || 600);
    measure();
    if (typeof ResizeObserver === "undefined") return;
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const at = useMemo(() => (cursor ? rows.findIndex((r) => rowKey(r) === cursor) : -1), [rows, cursor]);
  // Keep the cursor's row in view.
  useEffect(() => {
    const el = ref.current;
    if (!el || at < 0) return;
    const y = at * ROW;
    if (y < el.scrollTop) el.scrollTop = y;
    else if (y + ROW > el.scrollTop + el.clientHeight && el.clientHeight > 0) el.scrollTop = y + ROW - el.clientHeight;
  }, [at]);

  const go = (i: number) => {
    const r = rows[Math.max(0, Math.min(rows.length - 1, i))];
    if (!r) return;
    setCursor(rowKey(r));
    if (!r.dir) onSelect(r.path);
  };
  const key = (e: KeyboardEvent) => {
    const r = rows[at];
    const i = at < 0 ? -1 : at;
    switch (e.key) {
      case "ArrowDown":
        go(i + 1);
        break;
      case "ArrowUp":
        go(i - 1);
        break;
      case "Home":
        go(0);
        break;
      case "End":
        go(rows.length - 1);
        break;
      case "ArrowRight":
        if (r?.dir && r.folded) onToggle(r.path);
        else go(i + 1);
        break;
      case "ArrowLeft":
        if (r?.dir && !r.folded) onToggle(r.path);
        else if (r) {
          for (let j = i - 1; j >= 0; j--) if (rows[j].dir && rows[j].depth < r.depth) return void (go(j), e.preventDefault());
        }
        break;
      case "Enter":
      case " ":
        if (r?.dir) onToggle(r.path);
        else if (r) onSelect(r.path);
        break;
      default:
        return;
    }
    e.preventDefault();
    e.stopPropagation();
  };

  const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((top + height) / ROW) + OVERSCAN);
  const shownRows: ReactNode[] = [];
  for (let i = first; i < last; i++) {
    const r = rows[i];
    const k = rowKey(r);
    const style = { top: i * ROW, height: ROW, paddingLeft: 8 + r.depth * 14 };
    shownRows.push(
      r.dir ? (
        <li
          key={k}
          role="treeitem"
          aria-expanded={!r.folded}
          aria-level={r.depth + 1}
          className={"dir" + (k === cursor ? " cursor" : "")}
          style={style}
          data-dir={r.path}
          onClick={() => (setCursor(k), onToggle(r.path))}
        >
          <span className="fold">{r.folded ? "▸" : "▾"}</span>
          <span className="name">
            <PathName path={r.name} />/
          </span>
          {r.flagged > 0 && (
            <span className="badge bad" title={`${count(r.flagged)} flagged (findings, conflicts or holds)`}>
              {count(r.flagged)}
            </span>
          )}
          <span className="count">{count(r.count)}</span>
        </li>
      ) : (
        <li
          key={k}
          role="treeitem"
          aria-level={r.depth + 1}
          aria-selected={r.path === selected}
          className={"file" + (r.path === selected ? " selected" : "") + (k === cursor ? " cursor" : "")}
          style={style}
          onClick={() => (setCursor(k), onSelect(r.path))}
          data-path={r.path}
          title={shown(r.path)}
        >
          <span className="name">
            <PathName path={r.name} />
          </span>
          {badges(r.file).map((b) => (
            <span key={b.label} className={"badge " + b.tone} title={b.title}>
              {b.label}
            </span>
          ))}
        </li>
      ),
    );
  }
  return (
    <div
      ref={ref}
      className={"tree-rows" + (className ? " " + className : "")}
      tabIndex={0}
      aria-label={label}
      onScroll={(e) => setTop(e.currentTarget.scrollTop)}
      onKeyDown={key}
    >
      <ul role="tree" aria-label={label} style={{ height: rows.length * ROW }} data-rows={rows.length}>
        {shownRows}
      </ul>
    </div>
  );
}

// useFolds is a tree's folded folders: folded by default when foldAll
// (the ignored lists: thousands of paths under a few folders).
export function useFolds(foldAll = false) {
  const [set, setSet] = useState<Set<string>>(() => new Set());
  const folded = useMemo(() => ({ has: (p: string) => set.has(p) !== foldAll }), [set, foldAll]);
  const toggle = (p: string) =>
    setSet((s) => {
      const n = new Set(s);
      if (n.has(p)) n.delete(p);
      else n.add(p);
      return n;
    });
  // open unfolds the folders given (those above a file shown).
  const open = (dirs: string[]) =>
    setSet((s) => {
      const n = new Set(s);
      let changed = false;
      for (const d of dirs) {
        if (foldAll ? !n.has(d) : n.has(d)) {
          if (foldAll) n.add(d);
          else n.delete(d);
          changed = true;
        }
      }
      return changed ? n : s;
    });
  return { folded, toggle, open };
}

// ignoredLine says what ignore rules left, in a line: "6,600 paths
// (37 MB) under node_modules/, dist/".
export function ignoredLine(ig: Ignored): string {
  const dirs = (ig.dirs ?? []).slice(0, 3).map((d) => shown(d.path));
  const more = (ig.dirs?.length ?? 0) > 3 ? ", …" : "";
  return (
    `${count(ig.paths)} path${ig.paths === 1 ? "" : "s"} (${bytes(ig.bytes)})` + (dirs.length ? ` under ${dirs.join(", ")}${more}` : "")
  );
}

interface IgnoredProps {
  ig: Ignored;
  session: boolean; // only a rule the session wrote ignores these
  list: FileTree | null; // the paths, once listed
  listing: boolean;
  version: number;
  filter: string;
  selected: string | null;
  onList: () => void;
  onSelect: (path: string) => void;
}

// IgnoredSection is what ignore rules left out of the review, folded: how
// many paths and bytes, where, by which rules, what the scanners found
// in them all the same; and the paths themselves on demand.
export function IgnoredSection({ ig, session, list, listing, version, filter, selected, onList, onSelect }: IgnoredProps) {
  const folds = useFolds(true);
  const rows = useMemo(
    () => (list ? list.rows(folds.folded, filter) : []),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [list, version, folds.folded, filter],
  );
  const found = ig.finding_count ?? ig.findings?.length ?? 0;
  return (
    <details className={"ignored" + (session ? " session" : "")} data-ignored={session ? "session" : "project"}>
      <summary>
        <span className="fold" />
        {session ? "Ignored by a rule this session added" : "Ignored by the project's rules"}
        <span className="count">{count(ig.paths)}</span>
        {found > 0 && (
          <span className="badge bad" title="the scanners found something in these all the same">
            {count(found)}
          </span>
        )}
        <div className="muted small">
          {ignoredLine(ig)}
          {session
            ? ": flagged, left by Accept all until that rule is accepted or they are named"
            : ": summarised, not diffed; kept in the session"}
        </div>
      </summary>
      <div className="ignored-body">
        {(ig.dirs?.length ?? 0) > 0 && (
          <table className="ignored-dirs">
            <tbody>
              {ig.dirs!.map((d) => (
                <tr key={d.path} data-ignored-dir={d.path}>
                  <td className="name" title={shown(d.path)}>
                    {shown(d.path)}
                  </td>
                  <td className="num">{count(d.paths)}</td>
                  <td className="num">{bytes(d.bytes)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {(ig.rules?.length ?? 0) > 0 && (
          <ul className="ignored-rules">
            {ig.rules!.map((r) => (
              <li key={`${r.source}:${r.line}`}>
                <code>{shown(r.pattern)}</code>{" "}
                <span className="muted">
                  {shown(r.source)}:{r.line} · {count(r.paths)} path{r.paths === 1 ? "" : "s"}
                </span>
              </li>
            ))}
          </ul>
        )}
        {(ig.findings?.length ?? 0) > 0 && (
          <div className="callout bad">
            The scanners found {count(found)} thing{found === 1 ? "" : "s"} in them all the same:
            <ul>
              {ig.findings!.map((f, i) => (
                <li key={i}>
                  <span title={shown(f.path)}>{shown(f.path)}</span>: {f.scanner}: {f.message}
                </li>
              ))}
              {found > ig.findings!.length && <li>and {count(found - ig.findings!.length)} more</li>}
            </ul>
          </div>
        )}
        {(ig.unscanned ?? 0) > 0 && <div className="muted small">{count(ig.unscanned!)} of them no scanner read.</div>}
        {list ? (
          rows.length > 0 ? (
            <TreeList
              rows={rows}
              selected={selected}
              onSelect={onSelect}
              onToggle={folds.toggle}
              label={session ? "paths a rule the session added ignores" : "ignored paths"}
              className="ignored-list"
            />
          ) : (
            <div className="muted small">{listing ? "Reading them…" : filter ? "None passes the filter." : "None is left."}</div>
          )
        ) : (
          <button onClick={onList} title="List the ignored paths (their diffs on demand)">
            List them
          </button>
        )}
      </div>
    </details>
  );
}
