import { useCallback, useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { EgressEntry, Session } from "../api/types";
import { bytes } from "../lib/format";

// Network is the session's connection log with "allow this host" on what
// was blocked, and its policy.
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
  const shown = blockedOnly ? log.filter((e) => !e.allowed) : log;
  const pol = session.egress;
  return (
    <div className="network">
      <div className="policy">
        <b>Policy:</b> {pol ? pol.mode : "no network of its own"}
        {pol?.allow?.length ? <span> · allow {pol.allow.join(", ")}</span> : null}
        {pol?.deny?.length ? <span> · deny {pol.deny.join(", ")}</span> : null}
        {pol?.private ? <span> · private ranges allowed</span> : null}
        <span className="spacer" />
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
                <td title={e.addr}>{e.host}</td>
                <td>{e.port || ""}</td>
                <td>{bytes(e.bytes_out)}</td>
                <td>{bytes(e.bytes_in)}</td>
                <td title={e.reason}>
                  {e.allowed ? "allowed" : "BLOCKED"} {e.rule ? <span className="muted">({e.rule})</span> : null}
                </td>
                <td>{!e.allowed && <button onClick={() => allow(e)}>Allow this host</button>}</td>
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
            {e.host}
            {e.port ? `:${e.port}` : ""}
          </span>
          <button onClick={() => allow(e)}>Allow</button>
        </div>
      ))}
    </div>
  );
}
