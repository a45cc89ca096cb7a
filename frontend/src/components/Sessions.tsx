import type { Session } from "../api/types";
import { age, bytes, seconds, stateOf, usd } from "../lib/format";

const base = (p: string) => p.split("/").filter(Boolean).pop() || p;

// Sessions is the list of sessions with their actions.
export function Sessions({
  sessions,
  onOpen,
  onPause,
  onResume,
  onWake,
  onHibernate = () => {},
  onSnapshot,
  onDelete,
  onNew,
}: {
  sessions: Session[];
  onOpen: (id: string) => void;
  onPause: (id: string) => void;
  onResume: (id: string) => void;
  onWake: (id: string) => void;
  // onHibernate frees the session's memory (its workspace kept on disk).
  onHibernate?: (s: Session) => void;
  onSnapshot: (id: string) => void;
  onDelete: (s: Session) => void;
  onNew: () => void;
}) {
  if (!sessions.length)
    return (
      <div className="empty">
        <h3>No sessions yet</h3>
        <p>A session runs an agent or a command on a copy-on-write view of a project. Nothing reaches the project until you accept it.</p>
        <button className="primary" onClick={onNew}>
          New session
        </button>
      </div>
    );
  return (
    <table className="grid sessions">
      <thead>
        <tr>
          <th>project</th>
          <th>agent</th>
          <th>state</th>
          <th>changes</th>
          <th>CPU</th>
          <th>cost</th>
          <th>age</th>
          <th />
        </tr>
      </thead>
      <tbody>
        {sessions.map((s) => {
          const st = stateOf(s);
          return (
            <tr key={s.id} onDoubleClick={() => onOpen(s.id)} data-session={s.id}>
              <td>
                <a
                  href={`#/s/${s.id}`}
                  onClick={(e) => {
                    e.preventDefault();
                    onOpen(s.id);
                  }}
                  title={s.project}
                >
                  {base(s.project)}
                </a>{" "}
                <span className="muted small">
                  {s.id.slice(0, 8)} · {s.image}
                </span>
              </td>
              <td>{s.agent || <span className="muted">—</span>}</td>
              <td>
                <span className={"pill " + st} title={s.error || s.hibernation?.reason || ""}>
                  {st}
                </span>
                {s.hibernation && (
                  <div className="muted small">
                    {bytes(s.hibernation.disk_bytes)} on disk · processes {s.hibernation.processes ? "kept" : "not kept"}
                  </div>
                )}
              </td>
              <td>{s.changed < 0 ? "?" : s.changed}</td>
              <td>{seconds(s.cpu_seconds)}</td>
              <td>{usd(s.cost_usd)}</td>
              <td>{age(s.created)}</td>
              <td className="actions">
                <button onClick={() => onOpen(s.id)}>Open</button>
                {s.state === "hibernated" ? (
                  <button onClick={() => onWake(s.id)}>Wake</button>
                ) : s.state === "paused" ? (
                  <button onClick={() => onResume(s.id)}>Resume</button>
                ) : (
                  <button disabled={s.state !== "running"} onClick={() => onPause(s.id)}>
                    Pause
                  </button>
                )}
                {s.state !== "hibernated" && (
                  <button
                    disabled={s.state !== "running" && s.state !== "paused"}
                    onClick={() => onHibernate(s)}
                    title="Keep the session on disk and free its memory; running processes are not kept"
                  >
                    Hibernate
                  </button>
                )}
                <button disabled={s.state === "failed" || s.state === "hibernated"} onClick={() => onSnapshot(s.id)}>
                  Snapshot
                </button>
                <button className="danger" onClick={() => onDelete(s)}>
                  Delete
                </button>
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
