import { useCallback, useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { Port } from "../api/types";
import { useBusy } from "../lib/busy";

// Ports are a session's ports forwarded to the host (`airlock port`):
// forward one to a free loopback port, open it, stop it.
export function Ports({ client, session, onError }: { client: Client; session: string; onError: (e: unknown) => void }) {
  const [list, setList] = useState<Port[]>([]);
  const [port, setPort] = useState("");
  const load = useCallback(async () => {
    try {
      setList((await client.ports(session)) ?? []);
    } catch (e) {
      onError(e);
    }
  }, [client, session, onError]);
  useEffect(() => {
    void load();
  }, [load]);
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
                <td>{p.auth || "none"}</td>
                <td className="actions">
                  <a href={p.token ? `${p.url}?token=${p.token}` : p.url} target="_blank" rel="noopener noreferrer">
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
    </div>
  );
}
