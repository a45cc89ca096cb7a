import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Diff2HtmlUI } from "diff2html/lib-esm/ui/js/diff2html-ui-slim.js";
import { ColorSchemeType } from "diff2html/lib-esm/types";
import "diff2html/bundles/css/diff2html.min.css";
import type { Client } from "../api/client";
import type { Conflict, Diff, FileDiff, HunkBlame, Outcome, Selection } from "../api/types";
import { badges, hunkPatch, tree } from "../lib/patch";
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
  const [diff, setDiff] = useState<Diff | null>(null);
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

  const load = useCallback(async () => {
    try {
      const d = await client.diff(session);
      setDiff(d);
      const files = d.files ?? [];
      const first = tree(files).find((e) => !e.dir)?.path ?? null;
      setSel((cur) => (cur && files.some((f) => f.path === cur) ? cur : first));
    } catch (e) {
      onError(e);
    }
  }, [client, session, onError]);

  useEffect(() => {
    void load();
  }, [load]);

  // The blame is read after the diff, apart: a session without a
  // timeline, or an engine without one, shows the diff without it.
  useEffect(() => {
    if (!diff || !showBlame) return;
    let live = true;
    client.blame(session).then(
      (b) => live && setBlame(Object.fromEntries((b?.hunks ?? []).map((h) => [h.hunk, h]))),
      () => live && setBlame({}),
    );
    return () => {
      live = false;
    };
  }, [client, session, diff, showBlame]);

  const files = useMemo(() => diff?.files ?? [], [diff]);
  const entries = useMemo(() => tree(files), [files]);
  const order = useMemo(() => entries.filter((e) => !e.dir).map((e) => e.file!), [entries]);
  const idx = order.findIndex((f) => f.path === sel);
  const file: FileDiff | undefined = order[idx];
  const parts = file?.conflicts?.length ? file.conflicts.length : (file?.hunks?.length ?? 0);

  useEffect(() => {
    setHunk(0);
    if (sel && sel !== path) onPath?.(sel);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [sel]);

  const act = useCallback(
    async (verb: "accept" | "discard", s: Selection, what: string) => {
      setBusy(true);
      try {
        const out = verb === "accept" ? await client.accept(session, s) : await client.discard(session, s);
        const failed = out.outcomes.filter((o) => !o.applied && !o.left);
        setLeft(out.outcomes.filter((o) => o.left));
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
    act(verb, verb === "accept" ? acceptFile(f, take) : { paths: [f.path] }, quote(f.path) + (take ? ` (took ${take})` : ""));
  const partAction = (verb: "accept" | "discard") => {
    if (!file) return;
    if (file.conflicts?.length) {
      const c = file.conflicts[hunk];
      if (c) void act("accept", acceptConflict(file, c, verb === "accept" ? "agent" : "host"), `conflict #${c.id}`);
      return;
    }
    const h = file.hunks?.[hunk];
    if (h) void act(verb, verb === "accept" ? acceptHunk(h) : { hunks: [h.id] }, `hunk #${h.id} of ${quote(file.path)}`);
    else void fileAction(verb, file);
  };

  const move = (d: number) => {
    if (!order.length) return;
    const i = Math.min(order.length - 1, Math.max(0, (idx < 0 ? 0 : idx) + d));
    setSel(order[i].path);
  };
  const moveHunk = (d: number) => {
    const n = hunk + d;
    if (n >= 0 && n < parts) setHunk(n);
    else if (n >= parts) move(1);
    else if (n < 0 && idx > 0) move(-1);
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
    "?": () => setHelp(!help),
    Escape: () => setHelp(false),
  });

  if (!diff) return <div className="empty">Reading the session's changes…</div>;
  if (!files.length)
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
            disabled={busy}
            onClick={() => act("accept", acceptShown(files), "everything shown")}
            title="Accept every change shown here, as shown (conflicts need a choice; held and flagged changes stay until you accept them one by one)"
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
        {left.length > 0 && (
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
            </ul>
          </div>
        )}
        <div className="muted small">
          {files.length} changed · workspace {bytes(diff.workspace.used)} of {bytes(diff.workspace.size)}
        </div>
        <ul role="tree">
          {entries.map((e) =>
            e.dir ? (
              <li key={"d:" + e.path} className="dir" style={{ paddingLeft: 8 + e.depth * 14 }}>
                <PathName path={e.name} />/
              </li>
            ) : (
              <li
                key={e.path}
                role="treeitem"
                aria-selected={e.path === sel}
                className={"file" + (e.path === sel ? " selected" : "")}
                style={{ paddingLeft: 8 + e.depth * 14 }}
                onClick={() => setSel(e.path)}
                data-path={e.path}
              >
                <span className="name">
                  <PathName path={e.name} />
                </span>
                {badges(e.file!).map((b) => (
                  <span key={b.label} className={"badge " + b.tone} title={b.title}>
                    {b.label}
                  </span>
                ))}
              </li>
            ),
          )}
        </ul>
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
            {file.conflict && (
              <div className="callout bad">
                Conflict: {file.conflict_reason}. Choose a side for each region below, or for the whole file above.
              </div>
            )}
            {file.merged && (
              <div className="callout info">The project changed this file too, elsewhere: accepting writes both changes merged.</div>
            )}
            {file.conflicts?.length
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
            {!file.conflicts?.length && file.hunks?.length
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
            {!file.hunks?.length && !file.conflicts?.length && (
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
