package timeline

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// Bounds on what blame keeps of a session's events and commands: they
// come from the agent's output and the user's argv.
const (
	maxTurnEdits = 10_000 // a turn's file edits kept (its last)
	maxCallInput = 200    // bytes of a call's input or a command line
	maxWroteKept = 8 << 10
	maxHunkLines = 500 // a hunk's added lines compared with the edits' text
	maxFragments = 16  // an edit's lines looked for inside a hunk's lines
)

// calls names, for blame, the command or the agent's tool call behind a
// checkpoint's changes to a file. It reads the session's turns, commands
// and events once each, as hunks ask. It only annotates: what cannot be
// read names nothing (the hunk keeps its checkpoint), never fails the
// blame.
type calls struct {
	core     Sessions
	session  string
	list     []api.Checkpoint // oldest first
	turns    []api.Turn
	commands map[int64]api.Command
	loaded   bool
	edits    map[int][]edit // by turn
}

// edit is one file_edit event of a turn, as blame keeps it.
type edit struct {
	seq         int
	id, tool    string
	input, path string
	time        time.Time
	wrote       map[string]bool // the trimmed lines of its new text
	// fragments are those lines again, for an edit of a few lines: an
	// edit may replace part of a line (new_string "x" in "a := x").
	fragments []string
}

// holds tells whether the edit's text wrote line l (trimmed): as a whole
// line, or, for an edit of a few lines, as part of it.
func (e edit) holds(l string) bool {
	if e.wrote[l] {
		return true
	}
	for _, f := range e.fragments {
		if strings.Contains(l, f) {
			return true
		}
	}
	return false
}

func newCalls(core Sessions, session string, list []api.Checkpoint) *calls {
	return &calls{core: core, session: session, list: list, edits: map[int][]edit{}}
}

func (c *calls) load(ctx context.Context) {
	if c.loaded {
		return
	}
	c.loaded = true
	c.turns, _ = c.core.Turns(ctx, c.session)
	cmds, _ := c.core.Commands(ctx, c.session)
	c.commands = make(map[int64]api.Command, len(cmds))
	for _, x := range cmds {
		c.commands[x.ID] = x
	}
}

// attribute fills in hb's turn or command for a periodic checkpoint, the
// command's line, and the call of a turn whose edit made the hunk h.
func (c *calls) attribute(ctx context.Context, hb *api.HunkBlame, h api.Hunk) {
	cp, prev, ok := c.checkpoint(hb.Checkpoint)
	if !ok {
		return
	}
	c.load(ctx)
	if hb.Turn == 0 && hb.Command == 0 && cp.Kind == api.CheckpointPeriodic {
		// A periodic checkpoint belongs to what was running when it was
		// taken: a turn first (an agent's turn runs its own commands).
		hb.Turn, hb.Command = c.runningAt(cp.Time)
	}
	if hb.Command > 0 {
		if x, ok := c.commands[hb.Command]; ok {
			hb.CommandLine = clipText(strings.Join(x.Argv, " "), maxCallInput)
		}
	}
	if hb.Turn > 0 {
		hb.Call = c.call(ctx, hb.Turn, hb.Path, prev, cp.Time, h)
	}
}

// checkpoint is checkpoint id and the time of the one before it (zero
// for the first).
func (c *calls) checkpoint(id int64) (cp api.Checkpoint, prev time.Time, ok bool) {
	for i, x := range c.list {
		if x.ID == id {
			if i > 0 {
				prev = c.list[i-1].Time
			}
			return x, prev, true
		}
	}
	return api.Checkpoint{}, time.Time{}, false
}

// runningAt names the turn, else the command, that was running at t.
func (c *calls) runningAt(t time.Time) (turn int, command int64) {
	during := func(start time.Time, end *time.Time) bool {
		return !t.Before(start) && (end == nil || !t.After(*end))
	}
	for _, tu := range c.turns {
		if during(tu.Started, tu.Ended) {
			return tu.N, 0
		}
	}
	for _, x := range c.commands {
		if during(x.Started, x.Ended) && (command == 0 || x.ID < command) {
			command = x.ID
		}
	}
	return 0, command
}

// call is the edit of file p in turn n that made hunk h, between the
// previous checkpoint (after) and this one (until): of the edits in that
// window (else in the whole turn up to until, else in the whole turn),
// the one whose new text holds the most of the hunk's added lines (the
// later of equals), else the last.
func (c *calls) call(ctx context.Context, n int, p string, after, until time.Time, h api.Hunk) *api.BlameCall {
	all := c.turnEdits(ctx, n)
	var in []edit
	for _, pick := range []func(edit) bool{
		func(e edit) bool { return e.time.After(after) && !e.time.After(until) },
		func(e edit) bool { return !e.time.After(until) },
		func(edit) bool { return true },
	} {
		for _, e := range all {
			if e.path == p && pick(e) {
				in = append(in, e)
			}
		}
		if len(in) > 0 {
			break
		}
	}
	if len(in) == 0 {
		return nil
	}
	var added []string
	for _, l := range h.Lines {
		if len(added) == maxHunkLines {
			break
		}
		if strings.HasPrefix(l, "+") {
			if s := strings.TrimSpace(l[1:]); s != "" {
				added = append(added, s)
			}
		}
	}
	best, score := len(in)-1, 0
	for i, e := range in {
		n := 0
		for _, l := range added {
			if e.holds(l) {
				n++
			}
		}
		if n > 0 && n >= score {
			best, score = i, n
		}
	}
	e := in[best]
	match := api.BlameMatchLast
	if score > 0 {
		match = api.BlameMatchText
	}
	return &api.BlameCall{Seq: e.seq, ID: e.id, Tool: e.tool, Input: e.input, Time: e.time, Match: match, Edits: len(in)}
}

// turnEdits reads turn n's file edits once, each with its call's tool
// and input (from the tool_call event of the same id).
func (c *calls) turnEdits(ctx context.Context, n int) []edit {
	if e, ok := c.edits[n]; ok {
		return e
	}
	evs, _ := c.core.Events(ctx, c.session, n)
	type toolCall struct{ tool, input string }
	byID := map[string]toolCall{}
	var out []edit
	for i, ev := range evs {
		switch ev.Type {
		case api.EventToolCall:
			if ev.ID != "" && len(byID) < maxTurnEdits {
				byID[ev.ID] = toolCall{clipText(ev.Tool, maxCallInput), clipText(ev.Input, maxCallInput)}
			}
		case api.EventFileEdit:
			if ev.Path == "" {
				continue
			}
			e := edit{seq: i + 1, id: clipText(ev.ID, 128), tool: clipText(ev.Tool, maxCallInput), path: eventPath(ev.Path), time: ev.Time}
			if tc, ok := byID[ev.ID]; ok && ev.ID != "" {
				e.tool, e.input = tc.tool, tc.input
			}
			if e.input == "" {
				e.input = clipText(ev.Path, maxCallInput)
			}
			if ev.Wrote != "" {
				e.wrote = map[string]bool{}
				for _, l := range strings.Split(clipText(ev.Wrote, maxWroteKept), "\n") {
					if s := strings.TrimSpace(l); s != "" {
						e.wrote[s] = true
					}
				}
				if len(e.wrote) <= maxFragments {
					for l := range e.wrote {
						if len(l) >= 3 { // "}" or "x" would be found anywhere
							e.fragments = append(e.fragments, l)
						}
					}
				}
			}
			if len(out) == maxTurnEdits { // keep the newest
				out = append(out[:0], out[len(out)/2:]...)
			}
			out = append(out, e)
		}
	}
	c.edits[n] = out
	return out
}

// eventPath is an event's path as a diff names it: relative to the
// project (agents report /workspace/X, ./X or X).
func eventPath(p string) string {
	p = strings.TrimPrefix(p, "/workspace/")
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// clipText is s in at most n bytes, valid UTF-8.
func clipText(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
