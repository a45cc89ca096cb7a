package harness

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Aider: one-shot `aider --message`, plain-text output. Its package index
// (PyPI) is not reachable from the machines Airlock is built on, so it is
// defined and its parser tested on sample output, but not installed by
// `airlock image build --agents` here. Its chat history lives in the
// session's home, not the project, and a later turn restores it.
var Aider = register(&Agent{
	Name:           "aider",
	Title:          "Aider",
	Install:        Install{Manager: "pip", Package: "aider-chat", Version: "0.86.1"},
	Bin:            "aider",
	API:            APIChat,
	KeyEnv:         "OPENAI_API_KEY",
	KeyHeader:      "authorization",
	KeyValue:       "Bearer secret:%s",
	BaseURLEnv:     "OPENAI_BASE_URL",
	DefaultBaseURL: "https://api.openai.com/v1",
	DefaultModel:   "gpt-4o",
	Continues:      true,
	Command: func(t Turn) (Invocation, error) {
		argv := []string{"aider", "--yes-always", "--no-pretty", "--no-stream", "--no-auto-commits", "--no-check-update",
			"--no-show-model-warnings", "--analytics-disable",
			"--chat-history-file", "/home/airlock/.aider.chat.history.md",
			"--input-history-file", "/home/airlock/.aider.input.history",
			"--model", "openai/" + firstNonEmpty(t.Model, "gpt-4o")}
		if t.BaseURL != "" {
			argv = append(argv, "--openai-api-base", t.BaseURL)
		}
		if t.Resume != "" {
			argv = append(argv, "--restore-chat-history")
		}
		argv = append(argv, "--message", t.Prompt)
		return Invocation{Argv: argv}, nil
	},
	NewParser: func(Turn) Parser { return &textParser{aider: true} },
})

var (
	aiderEditRE   = regexp.MustCompile(`^Applied edit to (.+)$`)
	aiderTokensRE = regexp.MustCompile(`^Tokens: ([\d.]+)(k?) sent(?:, ([\d.]+)(k?) cache write)?(?:, ([\d.]+)(k?) cache hit)?, ([\d.]+)(k?) received\.(?: Cost: \$([\d.]+) message)?`)
	aiderRunRE    = regexp.MustCompile(`^Running (.+)$`)
	aiderBanner   = []string{"Aider v", "Main model:", "Weak model:", "Editor model:", "Git repo:", "Repo-map:", "Use /help", "Added ", "Restored previous conversation history", "Cur working dir:", "Git working dir:"}
)

// textParser reads plain text: lines gather into one message until
// something structured (an edit, a token count) comes, or the end. With
// aider set it knows Aider's lines.
type textParser struct {
	aider   bool
	started bool
	buf     []string
	final   string
}

func (p *textParser) Final() string { return p.final }

func (p *textParser) flush() []Event {
	text := strings.TrimSpace(strings.Join(p.buf, "\n"))
	p.buf = nil
	if text == "" {
		return nil
	}
	p.final = text
	return []Event{{Type: EventMessage, Time: time.Now(), Text: text}}
}

func (p *textParser) End() []Event { return p.flush() }

func (p *textParser) Line(line []byte) []Event {
	s := strings.TrimRight(string(line), "\r")
	if !p.aider {
		p.buf = append(p.buf, s)
		return nil
	}
	var out []Event
	now := time.Now()
	if !p.started {
		p.started = true
		// The conversation is the history file in the session's home.
		out = append(out, Event{Type: EventSession, Time: now, Session: "aider-chat-history"})
	}
	for _, b := range aiderBanner {
		if strings.HasPrefix(s, b) {
			return out
		}
	}
	if m := aiderEditRE.FindStringSubmatch(s); m != nil {
		out = append(out, p.flush()...)
		return append(out, Event{Type: EventFileEdit, Time: now, Tool: "edit", Path: relPath(strings.TrimSpace(m[1]))})
	}
	if m := aiderRunRE.FindStringSubmatch(s); m != nil {
		out = append(out, p.flush()...)
		return append(out, Event{Type: EventToolCall, Time: now, Tool: "shell", Input: clip(m[1])})
	}
	if m := aiderTokensRE.FindStringSubmatch(s); m != nil {
		out = append(out, p.flush()...)
		u := &Usage{InputTokens: tokens(m[1], m[2]), CacheWriteTokens: tokens(m[3], m[4]), CacheReadTokens: tokens(m[5], m[6]), OutputTokens: tokens(m[7], m[8])}
		u.CostUSD, _ = strconv.ParseFloat(m[9], 64)
		return append(out, Event{Type: EventUsage, Time: now, Usage: u})
	}
	p.buf = append(p.buf, s)
	return out
}

// tokens reads Aider's "2.3k" counts.
func tokens(n, k string) int64 {
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return 0
	}
	if k == "k" {
		f *= 1000
	}
	return int64(f + 0.5)
}
