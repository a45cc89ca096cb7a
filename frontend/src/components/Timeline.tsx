import { useCallback, useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { Checkpoint, Diff, Restored, Undone } from "../api/types";
import { badges, hunkPatch } from "../lib/patch";
import { age, bytes, seconds, usd } from "../lib/format";
import { DiffBlock } from "./Review";
import { PathName } from "./PathName";

// label names a checkpoint the way `airlock turns` does.
export function label(c: Checkpoint): string {
  switch (c.kind) {
    case "turn":
      return `Turn ${c.turn}`;
    case "command":
      return `Command ${c.command}`;
    case "undo":
      return c.undo_to ? `Undo to #${c.undo_to}` : "Undo";
    case "periodic":
      return "Periodic";
    case "fork":
      return "Forked";
    default:
      return c.kind[0].toUpperCase() + c.kind.slice(1);
  }
}

// changeQuery is what a checkpoint changed: a turn by its number, any
// other checkpoint from the one its changes are counted from.
function changeQuery(c: Checkpoint) {
  return c.kind === "turn" && c.turn ? { turn: c.turn } : { from_checkpoint: c.from, to_checkpoint: c.id };
}

function Stats({ c }: { c: Checkpoint }) {
  // A turn whose agent reported no tokens shows none.
  const u = c.usage && (c.usage.input_tokens || c.usage.output_tokens) ? c.usage : undefined;
  return (
    <div className="muted small">
      {c.files} file{c.files === 1 ? "" : "s"} · <span className="plus">+{c.added}</span> <span className="minus">−{c.removed}</span>
      {u ? ` · ${u.input_tokens} in · ${u.output_tokens} out` : ""}
      {u?.cost_usd ? ` · ${usd(u.cost_usd)}` : ""}
      {c.cpu_seconds ? ` · CPU ${seconds(c.cpu_seconds)}` : ""}
    </div>
  );
}

// TurnDiff is what one checkpoint changed, file by file.
function TurnDiff({ diff, theme }: { diff: Diff; theme: "dark" | "light" }) {
  const files = diff.files ?? [];
  if (!files.length) return <div className="empty small">No change in the workspace.</div>;
  return (
    <>
      {files.map((f) => (
        <div key={f.path} className="turn-file" data-path={f.path}>
          <div className="hunk-bar">
            <span className="hunk-title">
              {f.from ? (
                <>
                  <PathName path={f.from} /> → <PathName path={f.path} />
                </>
              ) : (
                <PathName path={f.path} raw={f.raw_path} />
              )}
            </span>
            {badges(f).map((b) => (
              <span key={b.label} className={"badge " + b.tone} title={b.title}>
                {b.label}
              </span>
            ))}
          </div>
          {f.hunks?.length ? (
            <DiffBlock patch={hunkPatch(f, f.hunks)} split={false} theme={theme} />
          ) : (
            <div className="empty small">
              {f.binary
                ? `Binary file (${bytes(f.old_size)} → ${bytes(f.size)}): no text diff.`
                : f.kind === "deleted"
                  ? "Deleted."
                  : "No text change (mode or type only)."}
            </div>
          )}
        </div>
      ))}
    </>
  );
}

// Timeline is the session's checkpoints, newest first: what each turn or
// command changed, and undo or fork from any of them.
export function Timeline({
  client,
  session,
  theme,
  onOpen,
  onChanged,
  onError,
}: {
  client: Client;
  session: string;
  theme: "dark" | "light";
  onOpen: (id: string) => void;
  onChanged?: () => void;
  onError: (e: unknown) => void;
}) {
  const [list, setList] = useState<Checkpoint[] | null>(null);
  const [sel, setSel] = useState<number | null>(null);
  const [diff, setDiff] = useState<Diff | null>(null);
  const [n, setN] = useState(1);
  const [busy, setBusy] = useState("");
  const [undone, setUndone] = useState<Undone | null>(null);
  const [forked, setForked] = useState<Restored | null>(null);

  const load = useCallback(async () => {
    try {
      setList((await client.checkpoints(session)) ?? []);
    } catch (e) {
      onError(e);
      setList([]);
    }
  }, [client, session, onError]);
  useEffect(() => {
    void load();
  }, [load]);

  const cur = list?.find((c) => c.id === sel);
  useEffect(() => {
    if (!cur) return;
    let live = true;
    setDiff(null);
    client.checkpointDiff(session, changeQuery(cur)).then(
      (d) => live && setDiff(d),
      (e) => live && onError(e),
    );
    return () => {
      live = false;
    };
    // The diff follows the selection, not each reload of the list.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [client, session, sel]);

  const undo = async (c: Checkpoint) => {
    if (
      !confirm(
        `Put the workspace back to the state after ${label(c)} (checkpoint #${c.id})? ` +
          "Processes running in the session are stopped first. The undo is a checkpoint too: it can be undone.",
      )
    )
      return;
    setBusy("undo");
    setForked(null);
    try {
      setUndone(await client.undo(session, { checkpoint: c.id }));
      await load();
      onChanged?.();
    } catch (e) {
      onError(e);
    } finally {
      setBusy("");
    }
  };
  const fork = async (c: Checkpoint) => {
    setBusy("fork");
    setUndone(null);
    try {
      setForked(await client.fork(session, { checkpoint: c.id, n }));
      onChanged?.();
    } catch (e) {
      onError(e);
    } finally {
      setBusy("");
    }
  };

  if (!list) return <div className="empty small">Reading the session's timeline…</div>;
  const tokens = list.reduce((t, c) => t + (c.usage ? c.usage.input_tokens + c.usage.output_tokens : 0), 0);
  const cost = list.reduce((t, c) => t + (c.usage?.cost_usd ?? 0), 0);
  return (
    <div className="turns">
      <aside className="turns-list">
        <div className="muted small turns-head">
          {list.length} checkpoint{list.length === 1 ? "" : "s"}
          {tokens ? ` · ${tokens} tokens` : ""}
          {cost ? ` · ${usd(cost)}` : ""}
          <span className="spacer" />
          <button onClick={load} title="Read the timeline again" aria-label="reload timeline">
            ↻
          </button>
        </div>
        {list.length === 0 ? (
          <div className="empty small">
            No checkpoints yet: one is recorded at the end of each agent turn and each command that changes the workspace.
          </div>
        ) : (
          <ol className="timeline">
            {[...list].reverse().map((c) => (
              <li
                key={c.id}
                className={"kind-" + c.kind + (c.id === sel ? " selected" : "")}
                data-checkpoint={c.id}
                aria-selected={c.id === sel}
                onClick={() => {
                  setSel(c.id);
                  setUndone(null);
                  setForked(null);
                }}
              >
                <div className="what">
                  <b>{label(c)}</b>{" "}
                  <span className="muted small" title={new Date(c.time).toLocaleString()}>
                    #{c.id} · {age(c.time)}
                  </span>
                  <Stats c={c} />
                </div>
              </li>
            ))}
          </ol>
        )}
      </aside>
      <section className="turn-view">
        {!cur ? (
          list.length > 0 && <div className="empty small">Choose a turn or command to see what it changed.</div>
        ) : (
          <>
            <header className="file-header">
              <h3>
                {label(cur)} <span className="muted small">#{cur.id}</span>
              </h3>
              <span className="muted small" title={new Date(cur.time).toLocaleString()}>
                {new Date(cur.time).toLocaleString()}
              </span>
              <span className="spacer" />
              <button disabled={!!busy} onClick={() => undo(cur)} title="Put the workspace back to the state after this">
                {busy === "undo" ? "Undoing…" : "Undo to here"}
              </button>
              <input
                type="number"
                min={1}
                max={50}
                value={n}
                onChange={(e) => setN(Math.max(1, Math.min(50, Number(e.target.value) || 1)))}
                aria-label="fork count"
              />
              <button disabled={!!busy} onClick={() => fork(cur)} title="New sessions from the state after this">
                {busy === "fork" ? "Forking…" : "Fork from here"}
              </button>
            </header>
            {undone && (
              <div className="callout info undone" role="status">
                Back to the state after {label(undone.to)} (#{undone.to.id}): {undone.files} path{undone.files === 1 ? "" : "s"} put back
                {undone.stopped ? `, ${undone.stopped} process${undone.stopped === 1 ? "" : "es"} stopped first` : ", no process stopped"}.
                The state before is checkpoint #{undone.before}: undo to it to take this back.
              </div>
            )}
            {forked && (
              <div className="callout info forked" role="status">
                New session{forked.sessions.length === 1 ? "" : "s"}:{" "}
                {forked.sessions.map((s, i) => (
                  <span key={s.id}>
                    {i > 0 && ", "}
                    <a
                      href={`#/s/${s.id}`}
                      onClick={(e) => {
                        e.preventDefault();
                        onOpen(s.id);
                      }}
                    >
                      {s.id.slice(0, 12)}
                    </a>
                  </span>
                ))}
                {forked.warnings?.map((w) => (
                  <div key={w} className="muted small">
                    {w}
                  </div>
                ))}
              </div>
            )}
            <Stats c={cur} />
            {diff ? <TurnDiff diff={diff} theme={theme} /> : <div className="empty small">Reading what it changed…</div>}
          </>
        )}
      </section>
    </div>
  );
}
