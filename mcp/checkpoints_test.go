package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// timelineEngine is an engine with one session and its timeline: two
// turns and a command between them.
type timelineEngine struct {
	Engine
	asked []api.CheckpointDiffQuery
}

func (f *timelineEngine) Session(_ context.Context, id string) (api.Session, error) {
	return api.Session{ID: id, State: api.StateRunning}, nil
}

func (f *timelineEngine) Checkpoints(context.Context, string) ([]api.Checkpoint, error) {
	at := time.Date(2026, 11, 25, 16, 0, 0, 0, time.UTC)
	return []api.Checkpoint{
		{ID: 1, Kind: api.CheckpointTurn, Turn: 1, Time: at, Files: 1, Added: 2},
		{ID: 2, Kind: api.CheckpointCommand, Command: 7, From: 1, Time: at.Add(time.Minute), Files: 1, Added: 1, Removed: 1},
		{ID: 3, Kind: api.CheckpointTurn, Turn: 2, From: 1, Time: at.Add(2 * time.Minute), Files: 2, Added: 3, Removed: 1},
	}, nil
}

func (f *timelineEngine) CheckpointDiff(_ context.Context, id string, q api.CheckpointDiffQuery) (api.Diff, error) {
	f.asked = append(f.asked, q)
	if q.Turn > 2 {
		return api.Diff{}, errdefs.NotFoundf("session %s has no turn %d", id, q.Turn)
	}
	return api.Diff{Session: id,
		Files: []api.FileDiff{
			{Change: api.Change{Path: "src/app.py", Kind: api.KindModified},
				Hunks: []api.Hunk{{OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 1, Lines: []string{"-old\n", "+new"}}}},
			{Change: api.Change{Path: "logo.png", Kind: api.KindAdded, Binary: true}},
		},
		Stats: []api.Stat{{Path: "src/app.py", Kind: api.KindModified, Added: 1, Removed: 1}, {Path: "logo.png", Kind: api.KindAdded, Binary: true}},
	}, nil
}

func connectFake(t *testing.T, eng Engine) *sdk.ClientSession {
	t.Helper()
	srv := New(func(context.Context) (Engine, error) { return eng, nil }, Options{Session: "s1"})
	st, ct := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	var out map[string]any
	if res.StructuredContent != nil {
		data, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(data, &out)
	}
	return b.String(), out, res.IsError
}

// TestCheckpointTools: the model lists the session's turns and commands
// with what each changed, and reads one turn's or one checkpoint's diff.
func TestCheckpointTools(t *testing.T) {
	eng := &timelineEngine{}
	cs := connectFake(t, eng)

	txt, list, failed := callTool(t, cs, "list_checkpoints", nil)
	cps, _ := list["checkpoints"].([]any)
	if failed || len(cps) != 3 || !strings.Contains(txt, "2 2026-11-25T16:01:00Z command (command 7): 1 file(s) +1 -1 since checkpoint 1") ||
		!strings.Contains(txt, "(turn 2)") {
		t.Fatalf("list_checkpoints:\n%s\n%v", txt, list)
	}
	if c := cps[2].(map[string]any); c["turn"] != 2.0 || c["kind"] != "turn" || c["from"] != 1.0 {
		t.Errorf("the third checkpoint: %v", c)
	}

	txt, d, failed := callTool(t, cs, "checkpoint_diff", map[string]any{"turn": 2})
	patch, _ := d["patch"].(string)
	if failed || !strings.Contains(txt, "turn 2: 2 changed file(s)") || !strings.Contains(patch, "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,1 +1,1 @@\n-old\n+new\n\\ No newline at end of file\n") ||
		!strings.Contains(patch, "diff --git a/logo.png b/logo.png\n(binary added, no text diff)") {
		t.Errorf("checkpoint_diff turn 2:\n%s", txt)
	}
	_, d, _ = callTool(t, cs, "checkpoint_diff", map[string]any{"checkpoint": 2, "stat": true})
	if files, _ := d["files"].([]any); len(files) != 2 || d["patch"] != nil {
		t.Errorf("checkpoint_diff of checkpoint 2 with stat: %v", d)
	}
	callTool(t, cs, "checkpoint_diff", map[string]any{"checkpoint": 3, "from_checkpoint": 2})
	want := []api.CheckpointDiffQuery{{Turn: 2}, {FromCheckpoint: 1, ToCheckpoint: 2}, {FromCheckpoint: 2, ToCheckpoint: 3}}
	if len(eng.asked) != len(want) || eng.asked[0] != want[0] || eng.asked[1] != want[1] || eng.asked[2] != want[2] {
		t.Errorf("the engine was asked %+v; want %+v", eng.asked, want)
	}

	for _, tc := range []struct {
		args map[string]any
		says string
	}{
		{nil, "give either turn or checkpoint"},
		{map[string]any{"turn": 1, "checkpoint": 2}, "give either turn or checkpoint"},
		{map[string]any{"turn": 1, "from_checkpoint": 2}, "from_checkpoint goes with checkpoint"},
		{map[string]any{"turn": -1}, "positive"},
		{map[string]any{"checkpoint": 9}, "no checkpoint 9: list_checkpoints lists them"},
		{map[string]any{"turn": 5}, "no turn 5"},
	} {
		if msg, _, failed := callTool(t, cs, "checkpoint_diff", tc.args); !failed || !strings.Contains(msg, tc.says) {
			t.Errorf("checkpoint_diff %v: %q (failed %v); want it to say %q", tc.args, msg, failed, tc.says)
		}
	}
}
