import { useCallback, useEffect, useRef, useState } from "react";
import type { Client } from "../api/client";
import type { Answer, EgressEntry, PendingQuestion, Session } from "../api/types";
import { bytes } from "../lib/format";

// destination is what a log entry or a question is about, as the rules
// write it: "GET api.example.com/repos/x" for a request the proxy read,
// "api.example.com" otherwise (the port beside it).
export function destination(e: { host: string; method?: string; path?: string }): string {
  return e.method ? `${e.method} ${e.host}${e.path ?? ""}` : e.host;
}

// notify shows a desktop notification for a new question, where the
// browser allows them; elsewhere the prompt in the page is all. The
// desktop app notifies by itself (app/notify.go), window open or not.
function notify(q: PendingQuestion) {
  if (typeof Notification === "undefined") return;
  const show = () => {
    try {
      new Notification("Airlock: a session waits for your answer", {
        body: `${destination(q)}:${q.port} (session ${q.session.slice(0, 12)})`,
        tag: `airlock-ask-${q.id}`,
      });
    } catch {
      /* a webview without notifications */
    }
  };
  if (Notification.permission === "granted") show();
  else if (Notification.permission === "default") void Notification.requestPermission().then((p) => p === "granted" && show());
}

// AskPrompt shows what sessions under --net ask are waiting on (one
// session's, or every session's without one), each with Allow once, Allow
// always and Deny. The connection waits until it is answered or the
// session's ask timeout denies it.
export function AskPrompt({
  client,
  session,
  onError,
  interval = 1500,
}: {
  client: Client;
  session?: string;
  onError: (e: unknown) => void;
  interval?: number;
}) {
  const [questions, setQuestions] = useState<PendingQuestion[]>([]);
  const [busy, setBusy] = useState<number | null>(null);
  const seen = useRef(new Set<number>());
  const load = useCallback(async () => {
    try {
      const all = (await client.pending()) ?? [];
      const mine = session ? all.filter((q) => q.session === session) : all;
      for (const q of mine) {
        if (!seen.current.has(q.id)) {
          seen.current.add(q.id);
          if (client.t.kind === "browser") notify(q);
        }
      }
      setQuestions(mine);
    } catch {
      /* an engine from before the ask mode, or a passing failure: no prompt */
    }
  }, [client, session]);
  useEffect(() => {
    void load();
    const t = setInterval(() => void load(), interval);
    return () => clearInterval(t);
  }, [load, interval]);
  const answer = async (q: PendingQuestion, a: Answer) => {
    setBusy(q.id);
    try {
      await client.decide(q.id, a);
    } catch (e) {
      onError(e); // answered elsewhere, or timed out: the list says so next
    } finally {
      setBusy(null);
      setQuestions((qs) => qs.filter((x) => x.id !== q.id));
      void load();
    }
  };
  if (questions.length === 0) return null;
  return (
    <div className="ask" role="alert">
      {questions.map((q) => (
        <div key={q.id} className="ask-question">
          <span className="what">
            {session ? "" : <span className="muted">{q.session.slice(0, 12)} </span>}
            wants <code>{destination(q)}</code>
            <span className="muted">
              {" "}
              port {q.port} · {q.kind}
            </span>
          </span>
          <span className="spacer" />
          <button disabled={busy === q.id} onClick={() => answer(q, "allow-once")}>
            Allow once
          </button>
          <button disabled={busy === q.id} onClick={() => answer(q, "allow-always")}>
            Allow always
          </button>
          <button disabled={busy === q.id} className="danger" onClick={() => answer(q, "deny")}>
            Deny
          </button>
        </div>
      ))}
    </div>
  );
}

// Network is the session's connection log with "allow this host" on what
// was blocked, the questions of the ask mode, and its policy with "save
// for the project".
export function Network({ client, session, onError }: { client: Client; session: Session; onError: (e: unknown) => void }) {
  const [log, setLog] = useState<EgressEntry[]>([]);
  const [blockedOnly, setBlockedOnly] = useState(false);
  const load = useCallback(async () => {
    try {
      setLog((await client.netLog(session.id)) ?? []);
    } catch (e) {
      onError(e);
    }
  }, [client, session.id, onError]);
  useEffect(() => {
    void load();
    const t = setInterval(() => void load(), 3000);
    return () => clearInterval(t);
  }, [load]);
  const allow = async (e: EgressEntry) => {
    try {
      await client.allowFromLog(session.id, e.id);
      await load();
    } catch (err) {
      onError(err);
    }
  };
  const [saved, setSaved] = useState("");
  const save = async () => {
    try {
      setSaved((await client.savePolicy(session.id)).file);
    } catch (err) {
      onError(err);
    }
  };
  const shown = blockedOnly ? log.filter((e) => !e.allowed) : log;
  const pol = session.egress;
  return (
    <div className="network">
      <AskPrompt client={client} session={session.id} onError={onError} />
      <div className="policy">
        <b>Policy:</b> {pol ? pol.mode : "no network of its own"}
        {pol?.allow?.length ? <span> · allow {pol.allow.join(", ")}</span> : null}
        {pol?.deny?.length ? <span> · deny {pol.deny.join(", ")}</span> : null}
        {pol?.inspect?.length ? <span> · inspect {pol.inspect.join(", ")}</span> : null}
        {pol?.private ? <span> · private ranges allowed</span> : null}
        {pol?.mode === "ask" && pol.ask_timeout ? <span> · asks wait {Math.round(pol.ask_timeout / 1e9)} s</span> : null}
        <span className="spacer" />
        {pol && (
          <button title="write this policy into the project's .airlock/policy.yaml, which its new sessions start from" onClick={save}>
            Save for the project
          </button>
        )}
        {saved && <span className="muted small">saved in {saved}</span>}
        <label className="toggle">
          <input type="checkbox" checked={blockedOnly} onChange={() => setBlockedOnly(!blockedOnly)} /> blocked only
        </label>
      </div>
      {shown.length === 0 ? (
        <div className="empty small">{blockedOnly ? "Nothing was blocked." : "No connection yet."}</div>
      ) : (
        <table className="grid">
          <thead>
            <tr>
              <th>#</th>
              <th>time</th>
              <th>kind</th>
              <th>host</th>
              <th>port</th>
              <th>out</th>
              <th>in</th>
              <th>decision</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {shown.map((e) => (
              <tr key={e.id} className={e.allowed ? "" : "blocked"}>
                <td>{e.id}</td>
                <td>{new Date(e.time).toLocaleTimeString()}</td>
                <td>{e.kind}</td>
                <td title={e.addr}>{destination(e)}</td>
                <td>{e.port || ""}</td>
                <td>{bytes(e.bytes_out)}</td>
                <td>{bytes(e.bytes_in)}</td>
                <td title={e.reason}>
                  {e.allowed ? "allowed" : "BLOCKED"} {e.rule ? <span className="muted">({e.rule})</span> : null}
                </td>
                <td>{!e.allowed && <button onClick={() => allow(e)}>{e.method ? "Allow this request" : "Allow this host"}</button>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

// NetSummary sits beside the diff: what the session reached, and what was
// blocked with "allow" at hand.
export function NetSummary({
  client,
  session,
  onOpen,
  onError,
}: {
  client: Client;
  session: string;
  onOpen: () => void;
  onError: (e: unknown) => void;
}) {
  const [log, setLog] = useState<EgressEntry[]>([]);
  const load = useCallback(async () => {
    try {
      const l = await client.netLog(session);
      setLog(Array.isArray(l) ? l : []);
    } catch {
      /* the Network tab says why */
    }
  }, [client, session]);
  useEffect(() => {
    void load();
    const t = setInterval(() => void load(), 5000);
    return () => clearInterval(t);
  }, [load]);
  const blocked = log.filter((e) => !e.allowed);
  const hosts = new Set(log.filter((e) => e.allowed).map((e) => e.host));
  const allow = async (e: EgressEntry) => {
    try {
      await client.allowFromLog(session, e.id);
      await load();
    } catch (err) {
      onError(err);
    }
  };
  return (
    <div className="netsummary">
      <div className="row">
        <b>Network</b>
        <span className="muted small">
          {log.length} connection{log.length === 1 ? "" : "s"} · {hosts.size} host{hosts.size === 1 ? "" : "s"} · {blocked.length} blocked
        </span>
        <span className="spacer" />
        <a
          href="#"
          onClick={(e) => {
            e.preventDefault();
            onOpen();
          }}
          className="small"
        >
          log
        </a>
      </div>
      {blocked.slice(-4).map((e) => (
        <div key={e.id} className="blocked-host" title={e.reason}>
          <span className="host">
            {destination(e)}
            {e.port && !e.method ? `:${e.port}` : ""}
          </span>
          <button onClick={() => allow(e)}>Allow</button>
        </div>
      ))}
    </div>
  );
}
