// Package harness describes coding agents as data: how to run each one
// headless in a session, what it needs in the image, its environment and
// configuration, how to continue its conversation, and how its output
// maps to Airlock's common events. One file per agent; the engine runs
// them, this package never touches Docker or the workspace.
package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Event types: what an agent did, the same for every agent.
const (
	EventSession  = "session"   // the agent's conversation id, to continue it
	EventMessage  = "message"   // assistant text
	EventToolCall = "tool_call" // the agent called a tool
	EventFileEdit = "file_edit" // the agent changed a file (Path)
	EventCommand  = "command"   // a command the agent ran finished (ExitCode)
	EventUsage    = "usage"     // tokens and cost of a model call or of the turn
	EventError    = "error"     // something went wrong (the turn may go on)
	EventTurnDone = "turn_done" // the turn ended: final text, exit code, total usage
)

// Event is one thing an agent did.
type Event struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Turn     int       `json:"turn,omitempty"`
	Text     string    `json:"text,omitempty"`
	Tool     string    `json:"tool,omitempty"`
	Input    string    `json:"input,omitempty"` // the tool's input, summarized
	Path     string    `json:"path,omitempty"`  // relative to the workspace
	Command  string    `json:"command,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Usage    *Usage    `json:"usage,omitempty"`
	Session  string    `json:"session,omitempty"`
	// Result is the turn's validated structured answer (with --schema).
	Result json.RawMessage `json:"result,omitempty"`
	// ID is a tool call's id as the agent's CLI names it (at most 128
	// bytes): a tool_call and the file_edit events of the same call share
	// it.
	ID string `json:"id,omitempty"`
	// Wrote is, on a file_edit, the text the call wrote to Path where its
	// input carries it (a write's content, an edit's new text, a patch's
	// added lines), at most MaxWrote bytes cut at a line's end: what
	// blame compares a hunk's lines with to tell which call made them.
	Wrote string `json:"wrote,omitempty"`
}

// MaxWrote bounds Event.Wrote: an agent's input can be any size.
const MaxWrote = 8 << 10

// wrote is s as Event.Wrote keeps it: whole lines, at most MaxWrote
// bytes, valid UTF-8.
func wrote(s string) string {
	if len(s) > MaxWrote {
		s = s[:MaxWrote]
		if i := strings.LastIndexByte(s, '\n'); i >= 0 {
			s = s[:i+1]
		}
	}
	return strings.ToValidUTF8(s, "")
}

// callID is an agent's id of a tool call as Event.ID keeps it.
func callID(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return strings.ToValidUTF8(s, "")
}

// Usage is tokens and cost.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.CostUSD += o.CostUSD
}

// Provider kinds: the wire API an agent speaks to its model.
const (
	APIAnthropic = "anthropic" // Anthropic Messages
	APIResponses = "responses" // OpenAI Responses
	APIChat      = "chat"      // OpenAI-compatible Chat Completions
)

// Install is what an agent needs in the image.
type Install struct {
	Manager string // npm or pip
	Package string
	Version string // pinned
}

// Spec returns the package at its pinned version, as the manager names it.
func (i Install) Spec() string {
	if i.Manager == "pip" {
		return i.Package + "==" + i.Version
	}
	return i.Package + "@" + i.Version
}

// Turn is one prompt to an agent.
type Turn struct {
	Prompt  string
	Model   string // "" = the agent's default
	BaseURL string // the provider endpoint, "" = the agent's default
	// Resume is the conversation to continue (from an EventSession); ""
	// starts a new one.
	Resume string
	// Cmd and Events are the custom agent's command line (with a
	// {prompt} placeholder) and event mode (jsonl or text).
	Cmd    string
	Events string
}

// Invocation is how to run a turn in the session.
type Invocation struct {
	Argv []string
	Env  []string
}

// Agent is a coding agent CLI, as data.
type Agent struct {
	Name    string
	Title   string
	Install Install // Manager "" = nothing to install (custom)
	Bin     string  // the executable that must be in the image
	API     string  // the wire API it speaks
	// KeyEnv names the API key variable, on the host and for the CLI.
	KeyEnv string
	// KeyHeader and KeyValue say how the key travels to the provider
	// (KeyValue with %s for the secret reference): the engine's proxy
	// sets that header in transit, and the CLI gets a placeholder.
	KeyHeader string
	KeyValue  string
	// BaseURLEnv names the host variable that may hold the endpoint.
	BaseURLEnv     string
	DefaultBaseURL string
	DefaultModel   string
	// Command builds a turn's command line and environment.
	Command func(t Turn) (Invocation, error)
	// NewParser returns a parser for one turn's output.
	NewParser func(t Turn) Parser
	// Continues says whether a later turn continues the conversation.
	Continues bool
	// CumulativeCost says the CLI reports the cost of the whole
	// conversation so far, not of the turn.
	CumulativeCost bool
}

// Parser maps a CLI's output lines to events.
type Parser interface {
	// Line parses one line of standard output.
	Line(line []byte) []Event
	// End is called when the output ends, for what a parser held back.
	End() []Event
	// Final is the agent's last answer of the turn.
	Final() string
}

var agents = map[string]*Agent{}

func register(a *Agent) *Agent {
	agents[a.Name] = a
	return a
}

// Lookup returns the named agent.
func Lookup(name string) (*Agent, error) {
	if a := agents[name]; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("unknown agent %q: use one of %s, or custom with --cmd", name, strings.Join(Names(), ", "))
}

// Names lists the agents.
func Names() []string {
	var out []string
	for n := range agents {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Installable lists the agents an image can hold.
func Installable() []string {
	var out []string
	for _, n := range Names() {
		if agents[n].Install.Manager != "" {
			out = append(out, n)
		}
	}
	return out
}

// relPath makes a path the agent reported relative to the workspace.
func relPath(p string) string {
	if r, ok := strings.CutPrefix(p, "/workspace/"); ok {
		return r
	}
	return p
}

// summarize shortens a tool input for display: the command, path or
// pattern if there is one, else compact JSON.
func summarize(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) == nil {
		if p, ok := m["patchText"].(string); ok {
			return clip(strings.Join(patchPaths(p), ", "))
		}
		for _, k := range []string{"command", "cmd", "file_path", "filePath", "path", "pattern", "url", "description"} {
			switch v := m[k].(type) {
			case string:
				return clip(v)
			case []any:
				parts := make([]string, 0, len(v))
				for _, p := range v {
					parts = append(parts, fmt.Sprint(p))
				}
				return clip(strings.Join(parts, " "))
			}
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, input) == nil {
		return clip(b.String())
	}
	return clip(string(input))
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

func intp(n int) *int { return &n }

// isEditTool reports the tools that write files, by the names the CLIs
// use.
func isEditTool(name string) bool {
	switch strings.ToLower(name) {
	case "edit", "write", "multiedit", "notebookedit", "patch", "apply_patch", "str_replace_editor":
		return true
	}
	return false
}

// lineParser is a Parser whose events all come from single lines.
type lineParser struct{}

func (lineParser) End() []Event { return nil }

// patchAdded is the lines an apply_patch envelope adds to path (its "+"
// lines under that file's header), joined.
func patchAdded(patch, path string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(patch, "\n") {
		if strings.HasPrefix(l, "*** ") {
			in = false
			for _, h := range []string{"*** Add File: ", "*** Update File: ", "*** Move to: "} {
				if p, ok := strings.CutPrefix(l, h); ok {
					in = strings.TrimSpace(p) == path
				}
			}
			continue
		}
		if in && strings.HasPrefix(l, "+") && b.Len() <= MaxWrote {
			b.WriteString(l[1:] + "\n")
		}
	}
	return wrote(b.String())
}

// patchPaths lists the files an apply_patch envelope touches (its Add,
// Update, Delete and Move to headers).
func patchPaths(patch string) []string {
	var out []string
	for _, l := range strings.Split(patch, "\n") {
		for _, h := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if p, ok := strings.CutPrefix(l, h); ok && strings.TrimSpace(p) != "" {
				out = append(out, strings.TrimSpace(p))
			}
		}
	}
	return out
}
