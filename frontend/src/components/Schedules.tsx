import { useCallback, useEffect, useRef, useState } from "react";
import type { Client } from "../api/client";
import type { Schedule, ScheduleRun } from "../api/types";
import { age } from "../lib/format";
import { useBusy } from "../lib/busy";

// POLL is how often the view reads the schedules again while it is open:
// runs start and end on the engine's clock, not on this interface's actions.
const POLL = 15_000;

// notify tells the person a run ended, with the page's notifications when
// they were allowed. The desktop app notifies by itself (app/notify.go),
// whatever view is open.
function notify(s: Schedule, run: ScheduleRun) {
  if (typeof Notification === "undefined" || Notification.permission !== "granted") return;
  new Notification(`Airlock: ${s.name} ${run.outcome}`, {
    body: run.session ? `session ${run.session.slice(0, 12)}: ${run.changed ?? 0} change(s) to review` : run.error || "",
  });
}

// Schedules lists the schedules (`airlock schedule add` makes them), each
// with its next time and its runs, whose sessions open for review.
export function Schedules({ client, onOpen, onError }: { client: Client; onOpen: (id: string) => void; onError: (e: unknown) => void }) {
  const [list, setList] = useState<Schedule[]>([]);
  const [open, setOpen] = useState("");
  const [runs, setRuns] = useState<ScheduleRun[]>([]);
  const pageAlerts = client.t.kind === "browser" && typeof Notification !== "undefined";
  const [alerts, setAlerts] = useState(pageAlerts && Notification.permission === "granted");
  // The last run seen of each schedule: one that ran and has ended since
  // is a run that finished while the view was open.
  const seen = useRef(new Map<string, ScheduleRun | undefined>());
  const load = useCallback(async () => {
    try {
      const all = (await client.schedules()) ?? [];
      for (const s of all) {
        const before = seen.current.get(s.name);
        if (pageAlerts && before?.outcome === "running" && s.last && s.last.id === before.id && s.last.outcome !== "running")
          notify(s, s.last);
        seen.current.set(s.name, s.last);
      }
      setList(all);
      if (open) setRuns((await client.scheduleRuns(open)) ?? []);
    } catch (e) {
      onError(e);
    }
  }, [client, open, onError, pageAlerts]);
  useEffect(() => {
    void load();
    const t = setInterval(() => void load(), POLL);
    return () => clearInterval(t);
  }, [load]);
  const { busy, run } = useBusy(load, onError);

  if (list.length === 0)
    return (
      <div className="empty">
        No schedules yet. Add one with{" "}
        <code>airlock schedule add NAME --cron "0 6 * * 1-5" --project DIR --agent claude --prompt-file task.md</code>.
      </div>
    );
  return (
    <div className="schedules">
      {pageAlerts && !alerts && (
        <div className="row">
          <button onClick={() => void Notification.requestPermission().then((p) => setAlerts(p === "granted"))}>
            Notify me when runs end
          </button>
        </div>
      )}
      <table className="grid">
        <thead>
          <tr>
            <th>schedule</th>
            <th>when</th>
            <th>next</th>
            <th>last run</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.map((s) => (
            <tr key={s.name} data-schedule={s.name}>
              <td>
                <a
                  href="#/schedules"
                  onClick={(e) => {
                    e.preventDefault();
                    setOpen(open === s.name ? "" : s.name);
                  }}
                >
                  {s.name}
                </a>{" "}
                <span className="muted small" title={s.project}>
                  {s.project.split("/").filter(Boolean).pop()} ·{" "}
                  {s.command?.length ? s.command.join(" ") : `${s.agent}: ${s.prompt?.split("\n")[0] ?? ""}`}
                </span>
              </td>
              <td>
                <code>{s.cron}</code>
              </td>
              <td>{s.next ? new Date(s.next).toLocaleString() : "never"}</td>
              <td>
                {s.last ? (
                  <>
                    <span className={"pill " + s.last.outcome} title={s.last.error || ""}>
                      {s.last.outcome}
                    </span>{" "}
                    <span className="muted small">{age(s.last.started)}</span>
                  </>
                ) : (
                  <span className="muted">—</span>
                )}
              </td>
              <td className="actions">
                <button disabled={!!busy} onClick={() => run("run:" + s.name, () => client.runSchedule(s.name))}>
                  {busy === "run:" + s.name ? "Starting…" : "Run now"}
                </button>
                <button
                  className="danger"
                  disabled={!!busy}
                  onClick={() => confirm(`Remove schedule ${s.name}? Its sessions stay.`) && run("rm", () => client.removeSchedule(s.name))}
                >
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {open && (
        <section className="runs" aria-label={`runs of ${open}`}>
          <h3>Runs of {open}</h3>
          {runs.length === 0 ? (
            <div className="empty small">No runs yet.</div>
          ) : (
            <ol className="timeline">
              {[...runs].reverse().map((r) => (
                <li key={r.id}>
                  <div className="when">{age(r.started)}</div>
                  <div className="what">
                    <span className={"pill " + r.outcome}>{r.outcome}</span> <span className="muted small">{r.trigger}</span>{" "}
                    {r.session && (
                      <a
                        href={`#/s/${r.session}`}
                        onClick={(e) => {
                          e.preventDefault();
                          onOpen(r.session!);
                        }}
                      >
                        session {r.session.slice(0, 12)}
                      </a>
                    )}{" "}
                    {r.ended && r.session && <span className="muted small">{r.changed ?? 0} change(s)</span>}
                    {r.error && <div className="muted small">{r.error}</div>}
                  </div>
                </li>
              ))}
            </ol>
          )}
        </section>
      )}
    </div>
  );
}
