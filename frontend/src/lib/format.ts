// Formatting for people: sizes, durations, ages, money.

export function bytes(n: number): string {
  if (!isFinite(n) || n < 0) return "-";
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

export function seconds(s: number): string {
  if (!isFinite(s) || s < 0) return "-";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${Math.round(s % 60)}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${m % 60}m`;
}

export const nanos = (ns: number) => seconds(ns / 1e9);

export function age(iso: string, now = Date.now()): string {
  const d = (now - new Date(iso).getTime()) / 1000;
  if (d < 60) return "just now";
  if (d < 3600) return `${Math.floor(d / 60)}m ago`;
  if (d < 86400) return `${Math.floor(d / 3600)}h ago`;
  return `${Math.floor(d / 86400)}d ago`;
}

export function usd(v: number): string {
  if (!v || v < 0.0001) return "$0.00";
  return v < 0.01 ? `$${v.toFixed(4)}` : `$${v.toFixed(2)}`;
}

// parseSize reads "2g", "512m", "1.5G" or a byte count; NaN when not a size.
export function parseSize(s: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$/i.exec(s);
  if (!m) return NaN;
  const mult: Record<string, number> = { "": 1, k: 1 << 10, m: 1 << 20, g: 1 << 30, t: 2 ** 40 };
  return Math.round(parseFloat(m[1]) * mult[m[2].toLowerCase()]);
}

// parseDuration reads "30m", "2h", "90s", "1h30m"; NaN when not one.
export function parseDuration(s: string): number {
  const re = /(\d+(?:\.\d+)?)(h|m|s)/g;
  let total = 0;
  let used = 0;
  for (const m of s.trim().matchAll(re)) {
    total += parseFloat(m[1]) * { h: 3600, m: 60, s: 1 }[m[2] as "h" | "m" | "s"];
    used += m[0].length;
  }
  return used > 0 && used === s.trim().length ? total * 1e9 : NaN;
}

// stateOf is the state a person reads: a running session quiet for a
// minute is idle.
export function stateOf(s: { state: string; idle_for?: number }): string {
  if (s.state === "running" && (s.idle_for ?? 0) >= 60e9) return "idle";
  return s.state;
}
