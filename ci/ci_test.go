package ci

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
)

func TestExitCodes(t *testing.T) {
	want := map[string]int{Success: 0, AgentFailed: 1, Held: 2, Violation: 3, Infrastructure: 4, InvalidInput: 64, OutputFailed: 73, "anything else": 4}
	for outcome, code := range want {
		if got := ExitCode(outcome); got != code {
			t.Errorf("ExitCode(%s) = %d, want %d", outcome, got, code)
		}
	}
}

func TestSummary(t *testing.T) {
	v := &Verdict{Schema: SchemaVersion, Outcome: Held, Message: "1 change(s) need a human",
		Project: Project{Dirty: true},
		Changes: []Change{{Path: "a|b.go", Kind: "modified", Added: 2, Removed: 1, Applied: true}, {Path: "go.sum", Kind: "modified", Held: true}, {Path: "logo.png", Kind: "added", Binary: true},
			{Path: "x\n| forged | row |", Kind: "added"}, {Path: "uni\u202egnp.exe", Kind: "added"}, {Path: "a`b", Kind: "added"}},
		Held:   []HeldFile{{Path: "go.sum", Reason: "held by policy (go.sum)"}},
		Agent:  &AgentResult{Agent: "claude", State: "done", Final: "Done.\nAll <good>."},
		Egress: Egress{Blocked: []Blockage{{Host: "evil.example.com", Port: 443}}},
	}
	md := Summary(v)
	for _, want := range []string{"✋ Airlock: changes need a human", "| `a\\|b.go` | modified | +2 −1 | applied |", "| `go.sum` | modified | +0 −0 | held |",
		"| `logo.png` | added | binary | ready |", "> Done.\n> All &lt;good&gt;.", "uncommitted changes", "`evil.example.com:443`", "held: `go.sum`",
		"| `\"x\\n\\| forged \\| row \\|\"` | added |", "| `\"uni\\u202egnp.exe\"` | added |", "| `` a`b `` | added |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the summary lacks %q:\n%s", want, md)
		}
	}
	if strings.ContainsAny(md, "\u202e\x1b") || strings.Contains(md, "\n| forged") {
		t.Errorf("a name reached the summary as it displays:\n%s", md)
	}
}

func TestAutoAccepted(t *testing.T) {
	none := []api.FileDiff{{Change: api.Change{Path: "a"}}, {Change: api.Change{Path: "b"}}}
	if !autoAccepted(none, "a") || !autoAccepted(none, "b") {
		t.Error("without auto_accept globs every change that nothing holds is applied")
	}
	some := []api.FileDiff{{Change: api.Change{Path: "a"}, AutoAccept: true}, {Change: api.Change{Path: "b"}}}
	if !autoAccepted(some, "a") || autoAccepted(some, "b") {
		t.Error("with auto_accept globs only what they match is applied")
	}
}

// The verdict's JSON keeps its documented names (docs/CI.md).
func TestVerdictFields(t *testing.T) {
	b, _ := json.Marshal(&Verdict{Schema: SchemaVersion, Changes: []Change{}, Agent: &AgentResult{}})
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"schema", "outcome", "exit_code", "message", "project", "changes", "held", "findings", "conflicts", "applied", "agent", "usage", "egress", "timings"} {
		if _, ok := m[k]; !ok {
			t.Errorf("verdict.json has no %q", k)
		}
	}
}
