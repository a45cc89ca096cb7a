package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// buildAirlock builds the real binary, once per test process.
var buildAirlock = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "airlock-mcp-test")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "airlock")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/airlock").CombinedOutput()
	if err != nil {
		return "", &buildError{err: err, out: string(out)}
	}
	return bin, nil
})

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// engineEnv is an engine of the test's own, which the first `airlock mcp`
// that needs it starts on demand (the CLI's own way), stopped at the end.
type engineEnv struct {
	bin    string
	env    []string
	socket string
}

func newEngineEnv(t *testing.T) *engineEnv {
	t.Helper()
	bin, err := buildAirlock()
	if err != nil {
		t.Fatalf("build airlock: %v", err)
	}
	dir := t.TempDir()
	e := &engineEnv{bin: bin, socket: filepath.Join(dir, "engine.sock")}
	e.env = append(os.Environ(), "AIRLOCK_ENGINE="+e.socket, "AIRLOCK_STATE_DIR="+filepath.Join(dir, "state"))
	t.Cleanup(func() { enginetest.StopDaemon(e.socket) })
	return e
}

// connect starts `airlock mcp ARGS...` and connects an MCP client to it
// over its standard input and output.
func (e *engineEnv) connect(t *testing.T, opts *sdk.ClientOptions, args ...string) *sdk.ClientSession {
	t.Helper()
	cmd := exec.Command(e.bin, append([]string{"mcp"}, args...)...)
	cmd.Env = e.env
	cmd.Stderr = &testLog{t: t}
	c := sdk.NewClient(&sdk.Implementation{Name: "airlock-test", Version: "0"}, opts)
	cs, err := c.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to airlock mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// testLog passes the server's standard error to the test's log.
type testLog struct {
	t  *testing.T
	mu sync.Mutex
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Logf("airlock mcp: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// call calls a tool and returns its text and structured result; a tool
// error fails the test unless wantErr.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	txt := resultText(res)
	if res.IsError {
		t.Fatalf("%s(%v) failed: %s", name, args, txt)
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	}
	return txt, out
}

// callErr calls a tool that must fail and returns the error's text.
func callErr(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded: %s; want a tool error", name, args, resultText(res))
	}
	return resultText(res)
}

func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func sampleProject(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "app")
	os.MkdirAll(filepath.Join(p, "src"), 0o755)
	os.WriteFile(filepath.Join(p, "README.md"), []byte("# app\n"), 0o644)
	os.WriteFile(filepath.Join(p, "src/app.py"), []byte("def greet():\n    return 'hello'\n"), 0o644)
	return p
}

// TestVersionNegotiation speaks raw JSON-RPC to the binary: a client
// asking for an older protocol version it supports gets that version, one
// asking for an unknown version gets the server's latest. No engine is
// needed to initialize: the server connects on the first tool call.
func TestVersionNegotiation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	bin, err := buildAirlock()
	if err != nil {
		t.Fatalf("build airlock: %v", err)
	}
	latest := sdk.SupportedProtocolVersions()[len(sdk.SupportedProtocolVersions())-1]
	for _, tc := range []struct{ ask, want string }{
		{"2024-11-05", "2024-11-05"},
		{"2025-06-18", "2025-06-18"},
		{"1999-01-01", ""}, // the server's choice: one it supports
	} {
		cmd := exec.Command(bin, "mcp", "--project", t.TempDir(), "--engine", filepath.Join(t.TempDir(), "none.sock"))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		req := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + tc.ask +
			`","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\n"
		stdin.Write([]byte(req))
		line, err := bufio.NewReader(stdout).ReadString('\n')
		stdin.Close()
		cmd.Wait()
		if err != nil {
			t.Fatalf("ask %s: no answer: %v", tc.ask, err)
		}
		var resp struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
				ServerInfo      struct{ Name string }
				Capabilities    struct{ Tools *struct{} }
			}
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil {
			t.Fatalf("ask %s: the answer is not JSON: %q", tc.ask, line)
		}
		got := resp.Result.ProtocolVersion
		if tc.want != "" && got != tc.want || tc.want == "" && !slices.Contains(sdk.SupportedProtocolVersions(), got) {
			t.Errorf("asked for %s, got %q (supported: %v, latest %s)", tc.ask, got, sdk.SupportedProtocolVersions(), latest)
		}
		if resp.Result.ServerInfo.Name != "airlock" || resp.Result.Capabilities.Tools == nil {
			t.Errorf("initialize answered %s: want server airlock with tools", line)
		}
	}
}

// TestTools drives every tool through the real binary against a real
// engine, and checks what the user would: the project untouched, the
// changes in the session's diff, errors that say what to do.
func TestTools(t *testing.T) {
	d := enginetest.Require(t)
	enginetest.TinyImage(t, d)
	e := newEngineEnv(t)
	p := sampleProject(t)

	var pmu sync.Mutex
	var progress []*sdk.ProgressNotificationParams
	gotProgress := make(chan struct{}, 100)
	cs := e.connect(t, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		pmu.Lock()
		progress = append(progress, r.Params)
		pmu.Unlock()
		gotProgress <- struct{}{}
	}}, "--project", p, "--image", enginetest.Image)

	var tools []string
	schemas := map[string]string{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		schemas[tool.Name] = string(b)
	}
	slices.Sort(tools)
	want := []string{"checkpoint_diff", "create_session", "diff", "list_checkpoints", "list_files", "list_snapshots", "read_file", "run_command", "session_info", "snapshot", "write_file"}
	if !slices.Equal(tools, want) {
		t.Fatalf("tools %v, want %v (accept only with --allow-accept)", tools, want)
	}
	if s := schemas["run_command"]; !strings.Contains(s, `"required":["argv"]`) || !strings.Contains(s, `"argv":{"description"`) {
		t.Errorf("run_command's input schema does not require argv: %s", s)
	}
	if s := schemas["create_session"]; !strings.Contains(s, `"enum":["allow-all","deny-all","custom"]`) {
		t.Errorf("create_session's schema does not list the network policies: %s", s)
	}
	if msg := callErr(t, cs, "run_command", map[string]any{"argv": "ls"}); !strings.Contains(msg, "argv") {
		t.Errorf("argv as a string: %q; want the schema's complaint about argv", msg)
	}

	t.Run("files", func(t *testing.T) {
		_, w := call(t, cs, "write_file", map[string]any{"path": "src/new/hello.py", "content": "print('hi')\n"})
		if w["path"] != "/workspace/src/new/hello.py" {
			t.Errorf("write_file wrote %v", w)
		}
		if txt, _ := call(t, cs, "read_file", map[string]any{"path": "/workspace/src/new/hello.py"}); txt != "print('hi')\n" {
			t.Errorf("read_file gave %q", txt)
		}
		call(t, cs, "write_file", map[string]any{"path": "src/new/hello.py", "content": "print('bye')\n", "append": true})
		if _, r := call(t, cs, "read_file", map[string]any{"path": "src/new/hello.py"}); r["content"] != "print('hi')\nprint('bye')\n" {
			t.Errorf("after append read_file gave %v", r)
		}
		if _, err := os.Stat(filepath.Join(p, "src/new/hello.py")); !os.IsNotExist(err) {
			t.Errorf("the file reached the project: %v", err)
		}
		_, l := call(t, cs, "list_files", map[string]any{"path": "src"})
		if got := l["entries"]; !slices.Equal(anyStrings(got), []string{"app.py", "new/"}) {
			t.Errorf("list_files src: %v", got)
		}
		// Names are arguments, never options or shell: a name that looks
		// like either is just a name.
		for _, name := range []string{"--help", "a;touch pwned", "$(touch pwned2)"} {
			call(t, cs, "write_file", map[string]any{"path": name, "content": "x"})
			if txt, _ := call(t, cs, "read_file", map[string]any{"path": name}); txt != "x" {
				t.Errorf("read_file %q gave %q", name, txt)
			}
		}
		_, l = call(t, cs, "list_files", nil)
		entries := anyStrings(l["entries"])
		for _, name := range []string{"--help", "a;touch pwned", "$(touch pwned2)", "README.md", "src/"} {
			if !slices.Contains(entries, name) {
				t.Errorf("list_files: %q missing from %v", name, entries)
			}
		}
		if slices.Contains(entries, "pwned") || slices.Contains(entries, "pwned2") {
			t.Errorf("a file name ran as a command: %v", entries)
		}
		for _, tc := range []struct {
			tool, path, says string
		}{
			{"read_file", "../etc/passwd", "outside the session's workspace"},
			{"read_file", "/etc/passwd", "outside the session's workspace"},
			{"write_file", "/workspace/../tmp/x", "outside the session's workspace"},
			{"list_files", "/", "outside the session's workspace"},
			{"read_file", "nosuch.txt", "No such file"},
			{"read_file", "src", "cannot read /workspace/src in session"},
			{"list_files", "nosuch", "cannot list /workspace/nosuch"},
		} {
			args := map[string]any{"path": tc.path}
			if tc.tool == "write_file" {
				args["content"] = "x"
			}
			if msg := callErr(t, cs, tc.tool, args); !strings.Contains(msg, tc.says) {
				t.Errorf("%s %q: %q; want it to say %q", tc.tool, tc.path, msg, tc.says)
			}
		}
	})

	t.Run("run_command", func(t *testing.T) {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_command", Meta: sdk.Meta{"progressToken": "run-1"},
			Arguments: map[string]any{"argv": []string{"sh", "-c", "echo one; sleep 1; echo two >&2; sleep 1; cat; exit 3"}, "stdin": "three\n"}})
		if err != nil || res.IsError {
			t.Fatalf("run_command: %v %s", err, resultText(res))
		}
		var out struct {
			ExitCode int    `json:"exit_code"`
			Output   string `json:"output"`
			Command  int64  `json:"command"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		if out.ExitCode != 3 || out.Output != "one\ntwo\nthree\n" || out.Command == 0 {
			t.Errorf("run_command gave %+v; want exit 3, the output and its command id", out)
		}
		select {
		case <-gotProgress:
		case <-time.After(30 * time.Second):
			t.Fatal("no progress notification for a command that printed as it ran")
		}
		pmu.Lock()
		first := *progress[0]
		pmu.Unlock()
		if first.ProgressToken != "run-1" || first.Message != "one" || first.Progress <= 0 {
			t.Errorf("the first progress notification is %+v; want token run-1, message \"one\"", first)
		}
		if msg := callErr(t, cs, "run_command", map[string]any{"argv": []string{"sleep", "30"}, "timeout_seconds": 1}); !strings.Contains(msg, "did not end within 1 s") {
			t.Errorf("a command past its timeout: %q", msg)
		}
	})

	t.Run("diff", func(t *testing.T) {
		txt, st := call(t, cs, "diff", map[string]any{"stat": true})
		if !strings.Contains(txt, "added     src/new/hello.py +2 -0") || st["patch"] != nil {
			t.Errorf("diff --stat:\n%s", txt)
		}
		txt, full := call(t, cs, "diff", map[string]any{"paths": []string{"src/new"}})
		patch, _ := full["patch"].(string)
		if !strings.Contains(patch, "+++ b/src/new/hello.py") || !strings.Contains(patch, "+print('bye')") || strings.Contains(txt, "--help") {
			t.Errorf("diff of src/new:\n%s", txt)
		}
		if msg := callErr(t, cs, "diff", map[string]any{"paths": []string{"../x"}}); !strings.Contains(msg, "outside") {
			t.Errorf("diff of ../x: %q", msg)
		}
		_, info := call(t, cs, "session_info", nil)
		if info["project"] != p || info["image"] != enginetest.Image || info["changed"].(float64) < 4 {
			t.Errorf("session_info: %v", info)
		}
	})

	t.Run("checkpoints", func(t *testing.T) {
		newest := func() (id float64, kind string) {
			_, list := call(t, cs, "list_checkpoints", nil)
			cps, _ := list["checkpoints"].([]any)
			if len(cps) == 0 {
				return 0, ""
			}
			m := cps[len(cps)-1].(map[string]any)
			id, _ = m["id"].(float64)
			kind, _ = m["kind"].(string)
			return id, kind
		}
		before, _ := newest()
		call(t, cs, "run_command", map[string]any{"argv": []string{"sh", "-c", "echo done > made.txt"}})
		// The command's checkpoint is recorded as it ends, in the background.
		made, kind := newest()
		for deadline := time.Now().Add(30 * time.Second); made == before && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			made, kind = newest()
		}
		if made == before || kind != "command" {
			t.Fatalf("list_checkpoints: newest %v (%s), %v before the command; want the command's checkpoint", made, kind, before)
		}
		_, d := call(t, cs, "checkpoint_diff", map[string]any{"checkpoint": made})
		if patch, _ := d["patch"].(string); !strings.Contains(patch, "+++ b/made.txt") || !strings.Contains(patch, "+done") {
			t.Errorf("checkpoint_diff of the command's checkpoint %v: %v", made, d)
		}
	})

	t.Run("snapshots", func(t *testing.T) {
		_, snap := call(t, cs, "snapshot", map[string]any{"name": "mcp-first"})
		_, list := call(t, cs, "list_snapshots", nil)
		snaps, _ := list["snapshots"].([]any)
		if len(snaps) != 1 || snaps[0].(map[string]any)["id"] != snap["id"] || snaps[0].(map[string]any)["name"] != "mcp-first" {
			t.Errorf("list_snapshots: %v; want the one taken, %v", list, snap)
		}
	})

	t.Run("accept", func(t *testing.T) {
		_, info := call(t, cs, "session_info", nil)
		id := info["session"].(string)
		call(t, cs, "write_file", map[string]any{"path": ".env", "content": "TOKEN=1\n"})                                              // held by default
		call(t, cs, "write_file", map[string]any{"path": "keys.txt", "content": "stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF\n"}) // flagged
		ac := e.connect(t, nil, "--session", id, "--allow-accept")
		_, res := call(t, ac, "accept", nil)
		accepted := anyStrings(res["accepted"])
		if !slices.Contains(accepted, "src/new/hello.py") || slices.Contains(accepted, ".env") || slices.Contains(accepted, "keys.txt") {
			t.Errorf("accepted %v", accepted)
		}
		left := map[string]string{}
		for _, l := range res["left"].([]any) {
			m := l.(map[string]any)
			left[m["path"].(string)] = m["why"].(string)
		}
		if left[".env"] != "held" || left["keys.txt"] != "flagged" {
			t.Errorf("left %v; want .env held and keys.txt flagged", left)
		}
		if b, err := os.ReadFile(filepath.Join(p, "src/new/hello.py")); string(b) != "print('hi')\nprint('bye')\n" {
			t.Errorf("the accepted file in the project: %q %v", b, err)
		}
		for _, f := range []string{".env", "keys.txt"} {
			if _, err := os.Stat(filepath.Join(p, f)); !os.IsNotExist(err) {
				t.Errorf("%s reached the project: %v", f, err)
			}
		}
		if _, made := call(t, ac, "create_session", nil); made["project"] != p || made["session"] == id {
			t.Errorf("create_session on a server started with --session only: %v; want a new session over %s", made, p)
		}
		other := e.connect(t, nil, "--session", id, "--project", t.TempDir())
		if msg := callErr(t, other, "session_info", nil); !strings.Contains(msg, "works on "+p) {
			t.Errorf("attaching to a session of another project: %q", msg)
		}
	})

	t.Run("engine errors", func(t *testing.T) {
		msg := callErr(t, cs, "create_session", map[string]any{"image": "airlock/nosuch"})
		if !strings.Contains(msg, "airlock/nosuch") || !strings.Contains(msg, "not available locally") {
			t.Errorf("a missing image: %q; want the engine's sentence naming it and what to do", msg)
		}
		_, created := call(t, cs, "create_session", map[string]any{"network": "deny-all"})
		if created["network"] != "deny-all" {
			t.Errorf("create_session with deny-all: %v", created)
		}
		if _, info := call(t, cs, "session_info", nil); info["session"] != created["session"] || info["changed"].(float64) != 0 {
			t.Errorf("after create_session the tools work in %v; want the new session %v", info, created["session"])
		}
	})
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
