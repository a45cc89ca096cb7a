package harness

import (
	"encoding/json"
	"time"
)

// OpenCode: `opencode run --format json`, configured entirely by
// OPENCODE_CONFIG_CONTENT with one OpenAI-compatible provider, so any
// Chat Completions endpoint (a gateway, a local model) works.
var OpenCode = register(&Agent{
	Name:           "opencode",
	Title:          "OpenCode",
	Install:        Install{Manager: "npm", Package: "opencode-ai", Version: "1.18.33"},
	Bin:            "opencode",
	API:            APIChat,
	KeyEnv:         "OPENAI_API_KEY",
	KeyHeader:      "authorization",
	KeyValue:       "Bearer secret:%s",
	BaseURLEnv:     "OPENAI_BASE_URL",
	DefaultBaseURL: "https://api.openai.com/v1",
	DefaultModel:   "gpt-5.5",
	Continues:      true,
	Command: func(t Turn) (Invocation, error) {
		model := firstNonEmpty(t.Model, "gpt-5.5")
		cfg, err := json.Marshal(map[string]any{
			"autoupdate": false,
			"share":      "disabled",
			"model":      "airlock/" + model,
			"provider": map[string]any{"airlock": map[string]any{
				"npm":     "@ai-sdk/openai-compatible",
				"name":    "airlock",
				"options": map[string]any{"baseURL": firstNonEmpty(t.BaseURL, "https://api.openai.com/v1"), "apiKey": "{env:OPENAI_API_KEY}"},
				"models":  map[string]any{model: map[string]any{"name": model, "tool_call": true}},
			}},
		})
		if err != nil {
			return Invocation{}, err
		}
		argv := []string{"opencode", "run", "--format", "json"}
		if t.Resume != "" {
			argv = append(argv, "--session", t.Resume)
		}
		argv = append(argv, "--", t.Prompt)
		return Invocation{Argv: argv, Env: []string{"OPENCODE_CONFIG_CONTENT=" + string(cfg)}}, nil
	},
	NewParser: func(Turn) Parser { return &opencodeParser{} },
})

type opencodeParser struct {
	lineParser
	session string
	final   string
}

func (p *opencodeParser) Final() string { return p.final }

func (p *opencodeParser) Line(line []byte) []Event {
	var m struct {
		Type      string          `json:"type"`
		SessionID string          `json:"sessionID"`
		Error     json.RawMessage `json:"error"`
		Part      struct {
			Text   string `json:"text"`
			Tool   string `json:"tool"`
			CallID string `json:"callID"`
			State  struct {
				Status   string          `json:"status"`
				Input    json.RawMessage `json:"input"`
				Error    string          `json:"error"`
				Metadata struct {
					Exit *int `json:"exit"`
				} `json:"metadata"`
			} `json:"state"`
			Tokens struct {
				Input  int64 `json:"input"`
				Output int64 `json:"output"`
				Cache  struct {
					Read  int64 `json:"read"`
					Write int64 `json:"write"`
				} `json:"cache"`
			} `json:"tokens"`
			Cost float64 `json:"cost"`
		} `json:"part"`
	}
	if json.Unmarshal(line, &m) != nil || m.Type == "" {
		return unparsed(line)
	}
	now := time.Now()
	var out []Event
	if m.SessionID != "" && m.SessionID != p.session {
		p.session = m.SessionID
		out = append(out, Event{Type: EventSession, Time: now, Session: m.SessionID})
	}
	part := m.Part
	switch m.Type {
	case "text":
		if part.Text != "" {
			p.final = part.Text
			out = append(out, Event{Type: EventMessage, Time: now, Text: part.Text})
		}
	case "tool_use":
		id := callID(part.CallID)
		out = append(out, Event{Type: EventToolCall, Time: now, Tool: part.Tool, Input: summarize(part.State.Input), ID: id})
		switch {
		case part.Tool == "bash":
			var in struct {
				Command string `json:"command"`
			}
			json.Unmarshal(part.State.Input, &in)
			code := part.State.Metadata.Exit
			if code == nil && part.State.Status == "error" {
				code = intp(1)
			}
			out = append(out, Event{Type: EventCommand, Time: now, Command: clip(in.Command), ExitCode: code})
		case part.Tool == "invalid":
			// The model called a tool OpenCode does not offer.
			out[len(out)-1] = Event{Type: EventError, Time: now, Tool: part.Tool, Text: "the model called a tool OpenCode does not offer: " + summarize(part.State.Input)}
		case isEditTool(part.Tool) && part.State.Status == "completed":
			var in struct {
				Path    string `json:"filePath"`
				Patch   string `json:"patchText"`
				Content string `json:"content"`   // write
				New     string `json:"newString"` // edit
			}
			json.Unmarshal(part.State.Input, &in)
			for _, p := range patchPaths(in.Patch) {
				out = append(out, Event{Type: EventFileEdit, Time: now, Tool: part.Tool, Path: relPath(p), ID: id, Wrote: patchAdded(in.Patch, p)})
			}
			if in.Path != "" {
				out = append(out, Event{Type: EventFileEdit, Time: now, Tool: part.Tool, Path: relPath(in.Path), ID: id, Wrote: wrote(in.Content + in.New)})
			}
		}
		if part.State.Status == "error" && part.State.Error != "" {
			out = append(out, Event{Type: EventError, Time: now, Tool: part.Tool, Text: clip(part.State.Error)})
		}
	case "step_finish":
		out = append(out, Event{Type: EventUsage, Time: now, Usage: &Usage{InputTokens: part.Tokens.Input, OutputTokens: part.Tokens.Output,
			CacheReadTokens: part.Tokens.Cache.Read, CacheWriteTokens: part.Tokens.Cache.Write, CostUSD: part.Cost}})
	case "error":
		out = append(out, Event{Type: EventError, Time: now, Text: clip(string(m.Error))})
	}
	return out
}
