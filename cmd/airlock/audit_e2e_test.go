package main_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/audit"
	"github.com/airlock/airlock/ci"
	"github.com/airlock/airlock/engine/enginetest"
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
