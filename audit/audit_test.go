package audit

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// fakeSource is one session: a command, two agent turns that edit a.go
// (twice each), connections, a snapshot, checkpoints, and a patch whose
// hunks the blame traces to turn 1, to a periodic checkpoint taken during
// turn 2, and to the command. untracked: a session from before the
// timeline (no checkpoints, a blame that names none).
type fakeSource struct{ untracked bool }

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func (fakeSource) Get(_ context.Context, id string) (api.Session, error) {
	return api.Session{ID: id, Project: "/p", Image: "airlock/base", Created: t0, State: "running", Agent: "claude",
		Egress: &api.EgressPolicy{Mode: "custom", Allow: []string{"api.example.com"},
			Inject: []string{"api.example.com:x-api-key=secret:API_KEY", "*.models.test:authorization=Bearer secret:TOKEN"}}}, nil
}

func (fakeSource) Commands(_ context.Context, id string, withOutput bool) ([]api.Command, error) {
	if !withOutput {
		panic("the bundle digests the output: ask for it")
	}
	return []api.Command{{ID: 1, Session: id, Argv: []string{"make", "test"}, User: "1000:1000", Started: t0, Ended: ptr(t0.Add(time.Second)),
		ExitCode: ptr(2), State: "exited", Output: "FAIL\n"}}, nil
}

func (fakeSource) Turns(_ context.Context, id string) ([]api.Turn, error) {
	return []api.Turn{
		{Session: id, N: 1, Agent: "claude", Prompt: "fix it", State: "done", Started: t0, Ended: ptr(t0.Add(time.Minute)), ExitCode: ptr(0)},
		{Session: id, N: 2, Agent: "claude", Prompt: "more", State: "done", Started: t0.Add(2 * time.Minute), Ended: ptr(t0.Add(3 * time.Minute)), ExitCode: ptr(0)},
	}, nil
}

func (fakeSource) Events(_ context.Context, _ string, turn int) ([]api.Event, error) {
	return []api.Event{
		{Type: api.EventMessage, Turn: turn, Text: "looking"},
		{Type: api.EventToolCall, Turn: turn, Tool: "Write", Input: "a.go"},
		{Type: api.EventFileEdit, Turn: turn, Path: "a.go"},
		{Type: api.EventToolCall, Turn: turn, Tool: "Bash", Input: "go build"},
		{Type: api.EventCommand, Turn: turn, Command: "go build", ExitCode: ptr(0)},
		{Type: api.EventFileEdit, Turn: turn, Path: "/workspace/a.go"},
	}, nil
}

func (fakeSource) EgressLog(context.Context, string, bool, int) ([]api.EgressEntry, error) {
	return []api.EgressEntry{
		{ID: 1, Kind: "https", Host: "api.example.com", Port: 443, Method: "POST", Path: "/v1/x", Allowed: true, Rule: "api.example.com"},
		{ID: 2, Kind: "connect", Host: "evil.test", Port: 443, Rule: "custom", Reason: "no rule allows evil.test"},
	}, nil
}

func (fakeSource) Snapshots(context.Context) ([]api.Snapshot, error) {
	return []api.Snapshot{{ID: "snap1", Session: "s1", Created: t0, Digest: "sha256:aa"}, {ID: "other", Session: "s2"}}, nil
}

const testPatch = `diff --git a/a.go b/a.go
--- a/a.go
+++ b/a.go
@@ -1,1 +1,1 @@
-package a
+package b
@@ -9,1 +9,2 @@
 x
+y
diff --git a/gen.txt b/gen.txt
new file mode 100644
--- /dev/null
+++ b/gen.txt
@@ -0,0 +1 @@
+generated
`

func (f fakeSource) Checkpoints(context.Context, string) ([]api.Checkpoint, error) {
	if f.untracked {
		return nil, nil
	}
	return []api.Checkpoint{
		{ID: 1, Kind: api.CheckpointCommand, Command: 1, Time: t0.Add(time.Second), Files: 1, Added: 1},
		{ID: 2, Kind: api.CheckpointTurn, Turn: 1, Time: t0.Add(time.Minute), From: 1, Files: 1, Added: 1, Removed: 1},
		{ID: 3, Kind: api.CheckpointPeriodic, Time: t0.Add(150 * time.Second), From: 2, Files: 1, Added: 1},
		{ID: 4, Kind: api.CheckpointTurn, Turn: 2, Time: t0.Add(3 * time.Minute), From: 3},
	}, nil
}

func (f fakeSource) Blame(_ context.Context, id string, _ []string) (api.Blame, error) {
	b := api.Blame{Session: id, Diff: api.Diff{Files: []api.FileDiff{
		{Change: api.Change{Path: "a.go"}, Hunks: []api.Hunk{{ID: "h1", OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 1}, {ID: "h2", OldStart: 9, OldLines: 1, NewStart: 9, NewLines: 2}}},
		{Change: api.Change{Path: "gen.txt"}, Hunks: []api.Hunk{{ID: "h3", NewStart: 1, NewLines: 1}}},
	}}}
	b.Hunks = []api.HunkBlame{
		// The engine's blame names the turn's call, and the turn running
		// when a periodic checkpoint was taken.
		{Path: "a.go", Hunk: "h1", NewStart: 1, Checkpoint: 2, Kind: api.CheckpointTurn, Turn: 1,
			Call: &api.BlameCall{Seq: 6, ID: "toolu_6", Tool: "Edit", Match: api.BlameMatchText, Edits: 2}},
		{Path: "a.go", Hunk: "h2", NewStart: 9, Checkpoint: 3, Kind: api.CheckpointPeriodic, Turn: 2,
			Call: &api.BlameCall{Seq: 6, ID: "toolu_9", Tool: "Write", Match: api.BlameMatchLast, Edits: 1}},
		{Path: "gen.txt", Hunk: "h3", NewStart: 1, Checkpoint: 1, Kind: api.CheckpointCommand, Command: 1},
	}
	if f.untracked {
		for i := range b.Hunks {
			b.Hunks[i] = api.HunkBlame{Path: b.Hunks[i].Path, Hunk: b.Hunks[i].Hunk, NewStart: b.Hunks[i].NewStart}
		}
	}
	return b, nil
}

func (fakeSource) Patch(_ context.Context, _ string, _ []string, w io.Writer) error {
	_, err := io.WriteString(w, testPatch)
	return err
}

// The bundle holds the index and the patch; the index lists every
// command, tool call, connection (with its decision) and secret use, and
// maps each hunk to the call that produced it.
func TestBundle(t *testing.T) {
	var buf bytes.Buffer
	ix, err := Write(context.Background(), fakeSource{}, "s1", &buf)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, buf.Bytes())
	if files[PatchName] != testPatch {
		t.Errorf("the bundle's patch:\n%s", files[PatchName])
	}
	var got Index
	if err := json.Unmarshal([]byte(files[IndexName]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Schema != Schema || got.Session.ID != "s1" || got.Policy == nil || got.Policy.Mode != "custom" {
		t.Errorf("index head: %+v", got)
	}
	if len(got.Commands) != 1 || *got.Commands[0].ExitCode != 2 || got.Commands[0].OutputSHA256 != digest("FAIL\n") || got.Commands[0].OutputBytes != 5 {
		t.Errorf("commands: %+v", got.Commands)
	}
	if len(got.Turns) != 2 || len(got.Turns[0].Calls) != 5 || got.Turns[0].PromptSHA != digest("fix it") {
		t.Fatalf("turns: %+v", got.Turns)
	}
	if c := got.Turns[0].Calls[3]; c.Type != api.EventCommand || c.Seq != 5 || c.ExitCode == nil || *c.ExitCode != 0 {
		t.Errorf("the agent's command: %+v", c)
	}
	if len(got.Connections) != 2 || got.Connections[1].Allowed || got.Connections[1].Reason == "" || got.Connections[0].Method != "POST" {
		t.Errorf("connections: %+v", got.Connections)
	}
	wantSecrets := []SecretUse{{Name: "API_KEY", Host: "api.example.com", Header: "x-api-key", Connections: 1}, {Name: "TOKEN", Host: "*.models.test", Header: "authorization"}}
	if len(got.Secrets) != 2 || got.Secrets[0] != wantSecrets[0] || got.Secrets[1] != wantSecrets[1] {
		t.Errorf("secrets: %+v, want %+v", got.Secrets, wantSecrets)
	}
	if len(got.Snapshots) != 1 || got.Snapshots[0].ID != "snap1" {
		t.Errorf("snapshots: %+v", got.Snapshots)
	}
	p := got.Patch
	if p.File != PatchName || p.SHA256 != digest(testPatch) || len(p.Files) != 2 {
		t.Fatalf("patch: %+v", p)
	}
	if len(got.Checkpoints) != 4 || got.Checkpoints[1] != (Checkpoint{ID: 2, Kind: "turn", Turn: 1, Time: t0.Add(time.Minute), From: 1, Files: 1, Added: 1, Removed: 1}) {
		t.Errorf("checkpoints: %+v", got.Checkpoints)
	}
	a, gen := p.Files[0], p.Files[1]
	if a.Path != "a.go" || len(a.Hunks) != 2 || len(a.EditedBy) != 4 || a.Hunks[0].Header != "@@ -1,1 +1,1 @@" || a.Hunks[0].SHA256 == a.Hunks[1].SHA256 {
		t.Fatalf("a.go: %+v", a)
	}
	for _, tc := range []struct {
		what string
		got  *Producer
		want Producer
	}{
		{"a turn's hunk: the call blame names", a.Hunks[0].Producer, Producer{Checkpoint: 2, Kind: "turn", Turn: 1, Seq: 6, Call: "toolu_6", Tool: "Edit", Match: "text"}},
		{"a periodic checkpoint's hunk: the turn running then", a.Hunks[1].Producer, Producer{Checkpoint: 3, Kind: "periodic", Turn: 2, Seq: 6, Call: "toolu_9", Tool: "Write", Match: "last"}},
		{"a command's hunk", gen.Hunks[0].Producer, Producer{Checkpoint: 1, Kind: "command", Command: 1}},
	} {
		if tc.got == nil || *tc.got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.what, tc.got, tc.want)
		}
	}
	if gen.Path != "gen.txt" || len(gen.Hunks) != 1 || len(gen.EditedBy) != 0 {
		t.Errorf("gen.txt: %+v", gen)
	}
	if ix.Patch.SHA256 != p.SHA256 {
		t.Errorf("Write's index and the bundle's differ")
	}
}

// A session without checkpoints (from before the timeline): hunks are
// attributed by file, to the last call that edited it; a file no edit
// names has no producer.
func TestBundleWithoutTimeline(t *testing.T) {
	var buf bytes.Buffer
	ix, err := Write(context.Background(), fakeSource{untracked: true}, "s1", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Checkpoints) != 0 || len(ix.Patch.Files) != 2 {
		t.Fatalf("index: %+v", ix)
	}
	a, gen := ix.Patch.Files[0], ix.Patch.Files[1]
	for _, h := range a.Hunks {
		if h.Producer == nil || *h.Producer != (Producer{Turn: 2, Seq: 6, Match: "last"}) {
			t.Errorf("a.go's hunk %s: %+v, want turn 2's last edit", h.Header, h.Producer)
		}
	}
	if gen.Hunks[0].Producer != nil {
		t.Errorf("gen.txt's hunk: %+v, want none", gen.Hunks[0].Producer)
	}
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(tr)
		out[h.Name] = string(c)
	}
}

// A patch's hunk headers match the blame's hunks by their numbers,
// however the counts are written.
func TestHunkRange(t *testing.T) {
	for _, tc := range []struct{ header, want string }{
		{"@@ -1,3 +1,4 @@", "1 3 1 4"},
		{"@@ -0,0 +1 @@", "0 0 1 1"},
		{"@@ -5,2 +4,0 @@ func f()", "5 2 4 0"},
		{"@@ -x +1 @@", ""},
		{"@@ garbage", ""},
	} {
		if got := hunkRange(tc.header); got != tc.want {
			t.Errorf("hunkRange(%q) = %q, want %q", tc.header, got, tc.want)
		}
	}
	h := api.Hunk{OldStart: 5, OldLines: 2, NewStart: 4}
	if got := blameByRange(api.Blame{Diff: api.Diff{Files: []api.FileDiff{{Change: api.Change{Path: "f"}, Hunks: []api.Hunk{{ID: "a", OldStart: 5, OldLines: 2, NewStart: 4}}}}},
		Hunks: []api.HunkBlame{{Path: "f", Hunk: "a", Checkpoint: 7}}}); got["f\x00"+hunkRange("@@ -5,2 +4,0 @@")].Checkpoint != 7 {
		t.Errorf("blame of %+v by range: %+v", h, got)
	}
}

// TestDiffPathQuoted: a name git quotes in the patch is the name itself in
// the index, not its quoted form.
func TestDiffPathQuoted(t *testing.T) {
	for line, want := range map[string]string{
		"diff --git a/src/x.go b/src/x.go":                   "src/x.go",
		`diff --git "a/x\n--- a\ta.txt" "b/x\n--- a\ta.txt"`: "x\n--- a\ta.txt",
		`diff --git "a/caf\303\251" "b/caf\303\251"`:         "caf\u00e9",
		`diff --git "a/esc\033[31mred" "b/esc\033[31mred"`:   "esc\x1b[31mred",
		`diff --git a/plain "b/uni\342\200\256gnp.exe"`:      "uni\u202egnp.exe",
	} {
		if got := diffPath(line); got != want {
			t.Errorf("diffPath(%q) = %q, want %q", line, got, want)
		}
	}
}
