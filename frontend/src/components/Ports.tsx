import { useCallback, useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { ListeningPort, Port } from "../api/types";
import { useBusy } from "../lib/busy";

// How often the ports the session listens on are read again while the
// tab is open (a dev server started meanwhile shows up; reading them
// never wakes the session).
const detectEvery = 5000;

// Ports are a session's ports forwarded to the host (`airlock port`):
// forward one to a free loopback port, open it, stop it; and the ports
// the session listens on that are not forwarded, each with Publish.
export function Ports({ client, session, onError }: { client: Client; session: string; onError: (e: unknown) => void }) {
  const [list, setList] = useState<Port[]>([]);
  const [listening, setListening] = useState<ListeningPort[]>([]);
  const [port, setPort] = useState("");
  // A session that does not run (stopped) listens on nothing: a failure
  // to read its ports only empties the list.
  const detect = useCallback(async () => {
    try {
      setListening((await client.listeningPorts(session)) ?? []);
    } catch {
      setListening([]);
    }
  }, [client, session]);
  const load = useCallback(async () => {
    try {
      setList((await client.ports(session)) ?? []);
    } catch (e) {
      onError(e);
    }
    await detect();
  }, [client, session, onError, detect]);
  useEffect(() => {
    void load();
  }, [load]);
  useEffect(() => {
    const t = setInterval(() => void detect(), detectEvery);
    return () => clearInterval(t);
  }, [detect]);
  const { busy, run } = useBusy(load, onError);
  const n = Number(port);
  const valid = Number.isInteger(n) && n >= 1 && n <= 65535;
  return (
    <div className="ports">
      <div className="row">
        <input value={port} onChange={(e) => setPort(e.target.value.trim())} placeholder="session port, e.g. 5173" aria-label="port" />
        <button className="primary" disabled={!!busy || !valid} onClick={() => run("open", () => client.openPort(session, n))}>
          {busy === "open" ? "Forwarding…" : "Forward"}
        </button>
        <span className="muted small">To a free port of 127.0.0.1 on this machine; a request wakes a paused session.</span>
      </div>
      {list.length === 0 ? (
        <div className="empty small">No ports of this session are forwarded.</div>
      ) : (
        <table className="grid">
          <thead>
            <tr>
              <th>Port</th>
              <th>URL</th>
              <th>Auth</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {list.map((p) => (
              <tr key={p.port}>
                <td>{p.port}</td>
                <td>
                  <code>{p.url}</code>
                </td>
                <td>{p.auth === "basic" ? `basic: ${p.user} / ${p.token}` : p.auth || "none"}</td>
                <td className="actions">
                  {/* bearer: ?token= sets the cookie; basic: the browser asks for the user and password */}
                  <a href={p.auth === "bearer" && p.token ? `${p.url}?token=${p.token}` : p.url} target="_blank" rel="noopener noreferrer">
                    Open
                  </a>
                  <button className="danger" disabled={!!busy} onClick={() => run("rm", () => client.closePort(session, p.port))}>
                    Stop
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h4>Listening in the session</h4>
      {listening.length === 0 ? (
        <div className="empty small">The session listens on no other TCP port.</div>
      ) : (
        <table className="grid" aria-label="listening ports">
          <thead>
            <tr>
              <th>Port</th>
              <th>Bound to</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {listening.map((l) => (
              <tr key={l.port}>
                <td>{l.port}</td>
                <td>
                  <code>{l.addresses.join(", ")}</code>
                </td>
                <td className="actions">
                  <button disabled={!!busy} onClick={() => run(`publish ${l.port}`, () => client.openPort(session, l.port))}>
                    {busy === `publish ${l.port}` ? "Publishing…" : "Publish"}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
