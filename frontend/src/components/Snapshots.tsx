import { useCallback, useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { Snapshot } from "../api/types";
import { age, bytes, nanos } from "../lib/format";
import { useBusy } from "../lib/busy";

// Snapshots is the timeline of a session's snapshots (all, with session
// unset), with restore and fork.
export function Snapshots({
  client,
  session,
  onOpen,
  onError,
}: {
  client: Client;
  session?: string;
  onOpen: (id: string) => void;
  onError: (e: unknown) => void;
}) {
  const [list, setList] = useState<Snapshot[]>([]);
  const [name, setName] = useState("");
  const [fork, setFork] = useState(3);
  const load = useCallback(async () => {
    try {
      const all = (await client.snapshots()) ?? [];
      setList(session ? all.filter((s) => s.session === session) : all);
    } catch (e) {
      onError(e);
    }
  }, [client, session, onError]);
  useEffect(() => {
    void load();
  }, [load]);
  const { busy, run } = useBusy(load, onError);
  return (
    <div className="snapshots">
      {session && (
        <div className="row">
          <input
            value={name}
            onChange={(e) => setName(e.target.value)}
            placeholder="name (optional), e.g. after-setup"
            aria-label="snapshot name"
          />
          <button
            className="primary"
            disabled={!!busy}
            onClick={() =>
              run("snapshot", async () => {
                await client.snapshot(session, name);
                setName("");
              })
            }
          >
            {busy === "snapshot" ? "Taking snapshot…" : "Take snapshot"}
          </button>
          <span className="muted small">
            Captures installed packages, the agent's home and the workspace; the session is frozen for a moment.
          </span>
        </div>
      )}
      {list.length === 0 ? (
        <div className="empty small">No snapshots{session ? " of this session" : ""} yet.</div>
      ) : (
        <ol className="timeline">
          {[...list].reverse().map((s) => {
            const ws = s.layers.find((l) => l.what === "workspace");
            const ct = s.layers.find((l) => l.what === "container");
            return (
              <li key={s.id}>
                <div className="when">{age(s.created)}</div>
                <div className="what">
                  <b>{s.name || s.id.slice(0, 12)}</b>{" "}
                  <span className="muted small">
                    {s.id.slice(0, 12)} · of session {s.session.slice(0, 12)}
                  </span>
                  <div className="muted small">
                    workspace {ws?.files ?? 0} files {bytes(ws?.bytes ?? 0)} · container {ct?.files ?? 0} files {bytes(ct?.bytes ?? 0)} ·
                    frozen {nanos(s.frozen)}
                  </div>
                </div>
                <div className="actions">
                  <button
                    disabled={!!busy}
                    onClick={() =>
                      run("restore", async () => {
                        const r = await client.restore(s.id, 1);
                        if (r.sessions[0]) onOpen(r.sessions[0].id);
                      })
                    }
                  >
                    Restore
                  </button>
                  <input
                    type="number"
                    min={1}
                    max={50}
                    value={fork}
                    onChange={(e) => setFork(Math.max(1, Math.min(50, Number(e.target.value) || 1)))}
                    aria-label="fork count"
                  />
                  <button
                    disabled={!!busy}
                    onClick={() =>
                      run("fork", async () => {
                        await client.restore(s.id, fork);
                      })
                    }
                  >
                    {busy === "fork" ? "Forking…" : `Fork ×${fork}`}
                  </button>
                  <button
                    className="danger"
                    disabled={!!busy}
                    onClick={() =>
                      confirm(`Delete snapshot ${s.name || s.id.slice(0, 12)}?`) && run("rm", () => client.removeSnapshot(s.id))
                    }
                  >
                    Delete
                  </button>
                </div>
              </li>
            );
          })}
        </ol>
      )}
    </div>
  );
}
