package timeline_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/timeline"
)

// Blame names each hunk's turn and, from the turn's events, the tool
// call that made it: of two edits of one file in a turn, the one whose
// new text holds the hunk's lines; an edit that carries no text, as
// the last edit of its file; a command by its line; a periodic
// checkpoint by the turn running when it was taken.
func TestBlameNamesTheCall(t *testing.T) {
	ctx := context.Background()
	f := &fakeSessions{upper: t.TempDir(), project: t.TempDir()}
	lines := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"
	write(t, filepath.Join(f.project, "a.txt"), lines)
	write(t, filepath.Join(f.project, "g.go"), "return compute(1)\n"+strings.Repeat("pad\n", 10)+"end\n")
	tl := timeline.New(t.TempDir(), f, timeline.Options{Every: -1})

	start := time.Now()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	// Turn 1: two Edits of a.txt (the first line, then the last), a Write of
	// b.txt whose event has no text, and a call named by a path with ./.
	write(t, filepath.Join(f.upper, "a.txt"), strings.Replace(strings.Replace(lines, "1\n", "first edit\n", 1), "12\n", "second edit\n", 1))
	write(t, filepath.Join(f.upper, "b.txt"), "bee\n")
	write(t, filepath.Join(f.upper, "g.go"), "return compute(42)\n"+strings.Repeat("pad\n", 10)+"finish\n")
	f.events = map[int][]api.Event{1: {
		{Type: api.EventMessage, Time: at(1), Text: "editing"},
		{Type: api.EventToolCall, Time: at(2), Tool: "Edit", ID: "toolu_1", Input: "/workspace/a.txt"},
		{Type: api.EventFileEdit, Time: at(2), Tool: "Edit", ID: "toolu_1", Path: "a.txt", Wrote: "first edit\n"},
		{Type: api.EventToolCall, Time: at(3), Tool: "Edit", ID: "toolu_2", Input: "/workspace/a.txt"},
		{Type: api.EventFileEdit, Time: at(3), Tool: "Edit", ID: "toolu_2", Path: "/workspace/a.txt", Wrote: "second edit\n"},
		{Type: api.EventToolCall, Time: at(4), Tool: "Write", ID: "toolu_3", Input: "b.txt"},
		{Type: api.EventFileEdit, Time: at(4), Tool: "Write", ID: "toolu_3", Path: "./b.txt"},
		// Two Edits of g.go, the first of part of a line.
		{Type: api.EventToolCall, Time: at(5), Tool: "Edit", ID: "toolu_4", Input: "g.go"},
		{Type: api.EventFileEdit, Time: at(5), Tool: "Edit", ID: "toolu_4", Path: "g.go", Wrote: "compute(42)"},
		{Type: api.EventToolCall, Time: at(6), Tool: "Edit", ID: "toolu_5", Input: "g.go"},
		{Type: api.EventFileEdit, Time: at(6), Tool: "Edit", ID: "toolu_5", Path: "g.go", Wrote: "finish\n"},
	}}
	ended := at(7)
	f.turns = []api.Turn{{N: 1, Started: start, Ended: &ended}}
	_, _, err := tl.Record(ctx, "s1", timeline.Mark{Kind: api.CheckpointTurn, Turn: 1, Since: start, Always: true})
	must(t, err)

	// Command 7 writes c.txt.
	write(t, filepath.Join(f.upper, "c.txt"), "sea\n")
	f.commands = []api.Command{{ID: 7, Argv: []string{"sh", "-c", "echo sea > c.txt"}, Started: time.Now()}}
	_, _, err = tl.Record(ctx, "s1", timeline.Mark{Kind: api.CheckpointCommand, Command: 7, Always: true})
	must(t, err)

	// Turn 2, still running, writes d.txt twice; a periodic checkpoint
	// takes the second.
	t2 := time.Now()
	f.turns = append(f.turns, api.Turn{N: 2, Started: t2})
	write(t, filepath.Join(f.upper, "d.txt"), "dee\n")
	f.events[2] = []api.Event{
		{Type: api.EventToolCall, Time: t2, Tool: "Write", ID: "w1", Input: "d.txt"},
		{Type: api.EventFileEdit, Time: t2, Tool: "Write", ID: "w1", Path: "d.txt", Wrote: "d\n"},
		{Type: api.EventToolCall, Time: t2.Add(time.Millisecond), Tool: "Write", ID: "w2", Input: "d.txt"},
		{Type: api.EventFileEdit, Time: t2.Add(time.Millisecond), Tool: "Write", ID: "w2", Path: "d.txt", Wrote: "something else\n"},
	}
	time.Sleep(5 * time.Millisecond)
	_, _, err = tl.Record(ctx, "s1", timeline.Mark{Kind: api.CheckpointPeriodic, Always: true})
	must(t, err)

	list, err := tl.List(ctx, "s1")
	must(t, err)
	d, err := tl.Diff(ctx, "s1", api.CheckpointDiffQuery{ToCheckpoint: list[len(list)-1].ID})
	must(t, err)
	b, err := tl.Blame(ctx, "s1", d)
	must(t, err)
	got := map[string]string{}
	for _, f := range d.Files {
		for _, h := range f.Hunks {
			for _, hb := range b.Hunks {
				if hb.Path == f.Path && hb.NewStart == h.NewStart { // a checkpoint diff has no hunk ids
					got[f.Path+" "+strings.Join(h.Lines, "|")] = describe(hb)
				}
			}
		}
	}
	want := map[string]string{
		"a.txt -1\n|+first edit\n| 2\n| 3\n| 4\n":                              "turn 1 toolu_1 Edit /workspace/a.txt text 2",
		"a.txt  9\n| 10\n| 11\n|-12\n|+second edit\n":                          "turn 1 toolu_2 Edit /workspace/a.txt text 2",
		"g.go -return compute(1)\n|+return compute(42)\n| pad\n| pad\n| pad\n": "turn 1 toolu_4 Edit g.go text 2",
		"g.go  pad\n| pad\n| pad\n|-end\n|+finish\n":                           "turn 1 toolu_5 Edit g.go text 2",
		"b.txt +bee\n": "turn 1 toolu_3 Write b.txt last 1",
		"c.txt +sea\n": "command 7 sh -c echo sea > c.txt",
		"d.txt +dee\n": "turn 2 w2 Write d.txt last 2",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q (all: %q)", k, got[k], w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("hunks %q", got)
	}
}

func describe(hb api.HunkBlame) string {
	switch {
	case hb.Command > 0:
		return "command " + itoa(int(hb.Command)) + " " + hb.CommandLine
	case hb.Call != nil:
		c := hb.Call
		return "turn " + itoa(hb.Turn) + " " + c.ID + " " + c.Tool + " " + c.Input + " " + c.Match + " " + itoa(c.Edits)
	}
	return "turn " + itoa(hb.Turn) + " no call"
}

func itoa(n int) string { return strconv.Itoa(n) }
