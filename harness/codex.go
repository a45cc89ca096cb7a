package harness

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Codex: `codex exec --json`, with Airlock's provider defined on the
// command line (no config file to write), Codex's own sandbox off (the
// session is the sandbox) and plugins off (they hang at exit offline).
// Codex offers apply_patch only for models it knows, hence the default.
var Codex = register(&Agent{
	Name:           "codex",
	Title:          "Codex",
	Install:        Install{Manager: "npm", Package: "@openai/codex", Version: "0.169.0"},
	Bin:            "codex",
	API:            APIResponses,
	KeyEnv:         "OPENAI_API_KEY",
	KeyHeader:      "authorization",
	KeyValue:       "Bearer secret:%s",
	BaseURLEnv:     "OPENAI_BASE_URL",
	DefaultBaseURL: "https://api.openai.com/v1",
	DefaultModel:   "gpt-5.5",
	Continues:      true,
	Command: func(t Turn) (Invocation, error) {
		model := firstNonEmpty(t.Model, "gpt-5.5")
		base := firstNonEmpty(t.BaseURL, "https://api.openai.com/v1")
		provider := fmt.Sprintf(`model_providers.airlock={name="airlock",base_url=%s,env_key="OPENAI_API_KEY",wire_api="responses"}`, strconv.Quote(base))
		argv := []string{"codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
			"--disable", "plugins", "-c", "model_provider=airlock", "-c", provider, "-m", model}
		if t.Resume != "" {
			argv = append(argv, "resume", t.Resume)
		}
		argv = append(argv, "--", t.Prompt)
		return Invocation{Argv: argv}, nil
	},
	NewParser: func(Turn) Parser { return &codexParser{} },
})

type codexParser struct {
	lineParser
	final string
}

func (p *codexParser) Final() string { return p.final }

func (p *codexParser) Line(line []byte) []Event {
	var m struct {
		Type     string `json:"type"`
		ThreadID string `json:"thread_id"`
		Message  string `json:"message"`
		Error    struct {
			Message string `json:"message"`
		} `json:"error"`
		Item struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Text     string `json:"text"`
			Command  string `json:"command"`
			ExitCode *int   `json:"exit_code"`
			Message  string `json:"message"`
			Changes  []struct {
				Path string `json:"path"`
				Kind string `json:"kind"`
			} `json:"changes"`
			Server    string          `json:"server"`
			Tool      string          `json:"tool"`
			Query     string          `json:"query"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"item"`
		Usage struct {
			Input     int64 `json:"input_tokens"`
			Cached    int64 `json:"cached_input_tokens"`
			CacheWrte int64 `json:"cache_write_input_tokens"`
			Output    int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(line, &m) != nil || m.Type == "" {
		return unparsed(line)
	}
	now := time.Now()
	it := m.Item
	switch m.Type {
	case "thread.started":
		return []Event{{Type: EventSession, Time: now, Session: m.ThreadID}}
	case "turn.completed":
		return []Event{{Type: EventUsage, Time: now, Usage: &Usage{InputTokens: m.Usage.Input, OutputTokens: m.Usage.Output,
			CacheReadTokens: m.Usage.Cached, CacheWriteTokens: m.Usage.CacheWrte}}}
	case "turn.failed":
		return []Event{{Type: EventError, Time: now, Text: m.Error.Message}}
	case "error":
		return []Event{{Type: EventError, Time: now, Text: m.Message}}
	case "item.started":
		switch it.Type {
		case "command_execution":
			return []Event{{Type: EventToolCall, Time: now, Tool: "exec_command", Input: clip(it.Command), ID: callID(it.ID)}}
		case "mcp_tool_call":
			return []Event{{Type: EventToolCall, Time: now, Tool: it.Server + "." + it.Tool, Input: summarize(it.Arguments), ID: callID(it.ID)}}
		case "web_search":
			return []Event{{Type: EventToolCall, Time: now, Tool: "web_search", Input: clip(it.Query), ID: callID(it.ID)}}
		}
	case "item.completed":
		switch it.Type {
		case "agent_message":
			p.final = it.Text
			return []Event{{Type: EventMessage, Time: now, Text: it.Text}}
		case "command_execution":
			return []Event{{Type: EventCommand, Time: now, Command: clip(it.Command), ExitCode: it.ExitCode}}
		case "file_change":
			// Codex reports the paths a patch changed, not its text.
			paths := make([]string, 0, len(it.Changes))
			for _, c := range it.Changes {
				paths = append(paths, relPath(c.Path))
			}
			out := []Event{{Type: EventToolCall, Time: now, Tool: "apply_patch", Input: clip(strings.Join(paths, ", ")), ID: callID(it.ID)}}
			for _, c := range it.Changes {
				out = append(out, Event{Type: EventFileEdit, Time: now, Tool: "apply_patch:" + c.Kind, Path: relPath(c.Path), ID: callID(it.ID)})
			}
			return out
		case "error":
			return []Event{{Type: EventError, Time: now, Text: it.Message}}
		}
	}
	return nil
}
