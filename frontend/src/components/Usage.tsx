import { useCallback, useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { CPUSample, LifecycleEvent, Meter } from "../api/types";
import { bytes, seconds, usd } from "../lib/format";

// cores turns cumulative CPU seconds into cores used between samples.
export function cores(h: CPUSample[]): { t: number; v: number }[] {
  const out: { t: number; v: number }[] = [];
  for (let i = 1; i < h.length; i++) {
    const dt = (new Date(h[i].time).getTime() - new Date(h[i - 1].time).getTime()) / 1000;
    if (dt > 0) out.push({ t: new Date(h[i].time).getTime(), v: Math.max(0, (h[i].cpu_seconds - h[i - 1].cpu_seconds) / dt) });
  }
  return out;
}

function Chart({ points, max }: { points: { t: number; v: number }[]; max: number }) {
  const w = 640,
    h = 160,
    pad = 28;
  if (points.length < 2) return <div className="empty small">The CPU chart fills in as the engine samples the session (every 10 s).</div>;
  const t0 = points[0].t,
    t1 = points[points.length - 1].t;
  const top = Math.max(max, ...points.map((p) => p.v), 0.1);
  const x = (t: number) => pad + ((t - t0) / Math.max(1, t1 - t0)) * (w - pad - 8);
  const y = (v: number) => h - pad + 4 - (v / top) * (h - pad - 8);
  const d = points.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
  return (
    <svg className="chart" viewBox={`0 0 ${w} ${h}`} role="img" aria-label="CPU over time">
      <line x1={pad} y1={y(0)} x2={w - 8} y2={y(0)} className="axis" />
      <line x1={pad} y1={y(top)} x2={w - 8} y2={y(top)} className="grid" />
      <text x={2} y={y(top) + 4} className="label">
        {top.toFixed(1)}
      </text>
      <text x={2} y={y(0) + 4} className="label">
        0
      </text>
      <text x={pad} y={h - 4} className="label">
        {new Date(t0).toLocaleTimeString()}
      </text>
      <text x={w - 8} y={h - 4} className="label" textAnchor="end">
        {new Date(t1).toLocaleTimeString()}
      </text>
      <path d={`${d} L${x(t1)},${y(0)} L${x(t0)},${y(0)} Z`} className="area" />
      <path d={d} className="line" />
    </svg>
  );
}

// Usage is what the session used: CPU over time, cost, memory, bytes,
// budgets, and its pauses.
export function Usage({
  client,
  session,
  cpus,
  onError,
}: {
  client: Client;
  session: string;
  cpus: number;
  onError: (e: unknown) => void;
}) {
  const [m, setM] = useState<Meter | null>(null);
  const [life, setLife] = useState<LifecycleEvent[]>([]);
  // The samples this view took itself, between the engine's.
  const [live, setLive] = useState<{ session: string; samples: CPUSample[] }>({ session, samples: [] });
  const load = useCallback(async () => {
    try {
      const mm = await client.meter(session);
      const sample = { time: new Date().toISOString(), cpu_seconds: mm.cpu_seconds };
      setLive((l) => ({ session, samples: [...(l.session === session ? l.samples : []), sample].slice(-360) }));
      setM(mm);
      setLife((await client.lifecycle(session)) ?? []);
    } catch (e) {
      onError(e);
    }
  }, [client, session, onError]);
  useEffect(() => {
    void load();
    const t = setInterval(() => void load(), 3000);
    return () => clearInterval(t);
  }, [load]);
  if (!m) return <div className="empty small">Metering…</div>;
  const samples = [...(m.history ?? []), ...(live.session === session ? live.samples : [])].sort((a, b) => a.time.localeCompare(b.time));
  return (
    <div className="usage">
      <div className="cards">
        <div className="card">
          <div className="k">active CPU</div>
          <div className="v">{seconds(m.cpu_seconds)}</div>
        </div>
        <div className="card">
          <div className="k">cost</div>
          <div className="v">{usd(m.cost_usd)}</div>
          <div className="muted small">{usd(m.rate_per_core_hour)} per core-hour</div>
        </div>
        <div className="card">
          <div className="k">memory peak</div>
          <div className="v">{bytes(m.memory_peak)}</div>
        </div>
        <div className="card">
          <div className="k">workspace</div>
          <div className="v">{bytes(m.workspace_bytes)}</div>
        </div>
        <div className="card">
          <div className="k">egress</div>
          <div className="v">
            {bytes(m.egress_out)} ↑ {bytes(m.egress_in)} ↓
          </div>
        </div>
        {(m.cpu_budget_seconds || m.cost_budget) && (
          <div className="card">
            <div className="k">budget</div>
            <div className="v">
              {m.cpu_budget_seconds ? seconds(m.cpu_budget_seconds) + " CPU " : ""}
              {m.cost_budget ? usd(m.cost_budget) : ""}
            </div>
          </div>
        )}
      </div>
      <h4>CPU (cores in use)</h4>
      <Chart points={cores(samples)} max={cpus} />
      <h4>Pauses</h4>
      {life.length === 0 ? (
        <div className="muted small">Never paused.</div>
      ) : (
        <ul className="plain">
          {life.map((l, i) => (
            <li key={i}>
              {new Date(l.time).toLocaleString()} — {l.kind} ({l.reason})
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
