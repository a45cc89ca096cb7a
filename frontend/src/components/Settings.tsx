import { useCallback, useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { Progress, Secret, Settings as S } from "../api/types";
import { age, bytes, nanos, parseDuration, parseSize } from "../lib/format";

// Settings: defaults for new sessions, secrets, images.
export function Settings({ client, onError }: { client: Client; onError: (e: unknown) => void }) {
  const [s, setS] = useState<S | null>(null);
  const [image, setImage] = useState("");
  const [idle, setIdle] = useState("");
  const [rate, setRate] = useState("");
  const [ca, setCa] = useState("");
  const [ws, setWs] = useState("");
  const [saved, setSaved] = useState("");
  const [secrets, setSecrets] = useState<Secret[]>([]);
  const [sName, setSName] = useState("");
  const [sValue, setSValue] = useState("");
  const [build, setBuild] = useState<Progress | null>(null);
  const [imgs, setImgs] = useState<{ name: string; size: number; created: string }[]>([]);

  const load = useCallback(async () => {
    try {
      const [st, sec, im] = await Promise.all([client.settings(), client.secrets(), client.images()]);
      setS(st);
      // The engine leaves out a setting that is zero (omitempty).
      const idle = st.idle_timeout ?? 0;
      setImage(st.image ?? "");
      setIdle(idle < 0 ? "off" : nanos(idle).replace(/\s/g, ""));
      setRate(String(st.cost_per_core_hour ?? 0));
      setCa(st.ca_bundle || "");
      setWs(bytes(st.limits.workspace_size).replace(/\s|B/g, "").toLowerCase());
      setSecrets(sec ?? []);
      setImgs(im ?? []);
    } catch (e) {
      onError(e);
    }
  }, [client, onError]);
  useEffect(() => {
    void load();
  }, [load]);

  const save = async () => {
    const change: Partial<S> = { image, ca_bundle: ca || undefined };
    const d = idle === "off" ? -1 : parseDuration(idle.replace(/(\d)m\s*(\d+)s/, "$1m$2s"));
    if (!(d > 0 || d === -1)) return onError(new Error("Idle timeout: give a duration like 30m, or off."));
    change.idle_timeout = d;
    const r = Number(rate);
    if (!(r >= 0)) return onError(new Error("Rate: give dollars per core-hour, e.g. 0.10."));
    change.cost_per_core_hour = r;
    if (ws) {
      const n = parseSize(ws);
      if (!(n > 0)) return onError(new Error("Workspace size: give a size like 2g."));
      change.limits = { ...s!.limits, workspace_size: n };
    }
    try {
      await client.setSettings(change);
      setSaved("Saved: new sessions use these.");
      await load();
    } catch (e) {
      onError(e);
    }
  };

  const addSecret = async () => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(sName))
      return onError(new Error("A secret's name is letters, digits and underscores, e.g. ANTHROPIC_API_KEY."));
    try {
      await client.setSecret(sName, sValue);
      setSName("");
      setSValue("");
      await load();
    } catch (e) {
      onError(e);
    }
  };

  const buildImage = async (kind: string) => {
    setBuild({ stage: "starting", elapsed: 0 });
    try {
      await client.buildImage(kind, (p) => {
        setBuild(p);
        if (p.error) onError(new Error(p.error.message));
      });
      await load();
    } catch (e) {
      onError(e);
    } finally {
      setTimeout(() => setBuild(null), 3000);
    }
  };

  if (!s) return <div className="empty small">Reading the settings…</div>;
  return (
    <div className="form settings">
      <h2>Settings</h2>
      <section>
        <h3>New sessions</h3>
        <div className="cols">
          <label>
            Default image
            <input value={image} onChange={(e) => setImage(e.target.value)} aria-label="default image" />
          </label>
          <label>
            Idle timeout
            <input value={idle} onChange={(e) => setIdle(e.target.value)} aria-label="default idle timeout" />
          </label>
          <label>
            Workspace size
            <input value={ws} onChange={(e) => setWs(e.target.value)} aria-label="default workspace size" />
          </label>
        </div>
        <div className="cols">
          <label>
            Cost per core-hour ($)
            <input value={rate} onChange={(e) => setRate(e.target.value)} aria-label="rate" />
          </label>
          <label>
            Extra CA bundle (a PEM file on the engine's machine)
            <input value={ca} onChange={(e) => setCa(e.target.value)} placeholder="/etc/ssl/corp-ca.pem" aria-label="ca bundle" />
          </label>
        </div>
        <div className="row">
          <button className="primary" onClick={save}>
            Save
          </button>
          {saved && <span className="muted small">{saved}</span>}
        </div>
      </section>
      <section>
        <h3>Secrets</h3>
        <p className="muted small">
          Kept by the engine, encrypted; sessions never see them — the network proxy adds them to requests for the hosts they belong to.
        </p>
        <ul className="plain">
          {secrets.map((x) => (
            <li key={x.name}>
              <code>{x.name}</code> <span className="muted small">set {age(x.updated)}</span>{" "}
              <button
                className="danger"
                onClick={async () => {
                  try {
                    await client.removeSecret(x.name);
                    await load();
                  } catch (e) {
                    onError(e);
                  }
                }}
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
        <div className="row">
          <input value={sName} onChange={(e) => setSName(e.target.value)} placeholder="ANTHROPIC_API_KEY" aria-label="secret name" />
          <input type="password" value={sValue} onChange={(e) => setSValue(e.target.value)} placeholder="value" aria-label="secret value" />
          <button onClick={addSecret} disabled={!sName || !sValue}>
            Set
          </button>
        </div>
      </section>
      <section>
        <h3>Images</h3>
        <ul className="plain">
          {imgs
            .filter((i) => !i.name.includes("-layer:"))
            .map((i) => (
              <li key={i.name}>
                <code>{i.name}</code>{" "}
                <span className="muted small">
                  {bytes(i.size)} · built {age(i.created)}
                </span>
              </li>
            ))}
        </ul>
        <div className="row">
          <button disabled={!!build} onClick={() => buildImage("")}>
            Build airlock/base
          </button>
          {build && (
            <span className="progress">
              <span className="spinner" /> {build.stage} {build.message || ""}
              {build.total ? <progress value={build.current} max={build.total} /> : null}
              {build.done ? " done" : ""}
            </span>
          )}
        </div>
      </section>
    </div>
  );
}
