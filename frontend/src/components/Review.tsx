import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Diff2HtmlUI } from "diff2html/lib-esm/ui/js/diff2html-ui-slim.js";
import { ColorSchemeType } from "diff2html/lib-esm/types";
import "diff2html/bundles/css/diff2html.min.css";
import type { Client } from "../api/client";
import type { Conflict, Diff, FileDiff, HunkBlame, Ignored, Outcome, Outcomes, Selection } from "../api/types";
import { badges, hunkPatch } from "../lib/patch";
import { ancestors, FileTree } from "../lib/filetree";
import { count, IgnoredSection, ignoredLine, shown, TreeList, useFolds } from "./ReviewTree";
import { acceptConflict, acceptFile, acceptHunk, acceptShown } from "../lib/select";
import { bytes } from "../lib/format";
import { useShortcuts } from "../lib/keys";
import { NetSummary } from "./Network";
import { PathName } from "./PathName";
import { quote } from "../lib/names";

interface Props {
  client: Client;
  session: string;
  theme: "dark" | "light";
  // path is the file to show (from the address); onPath follows the
  // selection.
  path?: string;
  onPath?: (p: string) => void;
  // onNetwork opens the network log.
  onNetwork?: () => void;
  onError: (e: unknown) => void;
  onChanged?: () => void;
}

// DiffBlock renders one hunk (or a whole file) with diff2html, syntax
// highlighted, side by side or unified.
export function DiffBlock({ patch, split, theme }: { patch: string; split: boolean; theme: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!ref.current) return;
    const ui = new Diff2HtmlUI(ref.current, patch, {
      outputFormat: split ? "side-by-side" : "line-by-line",
      drawFileList: false,
      matching: "lines",
      highlight: true,
      fileContentToggle: false,
      stickyFileHeaders: false,
      synchronisedScroll: true,
      colorScheme: theme === "dark" ? ColorSchemeType.DARK : ColorSchemeType.LIGHT,
    });
    ui.draw();
    ui.highlightCode();
  }, [patch, split, theme]);
  return <div ref={ref} className="diffblock" />;
}

// lineCounts says how many lines a file's hunks add and remove.
function lineCounts(f: FileDiff): string {
  let add = 0,
    del = 0;
  for (const h of f.hunks ?? [])
    for (const l of h.lines) {
      if (l[0] === "+") add++;
      else if (l[0] === "-") del++;
    }
  const n = f.hunks?.length ?? 0;
  return `${count(add)} added, ${count(del)} removed line${del === 1 ? "" : "s"} in ${count(n)} hunk${n === 1 ? "" : "s"}`;
}

// blameLabel names what last changed a hunk, as `airlock diff --blame` does:
// the turn and the agent's call that made it, or the command.
export function blameLabel(b: HunkBlame): string {
  if (!b.checkpoint) return "since the last checkpoint";
  let who = `${b.kind || "checkpoint"} #${b.checkpoint}`;
  if (b.turn) who = `turn ${b.turn}`;
  else if (b.command) who = `command ${b.command}` + (b.command_line ? ` · ${b.command_line}` : "");
  const c = b.call;
  if (!c) return who;
  return (
    `${who} · ${c.tool}${c.input ? " " + c.input : ""}${c.id ? " · " + c.id : ""}` + (c.match === "last" ? " (last edit of the file)" : "")
  );
}

// blameTitle says the same at length: the checkpoint, the call's id and
// time, and how sure the match is.
export function blameTitle(b: HunkBlame): string {
  if (!b.checkpoint) return "changed after the newest checkpoint";
  const parts = [
    `last changed by checkpoint #${b.checkpoint}` + (b.kind && b.kind !== "turn" && b.kind !== "command" ? ` (${b.kind})` : ""),
  ];
  const c = b.call;
  if (c) {
    parts.push(`${c.tool} call${c.id ? " " + c.id : ""} at ${new Date(c.time).toLocaleTimeString()}`);
    parts.push(
      c.match === "text"
        ? "its new text holds these lines"
        : c.edits > 1
          ? `the last of ${c.edits} edits of the file in the turn: which one made these lines is not known`
          : "the turn's one edit of the file (its event carries no text to compare)",
    );
  } else if (b.turn) {
    parts.push("no event of the turn names the file: a command the agent ran may have changed it");
  }
  return parts.join("; ");
}

function Lines({ lines, label }: { lines: string[] | null; label: string }) {
  return (
    <div className="side">
      <div className="side-label">{label}</div>
      <pre>{lines === null ? "(no file)" : lines.length === 0 ? "(nothing)" : lines.join("")}</pre>
    </div>
  );
}

function ConflictView({ c, onTake, focused }: { c: Conflict; onTake: (take: "agent" | "host") => void; focused: boolean }) {
  return (
    <div className={"conflict" + (focused ? " focused" : "")} data-conflict={c.id}>
      <div className="hunk-bar">
        <span className="hunk-title">
          Conflict at line {c.host_start} <span className="muted">#{c.id}</span>
        </span>
        <span className="spacer" />
        <button onClick={() => onTake("host")} title="Keep the project's lines here">
          Keep host
        </button>
        <button className="primary" onClick={() => onTake("agent")} title="Take the agent's lines here">
          Take agent
        </button>
      </div>
      <div className="three-way">
        <Lines lines={c.base} label="Base (when the session started)" />
        <Lines lines={c.host} label="Host (the project now)" />
        <Lines lines={c.agent} label="Agent (the session)" />
      </div>
    </div>
  );
}

export function Review({ client, session, theme, path, onPath, onNetwork, onError, onChanged }: Props) {
  // The files come as the diff streams in: the tree grows slice by slice
  // (version counts its changes) and the rest of the diff comes at its end.
  const [tree, setTree] = useState(() => new FileTree());
  const [version, setVersion] = useState(0);
  const [diff, setDiff] = useState<Diff | null>(null); // the diff's rest, its files in tree
  const [loading, setLoading] = useState(true);
  const [sel, setSel] = useState<string | null>(path ?? null); // file path
  const [hunk, setHunk] = useState(0); // focused hunk or conflict in the file
  const [split, setSplit] = useState(() => localStorage.getItem("airlock.split") !== "0");
  // Which turn or command last changed each hunk (by hunk id), when shown.
  const [showBlame, setShowBlame] = useState(() => localStorage.getItem("airlock.blame") !== "0");
  const [blame, setBlame] = useState<Record<string, HunkBlame>>({});
  const [busy, setBusy] = useState(false);
  const [help, setHelp] = useState(false);
  const [notice, setNotice] = useState("");
  // What the last accept left in the session on purpose, and why.
  const [left, setLeft] = useState<Outcome[]>([]);
  const [leftIgnored, setLeftIgnored] = useState<{ ig: Ignored; session: boolean }[]>([]);
  const [filter, setFilter] = useState("");
  const folds = useFolds();
  // The ignored paths, once listed (?ignored=only), by the rules' owner.
  const [ignored, setIgnored] = useState<{ project: FileTree; session: FileTree } | null>(null);
  const [listing, setListing] = useState(false);
  // Generated files whose changes the user unfolded.
  const [unfolded, setUnfolded] = useState<Set<string>>(() => new Set());
  // Accept all, when ignore rules left something: what it leaves, and
  // whether to take that too.
  const [confirmAll, setConfirmAll] = useState(false);
  const [withIgnored, setWithIgnored] = useState(false);

  const loads = useRef(0);
  const load = useCallback(async () => {
    const my = ++loads.current;
    const t = new FileTree();
    let first = true;
    // While files stream in, the tree is laid out again at most every
    // 100 ms, not per slice: each layout walks every file so far.
    let shownAt = 0,
      timer: ReturnType<typeof setTimeout> | undefined;
    const bump = () => {
      timer = undefined;
      shownAt = performance.now();
      if (my === loads.current) setVersion((v) => v + 1);
    };
    setLoading(true);
    setIgnored(null);
    try {
      const d = await client.readDiff(session, (files) => {
        if (my !== loads.current) return;
        t.add(files);
        // The tree shown so far stays until the new one has files.
        setTree(t);
        if (first) {
          first = false;
          const top = t.files()[0]?.path ?? null;
          setSel((cur) => cur ?? top);
        }
        if (performance.now() - shownAt >= 100) bump();
        else timer ??= setTimeout(bump, 100);
      });
      clearTimeout(timer);
      if (my !== loads.current) return;
      setTree(t);
      setBlame({});
      setDiff(d);
      setVersion((v) => v + 1);
      setSel((cur) => (cur && t.get(cur) ? cur : (t.files()[0]?.path ?? null)));
    } catch (e) {
      if (my === loads.current) onError(e);
    } finally {
      if (my === loads.current) setLoading(false);
    }
  }, [client, session, onError]);

  useEffect(() => {
    void load();
  }, [load]);

  // listIgnored reads the ignored paths (the summary named them) into
  // their own trees, one per kind of rule.
  const listIgnored = useCallback(async () => {
    const lists = { project: new FileTree(), session: new FileTree() };
    setIgnored(lists);
    setListing(true);
    try {
      await client.readDiff(
        session,
        (files) => {
          lists.project.add(files.filter((f) => f.ignored !== "session"));
          lists.session.add(files.filter((f) => f.ignored === "session"));
          setVersion((v) => v + 1);
        },
        "only",
      );
    } catch (e) {
      onError(e);
    } finally {
      setListing(false);
      setVersion((v) => v + 1);
    }
  }, [client, session, onError]);

  // The blame is read after the diff, apart, for the file shown (a whole
  // session's would repeat its diff: megabytes on a large one): a session
  // without a timeline, or an engine without one, shows the diff without it.
  useEffect(() => {
    if (!diff || !showBlame || !sel) return;
    let live = true;
    client.blame(session, sel).then(
      (b) => live && setBlame((cur) => ({ ...cur, ...Object.fromEntries((b?.hunks ?? []).map((h) => [h.hunk, h])) })),
      () => {},
    );
    return () => {
      live = false;
    };
  }, [client, session, diff, showBlame, sel]);

  // eslint-disable-next-line react-hooks/exhaustive-deps
  const rows = useMemo(() => tree.rows(folds.folded, filter), [tree, version, folds.folded, filter]);
  // The files in the rows' order, for j/k: laid out when a key asks.
  const order = () => tree.files(filter);
  const shownFiles = useMemo(() => rows.reduce((n, r) => n + (r.dir ? 0 : 1), 0), [rows]);
  const file: FileDiff | undefined = sel ? (tree.get(sel) ?? ignored?.project.get(sel) ?? ignored?.session.get(sel)) : undefined;
  const folded = !!file?.generated && !file.findings?.length && !unfolded.has(file.path);
  const parts = folded ? 0 : file?.conflicts?.length ? file.conflicts.length : (file?.hunks?.length ?? 0);

  useEffect(() => {
    setHunk(0);
    if (sel && sel !== path) onPath?.(sel);
    if (sel) folds.open(ancestors(sel));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [sel]);

  const act = useCallback(
    async (verb: "accept" | "discard", s: Selection, what: string) => {
      setBusy(true);
      try {
        const out: Outcomes = verb === "accept" ? await client.accept(session, s) : await client.discard(session, s);
        const failed = out.outcomes.filter((o) => !o.applied && !o.left);
        setLeft(out.outcomes.filter((o) => o.left));
        setLeftIgnored([
          ...(out.ignored?.paths ? [{ ig: out.ignored, session: false }] : []),
          ...(out.session_ignored?.paths ? [{ ig: out.session_ignored, session: true }] : []),
        ]);
        if (failed.length) onError(new Error(failed.map((o) => `${quote(o.path)}: ${o.error}`).join("\n")));
        else setNotice(`${verb === "accept" ? "Accepted" : "Discarded"} ${what}`);
        await load();
        onChanged?.();
      } catch (e) {
        // A change since it was shown refuses the whole accept: show the
        // session as it is now.
        onError(e);
        await load();
      } finally {
        setBusy(false);
      }
    },
    [client, session, load, onError, onChanged],
  );

  const fileAction = (verb: "accept" | "discard", f: FileDiff, take?: "agent" | "host") =>
    act(verb, verb === "accept" ? acceptFile(f, take) : { paths: [f.path] }, shown(f.path) + (take ? ` (took ${take})` : ""));
  const partAction = (verb: "accept" | "discard") => {
    if (!file) return;
    if (file.conflicts?.length) {
      const c = file.conflicts[hunk];
      if (c) void act("accept", acceptConflict(file, c, verb === "accept" ? "agent" : "host"), `conflict #${c.id}`);
      return;
    }
    const h = file.hunks?.[hunk];
    if (h) void act(verb, verb === "accept" ? acceptHunk(h) : { hunks: [h.id] }, `hunk #${h.id} of ${shown(file.path)}`);
    else void fileAction(verb, file);
  };

  const acceptAll = (include: boolean) => {
    setConfirmAll(false);
    const s = acceptShown(tree.files());
    void act(
      "accept",
      include ? { ...s, include_ignored: true } : s,
      include ? "everything shown, and the ignored changes" : "everything shown",
    );
  };

  const move = (d: number) => {
    const files = order();
    if (!files.length) return;
    const idx = files.findIndex((f) => f.path === sel);
    const i = Math.min(files.length - 1, Math.max(0, (idx < 0 ? 0 : idx) + d));
    setSel(files[i].path);
  };
  const moveHunk = (d: number) => {
    const n = hunk + d;
    if (n >= 0 && n < parts) setHunk(n);
    else if (n >= parts) move(1);
    else if (n < 0) move(-1);
  };

  useEffect(() => {
    document.querySelector(`[data-part="${hunk}"]`)?.scrollIntoView?.({ block: "nearest" });
  }, [hunk, sel]);

  useShortcuts({
    j: () => move(1),
    k: () => move(-1),
    n: () => moveHunk(1),
    p: () => moveHunk(-1),
    a: () => !busy && partAction("accept"),
    x: () => !busy && partAction("discard"),
    A: () => void (!busy && file && fileAction("accept", file)),
    X: () => void (!busy && file && fileAction("discard", file)),
    s: () => {
      localStorage.setItem("airlock.split", split ? "0" : "1");
      setSplit(!split);
    },
    "/": () => document.querySelector<HTMLInputElement>(".tree-filter")?.focus(),
    "?": () => setHelp(!help),
    Escape: () => (setHelp(false), setConfirmAll(false)),
  });

  const size = tree.size;
  const ig = diff?.ignored?.paths ? diff.ignored : undefined;
  const sig = diff?.session_ignored?.paths ? diff.session_ignored : undefined;
  if (!size && loading) return <div className="empty">Reading the session's changes…</div>;
  if (!size && !ig && !sig)
    return (
      <div className="empty">
        <h3>No changes</h3>
        <p>The session has not changed the project (or everything was accepted or discarded).</p>
        <button onClick={load}>Refresh</button>
      </div>
    );

  return (
    <div className="review">
      <aside className="filetree">
        <div className="tree-actions">
          <button
            className="primary"
            disabled={busy || loading}
            onClick={() => (ig || sig ? setConfirmAll(true) : acceptAll(false))}
            title="Accept every change shown here, as shown (conflicts need a choice; held and flagged changes stay until you accept them one by one; ignored changes stay unless you include them)"
          >
            Accept all
          </button>
          <button
            className="danger"
            disabled={busy}
            onClick={() => confirm("Discard every change of this session?") && act("discard", {}, "everything")}
          >
            Discard all
          </button>
          <button onClick={load} title="Read the changes again">
            ↻
          </button>
        </div>
        {(left.length > 0 || leftIgnored.length > 0) && (
          <div className="callout warn left" role="status">
            Left in the session:
            <ul>
              {left.map((o) => (
                <li key={o.path} data-left={o.path}>
                  <a href="#" onClick={(e) => (e.preventDefault(), setSel(o.path))}>
                    <PathName path={o.path} />
                  </a>
                  : {o.reason}
                </li>
              ))}
              {leftIgnored.map(({ ig, session }) => (
                <li key={String(session)} data-left-ignored={session ? "session" : "project"}>
                  {ignoredLine(ig)}: ignored by {session ? "a rule this session added" : "the project's rules"}
                </li>
              ))}
            </ul>
          </div>
        )}
        <input
          className="tree-filter"
          type="search"
          placeholder="Filter files (/)"
          aria-label="Filter files by path"
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Escape") {
              e.currentTarget.blur();
              setFilter("");
            }
            if (e.key === "ArrowDown" || e.key === "Enter") {
              e.preventDefault();
              document.querySelector<HTMLElement>(".filetree > .tree-rows")?.focus();
            }
          }}
        />
        <div className="muted small" data-summary>
          {loading ? `Reading… ${count(size)} files so far` : `${count(size)} changed`}
          {filter && ` · ${count(shownFiles)} shown`}
          {diff && ` · workspace ${bytes(diff.workspace.used)} of ${bytes(diff.workspace.size)}`}
        </div>
        {rows.length > 0 ? (
          <TreeList rows={rows} selected={sel} onSelect={setSel} onToggle={folds.toggle} label="changed files" />
        ) : (
          <div className="muted small">{size ? "No file passes the filter." : "Nothing but ignored paths changed."}</div>
        )}
        {[
          { x: sig, session: true },
          { x: ig, session: false },
        ].map(({ x, session: s }) =>
          x ? (
            <IgnoredSection
              key={String(s)}
              ig={x}
              session={s}
              list={ignored ? (s ? ignored.session : ignored.project) : null}
              listing={listing}
              version={version}
              filter={filter}
              selected={sel}
              onList={listIgnored}
              onSelect={setSel}
            />
          ) : null,
        )}
        <NetSummary client={client} session={session} onOpen={() => onNetwork?.()} onError={onError} />
        <div className="muted small keys-hint">
          <kbd>j</kbd>/<kbd>k</kbd> file · <kbd>n</kbd>/<kbd>p</kbd> hunk · <kbd>a</kbd> accept · <kbd>x</kbd> discard · <kbd>?</kbd> all
          keys
        </div>
      </aside>
      <section className="filediff">
        {notice && (
          <div className="notice" onAnimationEnd={() => setNotice("")}>
            {notice}
          </div>
        )}
        {file && (
          <>
            <header className="file-header">
              <h3 title={quote(file.path)}>
                {file.from ? (
                  <>
                    <PathName path={file.from} /> → <PathName path={file.path} raw={file.raw_path} />
                  </>
                ) : (
                  <PathName path={file.path} raw={file.raw_path} />
                )}
              </h3>
              {badges(file).map((b, i) => (
                <span key={b.label} className={"badge " + b.tone} title={b.title}>
                  {i === 0 ? b.title : b.label}
                </span>
              ))}
              <span className="spacer" />
              <label className="toggle">
                <input
                  type="checkbox"
                  checked={split}
                  onChange={() => {
                    localStorage.setItem("airlock.split", split ? "0" : "1");
                    setSplit(!split);
                  }}
                />
                side by side
              </label>
              <label className="toggle" title="Name the turn or command that last changed each hunk">
                <input
                  type="checkbox"
                  checked={showBlame}
                  onChange={() => {
                    localStorage.setItem("airlock.blame", showBlame ? "0" : "1");
                    setShowBlame(!showBlame);
                  }}
                />
                turns
              </label>
              {file.conflict ? (
                <>
                  <button disabled={busy} onClick={() => fileAction("accept", file, "host")}>
                    Keep host (file)
                  </button>
                  <button className="primary" disabled={busy} onClick={() => fileAction("accept", file, "agent")}>
                    Take agent (file)
                  </button>
                </>
              ) : (
                <>
                  <button className="danger" disabled={busy} onClick={() => fileAction("discard", file)}>
                    Discard file
                  </button>
                  <button className="primary" disabled={busy} onClick={() => fileAction("accept", file)}>
                    Accept file
                  </button>
                </>
              )}
            </header>
            {file.held && <div className="callout warn">Held by policy: {file.held}. Accept it only after reading it.</div>}
            {file.findings?.map((f, i) => (
              <div key={i} className="callout bad">
                {f.scanner}: {f.message}
                {f.line ? ` (line ${f.line})` : ""}
              </div>
            ))}
            {file.note && <div className="callout warn">{file.note}</div>}
            {file.ignored && (
              <div className={"callout " + (file.ignored === "session" ? "warn" : "info")}>
                <div>
                  Ignored by {file.ignored === "session" ? "a rule this session added" : "the project's rules"}
                  {file.ignored_by ? ` (${shown(file.ignored_by)})` : null}: Accept all leaves it unless you include ignored changes;
                  accepting the file takes it.
                </div>
              </div>
            )}
            {file.generated && (
              <div className="callout info generated" data-generated={file.generated}>
                <div>
                  Generated ({file.generated}): {lineCounts(file)}
                  {file.digest ? ` · ${file.digest.slice(0, 19)}` : null}
                  {file.findings?.length ? " · shown in full: a scanner flagged it" : null}
                </div>
                {folded && <button onClick={() => setUnfolded((u) => new Set(u).add(file.path))}>Show the changes</button>}
              </div>
            )}
            {file.conflict && (
              <div className="callout bad">
                Conflict: {file.conflict_reason}. Choose a side for each region below, or for the whole file above.
              </div>
            )}
            {file.merged && (
              <div className="callout info">The project changed this file too, elsewhere: accepting writes both changes merged.</div>
            )}
            {!folded && file.conflicts?.length
              ? file.conflicts.map((c, i) => (
                  <div key={c.id} data-part={i} onClick={() => setHunk(i)}>
                    <ConflictView
                      c={c}
                      focused={i === hunk}
                      onTake={(take) => act("accept", acceptConflict(file, c, take), `conflict #${c.id} (${take})`)}
                    />
                  </div>
                ))
              : null}
            {!folded && !file.conflicts?.length && file.hunks?.length
              ? file.hunks.map((h, i) => (
                  <div
                    key={h.id}
                    className={"hunk" + (i === hunk ? " focused" : "")}
                    data-part={i}
                    data-hunk={h.id}
                    onClick={() => setHunk(i)}
                  >
                    <div className="hunk-bar">
                      <span className="hunk-title">
                        @@ -{h.old_start},{h.old_lines} +{h.new_start},{h.new_lines} <span className="muted">#{h.id}</span>
                      </span>
                      {showBlame && blame[h.id] && (
                        <span
                          className="blame"
                          data-blame={blame[h.id].checkpoint}
                          data-call={blame[h.id].call?.id}
                          data-match={blame[h.id].call?.match}
                          title={blameTitle(blame[h.id])}
                        >
                          {blameLabel(blame[h.id])}
                        </span>
                      )}
                      <span className="spacer" />
                      <button className="danger" disabled={busy} onClick={() => act("discard", { hunks: [h.id] }, `hunk #${h.id}`)}>
                        Discard hunk
                      </button>
                      <button className="primary" disabled={busy} onClick={() => act("accept", acceptHunk(h), `hunk #${h.id}`)}>
                        Accept hunk
                      </button>
                    </div>
                    <DiffBlock patch={hunkPatch(file, [h])} split={split} theme={theme} />
                  </div>
                ))
              : null}
            {!folded && !file.hunks?.length && !file.conflicts?.length && (
              <div className="empty small">
                {file.binary
                  ? `Binary file (${bytes(file.old_size)} → ${bytes(file.size)}): no text diff.`
                  : file.kind === "deleted"
                    ? "The session deleted this file."
                    : file.link
                      ? `Symbolic link to ${file.link}`
                      : "No text change (mode or type only)."}
              </div>
            )}
          </>
        )}
      </section>
      {confirmAll && (
        <div className="overlay" onClick={() => setConfirmAll(false)}>
          <div className="dialog accept-all" role="dialog" aria-label="Accept all" onClick={(e) => e.stopPropagation()}>
            <h3>Accept all</h3>
            <p>
              Takes the {count(size)} change{size === 1 ? "" : "s"} shown, as shown (held, flagged and conflicting ones stay until you
              accept them one by one).
            </p>
            <p>Leaves in the session:</p>
            <ul>
              {ig && <li data-leaves="project">{ignoredLine(ig)}, ignored by the project's rules</li>}
              {sig && (
                <li data-leaves="session">
                  <strong>{ignoredLine(sig)}</strong>, ignored only by a rule this session added
                </li>
              )}
            </ul>
            <label className="toggle">
              <input type="checkbox" checked={withIgnored} onChange={() => setWithIgnored(!withIgnored)} />
              include the ignored changes too
            </label>
            <div className="dialog-actions">
              <button onClick={() => setConfirmAll(false)}>Cancel</button>
              <button className="primary" onClick={() => acceptAll(withIgnored)}>
                {withIgnored ? "Accept all, ignored too" : "Accept all shown"}
              </button>
            </div>
          </div>
        </div>
      )}
      {help && (
        <div className="overlay" onClick={() => setHelp(false)}>
          <div className="dialog" onClick={(e) => e.stopPropagation()}>
            <h3>Keyboard</h3>
            <table className="keys">
              <tbody>
                {[
                  ["j / k", "next / previous file"],
                  ["n / p", "next / previous hunk or conflict"],
                  ["a", "accept the hunk (a conflict: take the agent's side)"],
                  ["x", "discard the hunk (a conflict: keep the host's side)"],
                  ["A / X", "accept / discard the whole file"],
                  ["s", "side by side or unified"],
                  ["↑ / ↓", "in the file tree: next / previous row"],
                  ["← / →", "fold / open a folder (← on a file: its folder)"],
                  ["Enter", "fold or open the folder"],
                  ["/", "filter the files"],
                  ["?", "this help"],
                ].map(([k, v]) => (
                  <tr key={k}>
                    <td>
                      <kbd>{k}</kbd>
                    </td>
                    <td>{v}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <button onClick={() => setHelp(false)}>Close</button>
          </div>
        </div>
      )}
    </div>
  );
}
