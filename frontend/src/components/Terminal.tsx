import { useEffect, useRef, useState } from "react";
import { Terminal as XTerm } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import type { Client } from "../api/client";

// Terminal is a shell in the session on a real PTY (xterm.js): resize and
// Ctrl-C reach it.
export function Terminal({ client, session, theme }: { client: Client; session: string; theme: "dark" | "light" }) {
  const ref = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState("connecting…");
  const [gen, setGen] = useState(0);
  useEffect(() => {
    if (!ref.current) return;
    const term = new XTerm({
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
      fontSize: 13,
      cursorBlink: true,
      theme:
        theme === "dark"
          ? { background: "#0f1115", foreground: "#d7dae0" }
          : { background: "#ffffff", foreground: "#1f2328", cursor: "#1f2328", selectionBackground: "#b6d7ff" },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(ref.current);
    try {
      fit.fit();
    } catch {
      /* not laid out yet */
    }
    const conn = client.terminal(session, term.cols || 80, term.rows || 24, {
      onData: (d) => {
        setStatus("");
        term.write(d);
      },
      onExit: (code, err) => setStatus(err ? err : `the shell ended${code !== null ? ` (exit ${code})` : ""}`),
    });
    const d1 = term.onData((d) => conn.write(d));
    const d2 = term.onResize(({ cols, rows }) => conn.resize(cols, rows));
    const ro = new ResizeObserver(() => {
      try {
        fit.fit();
      } catch {
        /* hidden */
      }
    });
    ro.observe(ref.current);
    term.focus();
    return () => {
      ro.disconnect();
      d1.dispose();
      d2.dispose();
      conn.close();
      term.dispose();
    };
  }, [client, session, theme, gen]);
  return (
    <div className="terminal-wrap">
      {status && (
        <div className="term-status">
          {status}{" "}
          {status !== "connecting…" && (
            <button
              onClick={() => {
                setStatus("connecting…");
                setGen(gen + 1);
              }}
            >
              New shell
            </button>
          )}
        </div>
      )}
      <div ref={ref} className="terminal" />
    </div>
  );
}
