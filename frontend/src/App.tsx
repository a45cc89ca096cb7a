import { useCallback, useEffect, useRef, useState } from "react";
import hljsLight from "highlight.js/styles/github.css?inline";
import hljsDark from "highlight.js/styles/github-dark.css?inline";
import { Client } from "./api/client";
import { followSessions, type Follower } from "./api/live";
import { ApiError, detectTransport } from "./api/transport";
import type { Session } from "./api/types";
import { stateOf } from "./lib/format";
import { NewSession, type NewSessionResult } from "./components/NewSession";
import { Sessions } from "./components/Sessions";
import { AskPrompt } from "./components/Network";
import { SessionView, TABS, type Tab } from "./components/SessionView";
import { Settings } from "./components/Settings";
import { Snapshots } from "./components/Snapshots";
import { Schedules } from "./components/Schedules";

type View =
  | { kind: "home" }
  | { kind: "new" }
  | { kind: "settings" }
  | { kind: "snapshots" }
  | { kind: "schedules" }
  | { kind: "session"; id: string; tab: Tab; path?: string };

function parseHash(h: string): View {
  const m = /^#\/s\/([0-9a-f]+)(?:\/(\w+))?(?:\/(.+))?/.exec(h);
  if (m)
    return {
      kind: "session",
      id: m[1],
      tab: (TABS as readonly string[]).includes(m[2]) ? (m[2] as Tab) : "review",
      path: m[3] ? decodeURIComponent(m[3]) : undefined,
    };
  if (h === "#/new") return { kind: "new" };
  if (h === "#/settings") return { kind: "settings" };
  if (h === "#/snapshots") return { kind: "snapshots" };
  if (h === "#/schedules") return { kind: "schedules" };
  return { kind: "home" };
}

function hashOf(v: View): string {
  switch (v.kind) {
    case "session":
      return `#/s/${v.id}/${v.tab}` + (v.path && v.tab === "review" ? "/" + encodeURIComponent(v.path) : "");
    case "home":
      return "#/";
    default:
      return `#/${v.kind}`;
  }
}

// message turns any failure into the sentence a person reads.
export function message(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}

const client = new Client(detectTransport());

export function App() {
  const [view, setView] = useState<View>(() => parseHash(location.hash));
  const [sessions, setSessions] = useState<Session[]>([]);
  const [errors, setErrors] = useState<string[]>([]);
  const [theme, setTheme] = useState<"dark" | "light">(
    () =>
      (localStorage.getItem("airlock.theme") as "dark" | "light") ||
      (matchMedia?.("(prefers-color-scheme: light)").matches ? "light" : "dark"),
  );
  const [engine, setEngine] = useState<string>("");
  const [pending, setPending] = useState<NewSessionResult["agent"]>();

  const onError = useCallback((e: unknown) => setErrors((x) => [...x.slice(-2), message(e)]), []);
  const go = useCallback((v: View) => {
    setView(v);
    if (location.hash !== hashOf(v)) history.pushState(null, "", hashOf(v));
  }, []);

  // The sessions follow the engine's events (api/live.ts); refresh reads
  // the list at once, after this interface changed something.
  const [live, setLive] = useState(false);
  const follower = useRef<Follower | null>(null);
  useEffect(() => {
    const f = followSessions(client, {
      sessions: (list) => {
        setSessions(list);
        setEngine("");
      },
      status: (up, e) => {
        setLive(up);
        if (e !== undefined) setEngine(message(e));
        else if (up) setEngine("");
      },
    });
    follower.current = f;
    return () => f.stop();
  }, []);
  const refresh = useCallback(async () => {
    try {
      await follower.current?.refresh();
    } catch (e) {
      setEngine(message(e));
    }
  }, []);

  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    // Syntax colours for the diffs follow the theme.
    let style = document.getElementById("hljs-theme");
    if (!style) {
      style = document.createElement("style");
      style.id = "hljs-theme";
      document.head.appendChild(style);
    }
    style.textContent = theme === "dark" ? hljsDark : hljsLight;
    localStorage.setItem("airlock.theme", theme);
  }, [theme]);
  useEffect(() => {
    const onHash = () => setView(parseHash(location.hash));
    window.addEventListener("popstate", onHash);
    window.addEventListener("hashchange", onHash);
    return () => {
      window.removeEventListener("popstate", onHash);
      window.removeEventListener("hashchange", onHash);
    };
  }, []);

  const act = async (f: () => Promise<unknown>) => {
    try {
      await f();
    } catch (e) {
      onError(e);
    }
    void refresh();
  };

  const current = view.kind === "session" ? sessions.find((s) => s.id === view.id || s.id.startsWith(view.id)) : undefined;

  return (
    <div className="app" data-live={live}>
      <header className="topbar">
        <a
          className="logo"
          href="#/"
          onClick={(e) => {
            e.preventDefault();
            go({ kind: "home" });
          }}
        >
          <span className="mark">◧</span> Airlock
        </a>
        <nav>
          <button className={view.kind === "home" ? "active" : ""} onClick={() => go({ kind: "home" })}>
            Sessions
          </button>
          <button className={view.kind === "snapshots" ? "active" : ""} onClick={() => go({ kind: "snapshots" })}>
            Snapshots
          </button>
          <button className={view.kind === "schedules" ? "active" : ""} onClick={() => go({ kind: "schedules" })}>
            Schedules
          </button>
          <button className={view.kind === "settings" ? "active" : ""} onClick={() => go({ kind: "settings" })}>
            Settings
          </button>
        </nav>
        <span className="spacer" />
        <button className="primary" onClick={() => go({ kind: "new" })}>
          New session
        </button>
        <button onClick={() => setTheme(theme === "dark" ? "light" : "dark")} title="Dark or light" aria-label="theme">
          {theme === "dark" ? "☀" : "☾"}
        </button>
      </header>
      <div className="main">
        <aside className="sidebar">
          {sessions.map((s) => (
            <a
              key={s.id}
              href={`#/s/${s.id}`}
              className={"side-item" + (current?.id === s.id ? " selected" : "")}
              onClick={(e) => {
                e.preventDefault();
                go({ kind: "session", id: s.id, tab: "review" });
              }}
            >
              <span className={"dot " + stateOf(s)} />
              <span className="side-name">{s.project.split("/").filter(Boolean).pop()}</span>
              {s.changed > 0 && <span className="count">{s.changed}</span>}
            </a>
          ))}
        </aside>
        <main className="content">
          {engine && <div className="callout bad">{engine}</div>}
          {errors.map((e, i) => (
            <div key={i} className="callout bad error" role="alert">
              <span>{e}</span>
              <button onClick={() => setErrors((x) => x.filter((_, j) => j !== i))} aria-label="dismiss">
                ×
              </button>
            </div>
          ))}
          {view.kind === "home" && <AskPrompt client={client} onError={onError} />}
          {view.kind === "home" && (
            <Sessions
              sessions={sessions}
              onOpen={(id) => go({ kind: "session", id, tab: "review" })}
              onPause={(id) => act(() => client.pause(id))}
              onResume={(id) => act(() => client.resume(id))}
              onWake={(id) => act(() => client.wake(id))}
              onHibernate={(s) =>
                confirm(
                  `Hibernate the session on ${s.project}? Its workspace is kept on disk and its memory freed; processes running in it are stopped. New work wakes it.`,
                ) && act(() => client.hibernate(s.id))
              }
              onSnapshot={(id) => act(() => client.snapshot(id))}
              onDelete={(s) =>
                confirm(`Delete the session on ${s.project}? Its changes that were not accepted are lost.`) &&
                act(() => client.remove(s.id))
              }
              onNew={() => go({ kind: "new" })}
            />
          )}
          {view.kind === "new" && (
            <NewSession
              client={client}
              onCancel={() => go({ kind: "home" })}
              onError={onError}
              onCreated={async (r) => {
                setPending(r.agent);
                await refresh();
                go({ kind: "session", id: r.id, tab: r.agent ? "agent" : "terminal" });
              }}
            />
          )}
          {view.kind === "settings" && <Settings client={client} onError={onError} />}
          {view.kind === "snapshots" && (
            <Snapshots
              client={client}
              onOpen={(id) => {
                void refresh();
                go({ kind: "session", id, tab: "review" });
              }}
              onError={onError}
            />
          )}
          {view.kind === "schedules" && (
            <Schedules
              client={client}
              onOpen={(id) => {
                void refresh();
                go({ kind: "session", id, tab: "review" });
              }}
              onError={onError}
            />
          )}
          {view.kind === "session" &&
            (current ? (
              <SessionView
                client={client}
                session={current}
                tab={view.tab}
                theme={theme}
                onTab={(tab) => go({ ...view, tab })}
                path={view.path}
                onPath={(path) => {
                  const v = { ...view, path };
                  setView(v);
                  history.replaceState(null, "", hashOf(v));
                }}
                onOpen={(id) => {
                  void refresh();
                  go({ kind: "session", id, tab: "review" });
                }}
                onChanged={refresh}
                onError={onError}
                pendingPrompt={pending}
                onPromptTaken={() => setPending(undefined)}
              />
            ) : (
              <div className="empty">{sessions.length || !engine ? "Opening the session…" : "No such session."}</div>
            ))}
        </main>
      </div>
    </div>
  );
}
