package harness

import (
	"encoding/json"
	"regexp"
	"strconv"
	"time"
)

// Claude Code: `claude -p` with stream-json output. It refuses
// --dangerously-skip-permissions as root unless told it is in a sandbox,
// which a session is.
var Claude = register(&Agent{
	Name:           "claude",
	Title:          "Claude Code",
	Install:        Install{Manager: "npm", Package: "@anthropic-ai/claude-code", Version: "2.1.330"},
	Bin:            "claude",
	API:            APIAnthropic,
	KeyEnv:         "ANTHROPIC_API_KEY",
	KeyHeader:      "x-api-key",
	KeyValue:       "secret:%s",
	BaseURLEnv:     "ANTHROPIC_BASE_URL",
	DefaultBaseURL: "https://api.anthropic.com",
	Continues:      true,
	CumulativeCost: true,
	Command: func(t Turn) (Invocation, error) {
		argv := []string{"claude", "-p", t.Prompt, "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"}
		if t.Model != "" {
			argv = append(argv, "--model", t.Model)
		}
		if t.Resume != "" {
			argv = append(argv, "--resume", t.Resume)
		}
		env := []string{"IS_SANDBOX=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1"}
		if t.BaseURL != "" {
			env = append(env, "ANTHROPIC_BASE_URL="+t.BaseURL)
		}
		return Invocation{Argv: argv, Env: env}, nil
	},
	NewParser: func(Turn) Parser { return &claudeParser{tools: map[string]claudeTool{}} },
})

type claudeTool struct{ name, command string }

type claudeParser struct {
	lineParser
	tools map[string]claudeTool
	final string
}

var exitCodeRE = regexp.MustCompile(`(?i)exit code:? (\d+)`)

func (p *claudeParser) Final() string { return p.final }

func (p *claudeParser) Line(line []byte) []Event {
	var m struct {
		Type      string `json:"type"`
		Subtype   string `json:"subtype"`
		SessionID string `json:"session_id"`
		Message   struct {
			Content []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
				IsError   bool            `json:"is_error"`
			} `json:"content"`
		} `json:"message"`
		Result  string  `json:"result"`
		IsError bool    `json:"is_error"`
		Cost    float64 `json:"total_cost_usd"`
		Usage   struct {
			Input      int64 `json:"input_tokens"`
			Output     int64 `json:"output_tokens"`
			CacheRead  int64 `json:"cache_read_input_tokens"`
			CacheWrite int64 `json:"cache_creation_input_tokens"`
		} `json:"usage"`
		Attempt    int    `json:"attempt"`
		MaxRetries int    `json:"max_retries"`
		Error      string `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil || m.Type == "" {
		return unparsed(line)
	}
	now := time.Now()
	var out []Event
	switch m.Type {
	case "system":
		switch m.Subtype {
		case "init":
			out = append(out, Event{Type: EventSession, Time: now, Session: m.SessionID})
		case "api_retry":
			out = append(out, Event{Type: EventError, Time: now,
				Text: "model request failed (" + m.Error + "); retry " + strconv.Itoa(m.Attempt) + " of " + strconv.Itoa(m.MaxRetries)})
		}
	case "assistant":
		for _, c := range m.Message.Content {
			switch c.Type {
			case "text":
				if c.Text != "" {
					out = append(out, Event{Type: EventMessage, Time: now, Text: c.Text})
					p.final = c.Text
				}
			case "tool_use":
				in := summarize(c.Input)
				out = append(out, Event{Type: EventToolCall, Time: now, Tool: c.Name, Input: in, ID: callID(c.ID)})
				t := claudeTool{name: c.Name}
				if c.Name == "Bash" {
					t.command = in
				}
				p.tools[c.ID] = t
				if isEditTool(c.Name) {
					var f struct {
						Path     string `json:"file_path"`
						Notebook string `json:"notebook_path"`
						Content  string `json:"content"`    // Write
						New      string `json:"new_string"` // Edit
						Source   string `json:"new_source"` // NotebookEdit
						Edits    []struct {
							New string `json:"new_string"`
						} `json:"edits"` // MultiEdit
					}
					json.Unmarshal(c.Input, &f)
					text := f.Content + f.New + f.Source
					for _, e := range f.Edits {
						if len(text) > MaxWrote {
							break
						}
						text += e.New + "\n"
					}
					if path := firstNonEmpty(f.Path, f.Notebook); path != "" {
						out = append(out, Event{Type: EventFileEdit, Time: now, Tool: c.Name, Path: relPath(path), ID: callID(c.ID), Wrote: wrote(text)})
					}
				}
			}
		}
	case "user":
		for _, c := range m.Message.Content {
			t, ok := p.tools[c.ToolUseID]
			if c.Type != "tool_result" || !ok || t.name != "Bash" {
				continue
			}
			code := 0
			if c.IsError {
				code = 1
				if sm := exitCodeRE.FindStringSubmatch(string(c.Content)); sm != nil {
					code, _ = strconv.Atoi(sm[1])
				}
			}
			out = append(out, Event{Type: EventCommand, Time: now, Command: t.command, ExitCode: intp(code)})
		}
	case "result":
		if m.Result != "" {
			p.final = m.Result
		}
		out = append(out, Event{Type: EventUsage, Time: now, Usage: &Usage{
			InputTokens: m.Usage.Input, OutputTokens: m.Usage.Output,
			CacheReadTokens: m.Usage.CacheRead, CacheWriteTokens: m.Usage.CacheWrite, CostUSD: m.Cost}})
		if m.IsError || (m.Subtype != "" && m.Subtype != "success") {
			out = append(out, Event{Type: EventError, Time: now, Text: "the agent ended with " + m.Subtype + ": " + m.Result})
		}
	}
	return out
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// unparsed turns a line that is not the CLI's JSON into an error event,
// so nothing the agent printed is lost.
func unparsed(line []byte) []Event {
	s := clip(string(line))
	if s == "" {
		return nil
	}
	return []Event{{Type: EventError, Time: time.Now(), Text: "unparsed output: " + s}}
}
