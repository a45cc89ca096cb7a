import { useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { CreateRequest, Image, Settings } from "../api/types";
import { parseDuration, parseSize } from "../lib/format";
import { AGENTS } from "./Agent";

export interface NewSessionResult {
  id: string;
  agent?: { agent: string; model?: string; cmd?: string; events?: string; prompt: string };
}

// NewSession asks for what a session needs: the project (native folder
// dialog on the desktop), image, agent and model, network, idle timeout,
// limits.
export function NewSession({
  client,
  onCreated,
  onCancel,
  onError,
}: {
  client: Client;
  onCreated: (r: NewSessionResult) => void;
  onCancel: () => void;
  onError: (e: unknown) => void;
}) {
  const [project, setProject] = useState(localStorage.getItem("airlock.project") || "");
  const [images, setImages] = useState<Image[]>([]);
  const [settings, setSettings] = useState<Settings | null>(null);
  const [image, setImage] = useState("");
  const [agent, setAgent] = useState("claude");
  const [model, setModel] = useState("");
  const [cmd, setCmd] = useState("");
  const [events, setEvents] = useState("text");
  const [prompt, setPrompt] = useState("");
  const [net, setNet] = useState("default");
  const [allow, setAllow] = useState("");
  const [idle, setIdle] = useState("");
  const [cpus, setCpus] = useState("");
  const [memory, setMemory] = useState("");
  const [ws, setWs] = useState("");
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState("");

  useEffect(() => {
    client.images().then(
      (l) => setImages(l ?? []),
      () => {},
    );
    client.settings().then(setSettings, () => {});
  }, [client]);

  const pick = async () => {
    try {
      const p = await client.pickFolder();
      if (p) setProject(p);
    } catch (e) {
      onError(e);
    }
  };

  const submit = async () => {
    const req: CreateRequest = { project: project.trim() };
    if (!req.project.startsWith("/"))
      return setProblem("Give the project's absolute path (it is on the engine's machine), e.g. /home/me/src/app.");
    if (image) req.image = image;
    const limits: CreateRequest["limits"] = {};
    if (cpus) {
      const n = Number(cpus);
      if (!(n > 0)) return setProblem("CPUs: give a number of cores, e.g. 2 or 0.5.");
      limits.cpus = n;
    }
    for (const [v, k, label] of [
      [memory, "memory", "Memory"],
      [ws, "workspace_size", "Workspace size"],
    ] as const) {
      if (!v) continue;
      const n = parseSize(v);
      if (!(n > 0)) return setProblem(`${label}: give a size like 4g or 512m.`);
      limits[k] = n;
    }
    req.limits = limits;
    if (idle) {
      if (idle === "off") req.idle_timeout = -1;
      else {
        const d = parseDuration(idle);
        if (!(d > 0)) return setProblem("Idle timeout: give a duration like 30m or 2h, or off.");
        req.idle_timeout = d;
      }
    }
    if (net !== "default") {
      req.egress = { mode: net };
      if (net === "custom") req.egress.allow = allow.split(/[\s,]+/).filter(Boolean);
    }
    if (agent === "custom" && prompt && !cmd.includes("{prompt}"))
      return setProblem("A custom agent's command needs {prompt} where the prompt goes.");
    setProblem("");
    setBusy(true);
    try {
      const s = await client.create(req);
      localStorage.setItem("airlock.project", req.project);
      onCreated({
        id: s.id,
        agent:
          prompt.trim() && agent !== "none"
            ? {
                agent,
                model: model || undefined,
                cmd: agent === "custom" ? cmd : undefined,
                events: agent === "custom" ? events : undefined,
                prompt,
              }
            : undefined,
      });
    } catch (e) {
      onError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="form new-session">
      <h2>New session</h2>
      <label>
        Project
        <div className="row">
          <input value={project} onChange={(e) => setProject(e.target.value)} placeholder="/home/me/src/app" aria-label="project" />
          {client.t.kind === "desktop" && <button onClick={pick}>Choose…</button>}
        </div>
      </label>
      <label>
        Image
        <select value={image} onChange={(e) => setImage(e.target.value)} aria-label="image">
          <option value="">{settings?.image || "airlock/base"} (default)</option>
          {images
            .filter((i) => i.name !== settings?.image)
            .map((i) => (
              <option key={i.name} value={i.name}>
                {i.name}
              </option>
            ))}
        </select>
      </label>
      <div className="cols">
        <label>
          Agent
          <select value={agent} onChange={(e) => setAgent(e.target.value)} aria-label="agent">
            <option value="none">none (a terminal only)</option>
            {AGENTS.map((a) => (
              <option key={a}>{a}</option>
            ))}
          </select>
        </label>
        {agent === "custom" ? (
          <>
            <label>
              Command
              <input
                value={cmd}
                onChange={(e) => setCmd(e.target.value)}
                placeholder="my-agent --task {prompt}"
                aria-label="custom command"
              />
            </label>
            <label style={{ flex: "0 0 140px" }}>
              Its output
              <select value={events} onChange={(e) => setEvents(e.target.value)} aria-label="custom events">
                <option value="text">plain text</option>
                <option value="jsonl">Airlock events (JSON lines)</option>
              </select>
            </label>
          </>
        ) : (
          <label>
            Model
            <input
              value={model}
              onChange={(e) => setModel(e.target.value)}
              placeholder="default"
              aria-label="model"
              disabled={agent === "none"}
            />
          </label>
        )}
      </div>
      {agent !== "none" && (
        <label>
          First task
          <textarea
            value={prompt}
            onChange={(e) => setPrompt(e.target.value)}
            placeholder="Fix the failing test in pkg/foo (optional: you can also start it later)"
            aria-label="first task"
          />
        </label>
      )}
      <div className="cols">
        <label>
          Network
          <select value={net} onChange={(e) => setNet(e.target.value)} aria-label="network">
            <option value="default">default ({settings?.egress?.mode || "custom"})</option>
            <option value="deny-all">deny-all</option>
            <option value="allow-all">allow-all</option>
            <option value="custom">custom</option>
          </select>
        </label>
        {net === "custom" && (
          <label>
            Allow
            <input
              value={allow}
              onChange={(e) => setAllow(e.target.value)}
              placeholder="*.github.com registry.npmjs.org 10.0.0.0/8:443"
              aria-label="allow"
            />
          </label>
        )}
        <label>
          Idle timeout
          <input value={idle} onChange={(e) => setIdle(e.target.value)} placeholder="30m (or off)" aria-label="idle timeout" />
        </label>
      </div>
      <div className="cols">
        <label>
          CPUs
          <input
            value={cpus}
            onChange={(e) => setCpus(e.target.value)}
            placeholder={String(settings?.limits?.cpus ?? 2)}
            aria-label="cpus"
          />
        </label>
        <label>
          Memory
          <input value={memory} onChange={(e) => setMemory(e.target.value)} placeholder="4g" aria-label="memory" />
        </label>
        <label>
          Workspace size
          <input value={ws} onChange={(e) => setWs(e.target.value)} placeholder="2g" aria-label="workspace size" />
        </label>
      </div>
      {problem && <div className="callout bad">{problem}</div>}
      <div className="row end">
        <button onClick={onCancel}>Cancel</button>
        <button className="primary" disabled={busy || !project} onClick={submit}>
          {busy ? "Creating…" : "Create session"}
        </button>
      </div>
    </div>
  );
}
