import { useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { Session } from "../api/types";
import { age, bytes, seconds, stateOf, usd } from "../lib/format";
import { Agent } from "./Agent";
import { Network } from "./Network";
import { Ports } from "./Ports";
import { Review } from "./Review";
import { Snapshots } from "./Snapshots";
import { Terminal } from "./Terminal";
import { Usage } from "./Usage";

export const TABS = ["review", "agent", "terminal", "network", "ports", "snapshots", "usage"] as const;
export type Tab = (typeof TABS)[number];

// SessionView is one session: its review, agent, terminal, network log,
// forwarded ports, snapshots and usage.
export function SessionView({
  client,
  session,
  tab,
  theme,
  onTab,
  path,
  onPath,
  onOpen,
  onChanged,
  onError,
  pendingPrompt,
  onPromptTaken,
}: {
  client: Client;
  session: Session;
  tab: Tab;
  theme: "dark" | "light";
  onTab: (t: Tab) => void;
  path?: string;
  onPath: (p: string) => void;
  onOpen: (id: string) => void;
  onChanged: () => void;
  onError: (e: unknown) => void;
  pendingPrompt?: { agent: string; model?: string; cmd?: string; events?: string; prompt: string };
  onPromptTaken: () => void;
}) {
  const [reviewKey, setReviewKey] = useState(0);
  useEffect(() => {
    if (pendingPrompt && tab !== "agent") onTab("agent");
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [pendingPrompt]);
  const [busy, setBusy] = useState(false);
  const lifecycle = async (f: () => Promise<unknown>) => {
    setBusy(true);
    try {
      await f();
    } catch (e) {
      onError(e);
    } finally {
      setBusy(false);
      onChanged();
    }
  };
  const st = stateOf(session);
  return (
    <div className="session">
      <header className="session-header">
        <div>
          <h2 title={session.project}>{session.project}</h2>
          <div className="muted small">
            {session.id.slice(0, 12)} · {session.image} · <span className={"pill " + st}>{st}</span> · CPU {seconds(session.cpu_seconds)} ·{" "}
            {usd(session.cost_usd)}
            {session.error ? ` · ${session.error}` : ""}
          </div>
          {session.hibernation && (
            <div className="muted small">
              hibernated {age(session.hibernation.time)}
              {session.hibernation.reason ? ` (${session.hibernation.reason})` : ""} · {bytes(session.hibernation.disk_bytes)} on disk ·
              processes {session.hibernation.processes ? "kept" : "not kept"}
            </div>
          )}
        </div>
        <span className="spacer" />
        {session.state === "hibernated" ? (
          <button className="primary" disabled={busy} onClick={() => lifecycle(() => client.wake(session.id))}>
            Wake
          </button>
        ) : (
          <button
            disabled={busy || (session.state !== "running" && session.state !== "paused")}
            title="Keep the session on disk and free its memory; running processes are not kept"
            onClick={() =>
              confirm("Hibernate this session? Its workspace is kept on disk and its memory freed; processes running in it are stopped.") &&
              lifecycle(() => client.hibernate(session.id))
            }
          >
            Hibernate
          </button>
        )}
      </header>
      <nav className="tabs" role="tablist">
        {TABS.map((t) => (
          <button key={t} role="tab" aria-selected={t === tab} className={t === tab ? "active" : ""} onClick={() => onTab(t)}>
            {t[0].toUpperCase() + t.slice(1)}
            {t === "review" && session.changed > 0 ? <span className="count">{session.changed}</span> : null}
          </button>
        ))}
      </nav>
      <div className="tab-body">
        {tab === "review" && (
          <Review
            key={reviewKey}
            client={client}
            session={session.id}
            theme={theme}
            path={path}
            onPath={onPath}
            onNetwork={() => onTab("network")}
            onError={onError}
            onChanged={onChanged}
          />
        )}
        {tab === "agent" && (
          <Agent
            client={client}
            session={session.id}
            theme={theme}
            onOpen={onOpen}
            defaultAgent={session.agent}
            initial={pendingPrompt}
            onInitialTaken={onPromptTaken}
            onError={onError}
            onTurnDone={() => {
              setReviewKey((k) => k + 1);
              onChanged();
            }}
          />
        )}
        {tab === "terminal" && <Terminal client={client} session={session.id} theme={theme} />}
        {tab === "network" && <Network client={client} session={session} onError={onError} />}
        {tab === "ports" && <Ports client={client} session={session.id} onError={onError} />}
        {tab === "snapshots" && <Snapshots client={client} session={session.id} onOpen={onOpen} onError={onError} />}
        {tab === "usage" && <Usage client={client} session={session.id} cpus={session.limits.cpus} onError={onError} />}
      </div>
    </div>
  );
}
