package main_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock/airlock/audit"
	"github.com/airlock/airlock/ci"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/harness/mockmodel"
)

// readBundle returns an audit bundle's index and patch.
func readBundle(t *testing.T, file string) (audit.Index, string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("no audit bundle: %v", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var ix audit.Index
	patch := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		switch h.Name {
		case audit.IndexName:
			if err := json.Unmarshal(b, &ix); err != nil {
				t.Fatal(err)
			}
		case audit.PatchName:
			patch = string(b)
		}
	}
	if ix.Schema != audit.Schema {
		t.Fatalf("index schema %q", ix.Schema)
	}
	return ix, patch
}

// hasCheckpoint tells whether the bundle lists checkpoint id (any, for
// 0) that is as ok says.
func hasCheckpoint(ix audit.Index, id int64, ok ...func(audit.Checkpoint) bool) bool {
	for _, c := range ix.Checkpoints {
		if (id == 0 || c.ID == id) && (len(ok) == 0 || ok[0](c)) {
			return true
		}
	}
	return false
}

// The audit bundle of a session (airlock audit) and of a ci run (beside
// verdict.json), and the saved per-project policy new sessions start
// from, with the real binary, daemon and Docker.
func TestAuditAndSavedPolicy(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	p := sampleProject(t)

	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--allow", "example.org", "--",
		"sh", "-c", "echo hi > hello.txt; printf 'GET http://198.51.100.7/x HTTP/1.0\\r\\n\\r\\n' | nc -w 3 $(ip route | awk '/default/{print $3}') 3128; exit 3")
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("run did not print the session id: %q", errs)
	}
	id := m[1]
	file := filepath.Join(t.TempDir(), "run.tar.gz")
	c.ok("audit", id, "-o", file)
	ix, patch := readBundle(t, file)
	if ix.Session.ID != id || ix.Policy == nil || !strings.Contains(strings.Join(ix.Policy.Allow, " "), "example.org") {
		t.Errorf("the bundle's session and policy: %+v %+v", ix.Session, ix.Policy)
	}
	if len(ix.Commands) != 1 || ix.Commands[0].ExitCode == nil || *ix.Commands[0].ExitCode != 3 || !strings.HasPrefix(ix.Commands[0].OutputSHA256, "sha256:") {
		t.Errorf("the bundle's commands: %+v", ix.Commands)
	}
	blocked := false
	for _, e := range ix.Connections {
		blocked = blocked || (!e.Allowed && e.Host == "198.51.100.7" && e.Method == "GET" && e.Path == "/x" && e.Rule != "")
	}
	if !blocked {
		t.Errorf("the bundle's connections lack the blocked one: %+v", ix.Connections)
	}
	if !strings.Contains(patch, "+hi") || len(ix.Patch.Files) != 1 || ix.Patch.Files[0].Path != "hello.txt" || len(ix.Patch.Files[0].Hunks) != 1 {
		t.Errorf("the bundle's patch: %+v\n%s", ix.Patch, patch)
	}
	if pr := ix.Patch.Files[0].Hunks[0].Producer; len(ix.Commands) == 1 && (pr == nil || pr.Kind != "command" || pr.Command != ix.Commands[0].ID || !hasCheckpoint(ix, pr.Checkpoint)) {
		t.Errorf("hello.txt's hunk was produced by %+v, want command %d's checkpoint of %+v", pr, ix.Commands[0].ID, ix.Checkpoints)
	}

	// policy save: into the project's file, beside its accept policy; the
	// project's next session starts from it.
	os.MkdirAll(filepath.Join(p, ".airlock"), 0o755)
	os.WriteFile(filepath.Join(p, ".airlock/policy.yaml"), []byte("hold: [\"docs/**\"] # reviewed by hand\n"), 0o644)
	c.ok("policy", id, "--net", "ask", "--allow", "docs.example.org", "--ask-timeout", "45s")
	out := c.ok("policy", "save", id)
	if !strings.Contains(out, ".airlock/policy.yaml") {
		t.Errorf("policy save says %q", out)
	}
	b, _ := os.ReadFile(filepath.Join(p, ".airlock/policy.yaml"))
	for _, want := range []string{"# reviewed by hand", "egress:", "mode: ask", "docs.example.org", "ask_timeout: 45s"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the saved file lacks %q:\n%s", want, b)
		}
	}
	_, _, errs = c.run("run", "--project", p, "--image", enginetest.Image, "--", "true")
	if m = sessionLine.FindStringSubmatch(errs); m == nil {
		t.Fatalf("second run: %q", errs)
	}
	if pol := c.ok("policy", m[1]); !strings.Contains(pol, "mode: ask") || !strings.Contains(pol, "docs.example.org") || !strings.Contains(pol, "ask timeout: 45s") {
		t.Errorf("the project's next session starts with:\n%s", pol)
	}

	// airlock ci writes the bundle beside verdict.json: here of an agent's
	// turn (the custom agent, scripted), whose hunk is traced to its edit.
	c.stopEngine()
	outDir := filepath.Join(t.TempDir(), "out")
	agent := `echo '{"type":"tool_call","tool":"Write","input":"fix.txt"}'; echo fixed > fix.txt; echo '{"type":"file_edit","path":"fix.txt"}'; ` +
		`echo '{"type":"tool_call","tool":"Bash","input":"make"}'; echo '{"type":"command","command":"make","exit_code":0}'; echo '{"type":"message","text":"done"}' #{prompt}`
	c.run("ci", "--project", p, "--image", enginetest.Image, "--out", outDir, "--agent", "custom", "--events", "jsonl", "--cmd", agent, "--prompt", "fix it")
	v := readVerdict(t, outDir)
	if v.Audit != ci.AuditFile {
		t.Fatalf("verdict's audit %q, want %q (%s)", v.Audit, ci.AuditFile, v.Message)
	}
	cix, _ := readBundle(t, filepath.Join(outDir, ci.AuditFile))
	if cix.Session.ID != v.Session || len(cix.Commands) == 0 || len(cix.Turns) != 1 {
		t.Fatalf("ci's bundle: %+v", cix)
	}
	var types []string
	edit := 0
	for _, call := range cix.Turns[0].Calls {
		types = append(types, call.Type)
		if call.Type == "file_edit" && call.Path == "fix.txt" {
			edit = call.Seq
		}
	}
	if strings.Join(types, " ") != "tool_call file_edit tool_call command" {
		t.Errorf("the turn's calls: %v", types)
	}
	if len(cix.Patch.Files) != 1 || cix.Patch.Files[0].Path != "fix.txt" || len(cix.Patch.Files[0].Hunks) != 1 {
		t.Fatalf("ci's patch: %+v", cix.Patch)
	}
	if pr := cix.Patch.Files[0].Hunks[0].Producer; pr == nil || pr.Turn != 1 || pr.Seq != edit || !hasCheckpoint(cix, pr.Checkpoint) {
		t.Errorf("ci's hunk was produced by %+v; want turn 1's edit (seq %d) and a checkpoint of %+v", pr, edit, cix.Checkpoints)
	}
	if !hasCheckpoint(cix, 0, func(c audit.Checkpoint) bool { return c.Kind == "turn" && c.Turn == 1 && c.Files == 1 && c.Added == 1 }) {
		t.Errorf("ci's checkpoints lack turn 1's: %+v", cix.Checkpoints)
	}
	if cix.Policy == nil || cix.Policy.Mode != "ask" {
		t.Errorf("ci's session did not start from the project's saved policy: %+v", cix.Policy)
	}
}

// keyAbsent fails t when the bytes of key are in the bundle, compressed
// or not.
func keyAbsent(t *testing.T, file, key string) {
	t.Helper()
	raw, _ := os.ReadFile(file)
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tarBytes, _ := io.ReadAll(gz)
	for _, b := range [][]byte{raw, tarBytes} {
		if bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte(key[3:])) {
			t.Errorf("the key's value is in the bundle %s", file)
		}
	}
}

// The audit bundle of a real agent run: Claude Code against the mock
// model, two turns (a file written, a command that writes another, the
// first file rewritten), and a command of the user's; then a turn under
// airlock ci, whose bundle beside verdict.json says the same. The bundle lists
// every tool call the CLI reported, every connection (the model's with its
// rule), the key's use by name and host and never its value, every
// checkpoint, and traces every hunk of changes.patch to the turn (and the
// turn's edit of the file) or the command that produced it.
func TestAuditOfARealAgentRun(t *testing.T) {
	c := newCLI(t)
	c.env = append(c.env, "AIRLOCK_CONFIG="+enginetest.ModelConfig(t)) // trust the mock model's TLS
	d := enginetest.Require(t)
	image := enginetest.AgentsImage(t, d)
	model, base := enginetest.Model(t, d,
		mockmodel.Reply{Tool: "Write", Input: map[string]any{"file_path": "/workspace/notes.md", "content": "# notes\n"}},
		mockmodel.Reply{Tool: "Bash", Input: map[string]any{"command": "echo built > build.txt"}},
		mockmodel.Reply{Text: "Turn one is done."},
		mockmodel.Reply{Tool: "Write", Input: map[string]any{"file_path": "/workspace/notes.md", "content": "# notes\nmore\n"}},
		mockmodel.Reply{Text: "Turn two is done."},
	)
	c.env = append(c.env, "ANTHROPIC_BASE_URL="+base)
	const key = "sk-audit-9f3c1e7a5b2d4c6e8a0b"
	set := exec.Command(c.bin, "secret", "set", "ANTHROPIC_API_KEY")
	set.Env, set.Stdin = c.env, strings.NewReader(key+"\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secret set: %v: %s", err, out)
	}
	p := sampleProject(t)

	// The tool calls the CLI reported, turn by turn.
	calls := map[int][]string{}
	events := func(turn int, out string) {
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var ev api.Event
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "tool_call" {
				calls[turn] = append(calls[turn], ev.Tool)
			}
		}
	}
	events(1, c.ok("run", "--project", p, "--agent", "claude", "--prompt", "write notes.md and build", "--json"))
	id := strings.Fields(c.ok("ls", "-q"))[0]
	events(2, c.ok("agent", id, "add to the notes", "--json"))
	c.ok("exec", id, "--", "sh", "-c", "echo by hand > hand.txt")
	if r := model.Requests(); r[len(r)-1].APIKey != key {
		t.Fatalf("the stored key did not reach the model")
	}

	file := filepath.Join(t.TempDir(), "run.tar.gz")
	c.ok("audit", id, "-o", file)
	ix, patch := readBundle(t, file)

	// Every tool call, in its turn.
	if len(ix.Turns) != 2 {
		t.Fatalf("the bundle's turns: %+v", ix.Turns)
	}
	editSeq := map[int]int{} // turn -> seq of its file_edit of notes.md
	for _, tu := range ix.Turns {
		var tools []string
		for _, call := range tu.Calls {
			if call.Type == "tool_call" {
				tools = append(tools, call.Tool)
			}
			if call.Type == "file_edit" && call.Path == "notes.md" {
				editSeq[tu.N] = call.Seq
			}
		}
		if strings.Join(tools, " ") != strings.Join(calls[tu.N], " ") {
			t.Errorf("turn %d's tool calls in the bundle %v, the CLI reported %v", tu.N, tools, calls[tu.N])
		}
	}
	if strings.Join(calls[1], " ") != "Write Bash" || strings.Join(calls[2], " ") != "Write" || editSeq[1] == 0 || editSeq[2] == 0 {
		t.Errorf("the agent's calls: %v, notes.md edited at %v", calls, editSeq)
	}

	// Every connection (as net log lists them), the model's allowed.
	var logged int
	for _, line := range strings.Split(strings.TrimSpace(c.ok("net", "log", id, "--json")), "\n") {
		if line != "" {
			logged++
		}
	}
	modelHost := strings.TrimPrefix(base, "https://")
	host, port, _ := net.SplitHostPort(modelHost)
	toModel := 0
	for _, e := range ix.Connections {
		if e.Host == host && strconv.Itoa(e.Port) == port && e.Allowed && e.Rule != "" {
			toModel++
		}
	}
	if len(ix.Connections) < logged || toModel == 0 {
		t.Errorf("the bundle's %d connections (net log has %d), %d to the model at %s: %+v", len(ix.Connections), logged, toModel, modelHost, ix.Connections)
	}

	// The key: its name and host, never its value.
	if len(ix.Secrets) != 1 || ix.Secrets[0].Name != "ANTHROPIC_API_KEY" || ix.Secrets[0].Host != modelHost || ix.Secrets[0].Connections == 0 {
		t.Errorf("the bundle's secrets: %+v, want ANTHROPIC_API_KEY for %s", ix.Secrets, modelHost)
	}
	keyAbsent(t, file, key)

	// Every checkpoint: both turns' and the command's.
	cmdID := int64(0)
	for _, cm := range ix.Commands {
		if strings.Contains(strings.Join(cm.Argv, " "), "hand.txt") {
			cmdID = cm.ID
		}
	}
	for _, want := range []struct {
		what string
		ok   func(audit.Checkpoint) bool
	}{
		{"turn 1", func(c audit.Checkpoint) bool { return c.Kind == "turn" && c.Turn == 1 && c.Files == 2 }},
		{"turn 2", func(c audit.Checkpoint) bool { return c.Kind == "turn" && c.Turn == 2 && c.Files == 1 }},
		{"the command", func(c audit.Checkpoint) bool { return c.Kind == "command" && c.Command == cmdID && cmdID != 0 }},
	} {
		if !hasCheckpoint(ix, 0, want.ok) {
			t.Errorf("no checkpoint of %s in %+v", want.what, ix.Checkpoints)
		}
	}

	// Every hunk of changes.patch, traced.
	if n := strings.Count(patch, "\n@@ "); n != 3 {
		t.Fatalf("changes.patch has %d hunks, want 3 (notes.md, build.txt, hand.txt):\n%s", n, patch)
	}
	want := map[string]audit.Producer{
		"notes.md":  {Kind: "turn", Turn: 2, Seq: editSeq[2]}, // its last line came in turn 2, by its Write
		"build.txt": {Kind: "turn", Turn: 1},                  // by the turn's Bash: no edit names it
		"hand.txt":  {Kind: "command", Command: cmdID},
	}
	hunks := 0
	for _, f := range ix.Patch.Files {
		for _, h := range f.Hunks {
			hunks++
			pr := h.Producer
			if pr == nil || !hasCheckpoint(ix, pr.Checkpoint) {
				t.Errorf("%s %s: producer %+v names no checkpoint of the bundle", f.Path, h.Header, pr)
				continue
			}
			got := audit.Producer{Kind: pr.Kind, Turn: pr.Turn, Seq: pr.Seq, Command: pr.Command}
			if got != want[f.Path] || (f.Path == "notes.md") != (pr.Tool == "Write" && pr.Call != "" && pr.Match == "text") {
				t.Errorf("%s %s was produced by %+v, want %+v", f.Path, h.Header, got, want[f.Path])
			}
		}
	}
	if hunks != 3 {
		t.Errorf("the index lists %d hunks, changes.patch has 3: %+v", hunks, ix.Patch.Files)
	}

	// airlock ci: its own engine, the key from the environment; the
	// bundle beside verdict.json lists and traces the same.
	c.stopEngine()
	model.Push(
		mockmodel.Reply{Tool: "Write", Input: map[string]any{"file_path": "/workspace/fix.md", "content": "fixed\n"}},
		mockmodel.Reply{Tool: "Bash", Input: map[string]any{"command": "echo made > made.txt"}},
		mockmodel.Reply{Text: "Fixed."},
	)
	c.env = append(c.env, "ANTHROPIC_API_KEY="+key)
	outDir := filepath.Join(t.TempDir(), "out")
	_, _, ciErr := c.run("ci", "--project", sampleProject(t), "--out", outDir, "--image", image, "--agent", "claude", "--prompt", "fix it")
	v := readVerdict(t, outDir)
	if v.Audit != ci.AuditFile {
		t.Fatalf("verdict's audit %q, want %q (%s)", v.Audit, ci.AuditFile, v.Message)
	}
	cfile := filepath.Join(outDir, ci.AuditFile)
	cix, _ := readBundle(t, cfile)
	keyAbsent(t, cfile, key)
	if len(cix.Turns) != 1 {
		t.Fatalf("ci's turns: %+v; verdict %+v\n%s", cix.Turns, v, ciErr)
	}
	var tools []string
	fixSeq := 0
	for _, call := range cix.Turns[0].Calls {
		if call.Type == "tool_call" {
			tools = append(tools, call.Tool)
		}
		if call.Type == "file_edit" && call.Path == "fix.md" {
			fixSeq = call.Seq
		}
	}
	if strings.Join(tools, " ") != "Write Bash" || fixSeq == 0 {
		t.Errorf("ci's tool calls %v, fix.md edited at %d", tools, fixSeq)
	}
	toModel = 0
	for _, e := range cix.Connections {
		if e.Host == host && strconv.Itoa(e.Port) == port && e.Allowed && e.Rule != "" {
			toModel++
		}
	}
	if toModel == 0 || len(cix.Secrets) != 1 || cix.Secrets[0].Name != "ANTHROPIC_API_KEY" || cix.Secrets[0].Host != modelHost || cix.Secrets[0].Connections == 0 {
		t.Errorf("ci's connections to the model %d, secrets %+v", toModel, cix.Secrets)
	}
	if !hasCheckpoint(cix, 0, func(c audit.Checkpoint) bool { return c.Kind == "turn" && c.Turn == 1 && c.Files == 2 }) {
		t.Errorf("ci's checkpoints lack the turn's: %+v", cix.Checkpoints)
	}
	want = map[string]audit.Producer{"fix.md": {Kind: "turn", Turn: 1, Seq: fixSeq}, "made.txt": {Kind: "turn", Turn: 1}}
	hunks = 0
	for _, f := range cix.Patch.Files {
		for _, h := range f.Hunks {
			hunks++
			if pr := h.Producer; pr == nil || !hasCheckpoint(cix, pr.Checkpoint) ||
				(audit.Producer{Kind: pr.Kind, Turn: pr.Turn, Seq: pr.Seq, Command: pr.Command}) != want[f.Path] {
				t.Errorf("ci's %s %s was produced by %+v, want %+v", f.Path, h.Header, pr, want[f.Path])
			}
		}
	}
	if hunks != 2 {
		t.Errorf("ci's patch has %d hunks, want 2: %+v", hunks, cix.Patch.Files)
	}
}
