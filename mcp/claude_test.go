package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/harness/mockmodel"
)

// TestClaudeCodeWorksInASession is the real client: the Claude Code CLI
// (from the agents image, in a container of its own standing in for the
// user's machine) is configured with `airlock mcp` as an MCP server, and
// the mock model tells it to write a file with Airlock's write_file tool.
// The file must be in the session's diff and not in the project.
func TestClaudeCodeWorksInASession(t *testing.T) {
	d := enginetest.Require(t)
	enginetest.TinyImage(t, d)
	agents := enginetest.AgentsImage(t, d)
	e := newEngineEnv(t)
	p := sampleProject(t)

	// Start the engine from the host (the container must not start one).
	start := exec.Command(e.bin, "ls")
	start.Env = e.env
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("airlock ls: %v\n%s", err, out)
	}

	model, base := enginetest.Model(t, d,
		mockmodel.Reply{Tool: "mcp__airlock__write_file", Input: map[string]any{"path": "notes/hello.txt", "content": "written through MCP\n"}},
		mockmodel.Reply{Tool: "mcp__airlock__run_command", Input: map[string]any{"argv": []string{"cat", "notes/hello.txt"}}},
		mockmodel.Reply{Text: "Wrote notes/hello.txt in the Airlock session."},
	)
	ca := filepath.Join(t.TempDir(), "model-ca.pem")
	if err := os.WriteFile(ca, enginetest.ModelCA(), 0o644); err != nil {
		t.Fatal(err)
	}
	mcpConfig, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"airlock": map[string]any{
		"command": "/usr/local/bin/airlock",
		"args":    []string{"mcp", "--engine", e.socket, "--project", p, "--image", enginetest.Image},
	}}})
	sockDir := filepath.Dir(e.socket)
	cmd := exec.Command("docker", "run", "--rm",
		"-v", e.bin+":/usr/local/bin/airlock:ro", "-v", sockDir+":"+sockDir, "-v", ca+":/model-ca.pem:ro",
		"-e", "ANTHROPIC_BASE_URL="+base, "-e", "ANTHROPIC_API_KEY=sk-mcp-test", "-e", "NODE_EXTRA_CA_CERTS=/model-ca.pem",
		"-e", "IS_SANDBOX=1", "-e", "DISABLE_AUTOUPDATER=1", "-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "-e", "DISABLE_TELEMETRY=1",
		agents, "claude", "-p", "Write notes/hello.txt", "--output-format", "stream-json", "--verbose",
		"--strict-mcp-config", "--mcp-config", string(mcpConfig),
		"--allowedTools", "mcp__airlock__write_file,mcp__airlock__run_command")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, out)
	}

	// Claude Code lists the MCP tools it loaded in its first line (it
	// offers them to the model through its tool search, not up front).
	var init struct {
		Tools      []string
		MCPServers []struct{ Name, Status string } `json:"mcp_servers"`
	}
	json.Unmarshal([]byte(strings.SplitN(string(out), "\n", 2)[0]), &init)
	if !slices.Contains(init.Tools, "mcp__airlock__write_file") || !slices.Contains(init.Tools, "mcp__airlock__run_command") ||
		len(init.MCPServers) != 1 || init.MCPServers[0].Status != "connected" {
		t.Fatalf("Claude Code did not load Airlock's tools: %+v\n%s", init, out)
	}
	if model.Pending() != 0 {
		t.Errorf("%d scripted replies left: Claude Code did not go through the script\n%s", model.Pending(), out)
	}
	var results []string
	for _, line := range strings.Split(string(out), "\n") {
		var msg struct {
			Type    string
			Message struct {
				Content []struct {
					Type    string
					IsError bool `json:"is_error"`
					Content any
				}
			}
		}
		if json.Unmarshal([]byte(line), &msg) != nil || msg.Type != "user" {
			continue
		}
		for _, c := range msg.Message.Content {
			if c.Type == "tool_result" {
				b, _ := json.Marshal(c.Content)
				if c.IsError {
					t.Errorf("a tool call failed: %s", b)
				}
				results = append(results, string(b))
			}
		}
	}
	if len(results) != 2 || !strings.Contains(results[1], "written through MCP") {
		t.Errorf("tool results %q; want write_file's and run_command's showing the file\n%s", results, out)
	}

	cl := client.New(e.socket)
	ctx := context.Background()
	sessions, err := cl.Sessions(ctx)
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions: %v %v; want the one airlock mcp made", sessions, err)
	}
	diff, err := cl.DiffStat(ctx, sessions[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, s := range diff.Stats {
		changed = append(changed, s.Path)
	}
	if !slices.Equal(changed, []string{"notes/hello.txt"}) || sessions[0].Project != p {
		t.Errorf("session %s over %s changed %v; want notes/hello.txt over %s", sessions[0].ID, sessions[0].Project, changed, p)
	}
	if _, err := os.Stat(filepath.Join(p, "notes")); !os.IsNotExist(err) {
		t.Errorf("the file reached the project: %v", err)
	}
}
