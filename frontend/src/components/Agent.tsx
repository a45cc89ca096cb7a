import { useCallback, useEffect, useRef, useState } from "react";
import type { Client } from "../api/client";
import type { AgentEvent, Turn, Usage } from "../api/types";
import { seconds, usd } from "../lib/format";
import { Timeline } from "./Timeline";
import { PathName } from "./PathName";

export const AGENTS = ["claude", "codex", "opencode", "aider", "custom"];

function EventRow({ e }: { e: AgentEvent }) {
  switch (e.type) {
    case "message":
      return <div className="ev message">{e.text}</div>;
    case "tool_call":
      return (
        <div className="ev tool">
          <span className="tag">{e.tool}</span> <code>{e.input}</code>
        </div>
      );
    case "file_edit":
      return (
        <div className="ev edit">
          <span className="tag">edit</span>{" "}
          <code>
            <PathName path={e.path ?? ""} />
          </code>
        </div>
      );
    case "command":
      return (
        <div className="ev cmd">
          <span className="tag">$</span> <code>{e.command}</code>
          {e.exit_code !== undefined && <span className={"exit " + (e.exit_code === 0 ? "ok" : "bad")}>exit {e.exit_code}</span>}
        </div>
      );
    case "usage":
      return e.usage ? (
        <div className="ev usage muted small">
          {e.usage.input_tokens} in · {e.usage.output_tokens} out{e.usage.cost_usd ? ` · ${usd(e.usage.cost_usd)}` : ""}
        </div>
      ) : null;
    case "error":
      return <div className="ev error">{e.text}</div>;
    case "turn_done":
      return <div className="ev done muted small">turn {e.turn} done</div>;
    default:
      return null;
  }
}

function total(turns: Turn[]): Usage {
  const u: Usage = { input_tokens: 0, output_tokens: 0, cost_usd: 0 };
  for (const t of turns) {
    u.input_tokens += t.usage?.input_tokens ?? 0;
    u.output_tokens += t.usage?.output_tokens ?? 0;
    u.cost_usd = (u.cost_usd ?? 0) + (t.usage?.cost_usd ?? 0);
  }
  return u;
}

// Agent is the session's conversation: every turn's events, live while a
// turn runs, and the prompt for the next turn; and its timeline of turns
// and commands, each with its diff, undo and fork.
export function Agent({
  client,
  session,
  theme = "dark",
  onOpen = () => {},
  defaultAgent,
  initial,
  onInitialTaken,
  onError,
  onTurnDone,
}: {
  client: Client;
  session: string;
  theme?: "dark" | "light";
  // onOpen opens another session (one forked from a turn).
  onOpen?: (id: string) => void;
  defaultAgent?: string;
  // initial is a first task to send as soon as the view opens.
  initial?: { agent: string; model?: string; cmd?: string; events?: string; prompt: string };
  onInitialTaken?: () => void;
  onError: (e: unknown) => void;
  onTurnDone?: () => void;
}) {
  const [events, setEvents] = useState<AgentEvent[]>([]);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [prompt, setPrompt] = useState("");
  const [agent, setAgent] = useState(defaultAgent || "claude");
  const [model, setModel] = useState("");
  const [cmd, setCmd] = useState("");
  const [running, setRunning] = useState(false);
  const [touched, setTouched] = useState<string[]>([]);
  const [view, setView] = useState<"conversation" | "timeline">("conversation");
  const end = useRef<HTMLDivElement>(null);

  const load = useCallback(async () => {
    try {
      const [ev, tu] = await Promise.all([client.events(session), client.turns(session)]);
      setEvents(ev ?? []);
      setTurns(tu ?? []);
      if (tu?.length) setAgent(tu[tu.length - 1].agent);
    } catch (e) {
      onError(e);
    }
  }, [client, session, onError]);
  useEffect(() => {
    void load();
  }, [load]);
  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "end" });
  }, [events.length]);

  const send = () => run(agent, prompt, model || undefined, agent === "custom" ? cmd : undefined);
  const run = async (agent: string, prompt: string, model?: string, cmd?: string, events?: string) => {
    if (!prompt.trim() || running) return;
    setRunning(true);
    setTouched([]);
    try {
      await client.agent(session, { agent, prompt, model, cmd, events }, (l) => {
        if (l.event) {
          const ev = l.event;
          setEvents((x) => [...x, ev]);
          if (ev.type === "file_edit" && ev.path) setTouched((t) => (t.includes(ev.path!) ? t : [...t, ev.path!]));
        }
        if (l.error) onError(new Error(l.error.message));
      });
      setPrompt("");
      await load();
      onTurnDone?.();
    } catch (e) {
      onError(e);
    } finally {
      setRunning(false);
    }
  };

  const sent = useRef(false);
  useEffect(() => {
    if (!initial || sent.current) return;
    sent.current = true;
    onInitialTaken?.();
    setAgent(initial.agent);
    void run(initial.agent, initial.prompt, initial.model, initial.cmd, initial.events);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [initial]);

  const u = total(turns);
  const current = [...events].reverse().find((e) => e.type === "tool_call");
  const views = (
    <div className="agent-views" role="tablist">
      {(["conversation", "timeline"] as const).map((v) => (
        <button key={v} role="tab" aria-selected={v === view} className={v === view ? "active" : ""} onClick={() => setView(v)}>
          {v === "conversation" ? "Conversation" : "Timeline"}
        </button>
      ))}
    </div>
  );
  if (view === "timeline")
    return (
      <div className="agent">
        {views}
        <Timeline client={client} session={session} theme={theme} onOpen={onOpen} onChanged={onTurnDone} onError={onError} />
      </div>
    );
  return (
    <div className="agent">
      {views}
      <div className="agent-stream">
        {events.length === 0 && !running && (
          <div className="empty small">No agent has worked in this session yet. Give it a task below.</div>
        )}
        {events.map((e, i) => (
          <EventRow key={i} e={e} />
        ))}
        <div ref={end} />
      </div>
      <div className="agent-status muted small">
        {running ? (
          <>
            <span className="spinner" /> working{current ? ` · ${current.tool}` : ""}
            {touched.length ? ` · touched ${touched.join(", ")}` : ""}
          </>
        ) : (
          <>
            {turns.length} turn{turns.length === 1 ? "" : "s"} · {u.input_tokens} tokens in · {u.output_tokens} out
            {u.cost_usd ? ` · ${usd(u.cost_usd)}` : ""}
            {turns.length
              ? ` · last turn ${turns[turns.length - 1].state}${turns[turns.length - 1].cpu_seconds ? `, CPU ${seconds(turns[turns.length - 1].cpu_seconds!)}` : ""}`
              : ""}
          </>
        )}
      </div>
      <div className="prompt">
        <div className="prompt-opts">
          <select value={agent} onChange={(e) => setAgent(e.target.value)} aria-label="agent">
            {AGENTS.map((a) => (
              <option key={a}>{a}</option>
            ))}
          </select>
          {agent === "custom" ? (
            <input
              value={cmd}
              onChange={(e) => setCmd(e.target.value)}
              placeholder="command with {prompt}, e.g. my-agent --task {prompt}"
              aria-label="custom command"
            />
          ) : (
            <input
              value={model}
              onChange={(e) => setModel(e.target.value)}
              placeholder="model (default from settings)"
              aria-label="model"
            />
          )}
        </div>
        <textarea
          value={prompt}
          onChange={(e) => setPrompt(e.target.value)}
          placeholder={
            turns.length ? "Next instruction, same conversation… (Ctrl+Enter sends)" : "What should the agent do? (Ctrl+Enter sends)"
          }
          onKeyDown={(e) => {
            if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) void send();
          }}
          aria-label="prompt"
        />
        <button className="primary" disabled={running || !prompt.trim()} onClick={send}>
          {running ? "Working…" : "Send"}
        </button>
      </div>
    </div>
  );
}
