package harness

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Custom: any command line with a {prompt} placeholder, run by the
// session's shell with the prompt as a separate argument (never pasted
// into the script). Its output is read as JSON lines in Airlock's event
// vocabulary (--events jsonl) or as plain text (the default). It has no
// conversation of its own: every turn starts afresh.
var Custom = register(&Agent{
	Name:  "custom",
	Title: "Custom command",
	API:   APIChat,
	Command: func(t Turn) (Invocation, error) {
		if strings.TrimSpace(t.Cmd) == "" {
			return Invocation{}, errors.New(`the custom agent needs --cmd, e.g. --cmd "aider --yes --message {prompt}"`)
		}
		if !strings.Contains(t.Cmd, "{prompt}") {
			return Invocation{}, errors.New(`--cmd has no {prompt} placeholder: put {prompt} where the prompt goes, e.g. --cmd "mytool --message {prompt}"`)
		}
		switch t.Events {
		case "", "text", "jsonl":
		default:
			return Invocation{}, errors.New("--events must be jsonl or text")
		}
		script := strings.NewReplacer(`'{prompt}'`, `"$1"`, `"{prompt}"`, `"$1"`, `{prompt}`, `"$1"`).Replace(t.Cmd)
		return Invocation{Argv: []string{"/bin/sh", "-c", script, "airlock-agent", t.Prompt}}, nil
	},
	NewParser: func(t Turn) Parser {
		if t.Events == "jsonl" {
			return &jsonlParser{}
		}
		return &textParser{}
	},
})

// jsonlParser takes lines that are Airlock events as they are; other JSON
// is a message with the JSON, other text a message.
type jsonlParser struct {
	lineParser
	final string
}

func (p *jsonlParser) Final() string { return p.final }

func (p *jsonlParser) Line(line []byte) []Event {
	s := strings.TrimSpace(string(line))
	if s == "" {
		return nil
	}
	var e Event
	if json.Unmarshal(line, &e) == nil && known(e.Type) {
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		e.Turn = 0
		e.ID, e.Wrote = callID(e.ID), wrote(e.Wrote) // bounded as the other agents' are
		if e.Type == EventMessage {
			p.final = e.Text
		}
		if e.Type == EventTurnDone { // the engine ends turns
			if e.Text != "" {
				p.final = e.Text
			}
			return nil
		}
		return []Event{e}
	}
	p.final = s
	return []Event{{Type: EventMessage, Time: time.Now(), Text: s}}
}

func known(t string) bool {
	switch t {
	case EventSession, EventMessage, EventToolCall, EventFileEdit, EventCommand, EventUsage, EventError, EventTurnDone:
		return true
	}
	return false
}
