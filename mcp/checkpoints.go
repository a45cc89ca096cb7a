package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/names"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// CheckpointInfo is one checkpoint of the session's timeline.
type CheckpointInfo struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"` // turn, command, periodic, undo, fork, hibernate
	Time    time.Time `json:"time"`
	Turn    int       `json:"turn,omitempty"`
	Command int64     `json:"command,omitempty"`
	// From is the checkpoint its changes are counted against (0: the
	// session's start); Files, Added and Removed are those changes.
	From    int64 `json:"from"`
	Files   int   `json:"files"`
	Added   int   `json:"added"`
	Removed int   `json:"removed"`
}

// Checkpoints lists the session's checkpoints, oldest first.
type Checkpoints struct {
	Session     string           `json:"session"`
	Checkpoints []CheckpointInfo `json:"checkpoints"`
}

type checkpointDiffInput struct {
	Turn       int   `json:"turn,omitempty" jsonschema:"show what this agent turn changed"`
	Checkpoint int64 `json:"checkpoint,omitempty" jsonschema:"show what this checkpoint changed (a command's, a turn's), by the id list_checkpoints gives"`
	From       int64 `json:"from_checkpoint,omitempty" jsonschema:"with checkpoint: compare against this checkpoint instead of the one before it (0 is the session's start)"`
	Stat       bool  `json:"stat,omitempty" jsonschema:"only the changed files with their added and removed line counts"`
}

func (s *server) addCheckpointTools(srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{Name: "list_checkpoints",
		Description: "List the session's checkpoints, oldest first: one at the end of each agent turn and of each command that changed the workspace, " +
			"with how many files and lines each changed. checkpoint_diff shows one's changes."},
		s.listCheckpoints)
	sdk.AddTool(srv, &sdk.Tool{Name: "checkpoint_diff",
		Description: "Show what one agent turn (turn) or one checkpoint (checkpoint, optionally against from_checkpoint) changed in the session's workspace: " +
			"the changed files and a patch, or with stat only the files and line counts."},
		s.checkpointDiff)
}

func checkpointInfo(c api.Checkpoint) CheckpointInfo {
	return CheckpointInfo{ID: c.ID, Kind: c.Kind, Time: c.Time, Turn: c.Turn, Command: c.Command, From: c.From,
		Files: c.Files, Added: c.Added, Removed: c.Removed}
}

func (s *server) listCheckpoints(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, Checkpoints, error) {
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, Checkpoints{}, err
	}
	all, err := eng.Checkpoints(ctx, id)
	if err != nil {
		return nil, Checkpoints{}, err
	}
	out := Checkpoints{Session: id, Checkpoints: []CheckpointInfo{}}
	var b strings.Builder
	for _, c := range all {
		ci := checkpointInfo(c)
		out.Checkpoints = append(out.Checkpoints, ci)
		fmt.Fprintf(&b, "%d %s %s", ci.ID, ci.Time.Format(time.RFC3339), ci.Kind)
		switch {
		case ci.Turn > 0:
			fmt.Fprintf(&b, " (turn %d)", ci.Turn)
		case ci.Command > 0:
			fmt.Fprintf(&b, " (command %d)", ci.Command)
		}
		fmt.Fprintf(&b, ": %d file(s) +%d -%d since checkpoint %d\n", ci.Files, ci.Added, ci.Removed, ci.From)
	}
	if len(out.Checkpoints) == 0 {
		return text("session %s has no checkpoints yet: one is made at the end of each agent turn and of each command that changes the workspace", id), out, nil
	}
	return text("checkpoints of session %s:\n%s", id, b.String()), out, nil
}

func (s *server) checkpointDiff(ctx context.Context, _ *sdk.CallToolRequest, in checkpointDiffInput) (*sdk.CallToolResult, DiffResult, error) {
	switch {
	case in.Turn < 0 || in.Checkpoint < 0 || in.From < 0:
		return nil, DiffResult{}, errdefs.Invalidf("turn, checkpoint and from_checkpoint are positive numbers: list_checkpoints lists them")
	case (in.Turn > 0) == (in.Checkpoint > 0):
		return nil, DiffResult{}, errdefs.Invalidf("give either turn or checkpoint (list_checkpoints lists them)")
	case in.From > 0 && in.Checkpoint == 0:
		return nil, DiffResult{}, errdefs.Invalidf("from_checkpoint goes with checkpoint, not with turn")
	}
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, DiffResult{}, err
	}
	q := api.CheckpointDiffQuery{Turn: in.Turn}
	what := fmt.Sprintf("turn %d", in.Turn)
	if in.Checkpoint > 0 {
		from := in.From
		if from == 0 {
			if from, err = checkpointFrom(ctx, eng, id, in.Checkpoint); err != nil {
				return nil, DiffResult{}, err
			}
		}
		// 0 for FromCheckpoint is the session's start.
		q = api.CheckpointDiffQuery{FromCheckpoint: from, ToCheckpoint: in.Checkpoint}
		what = fmt.Sprintf("checkpoint %d (since checkpoint %d)", in.Checkpoint, from)
	}
	d, err := eng.CheckpointDiff(ctx, id, q)
	if err != nil {
		return nil, DiffResult{}, err
	}
	res := DiffResult{Session: id, Files: []FileChange{}}
	var b strings.Builder
	for _, st := range d.Stats {
		res.Files = append(res.Files, FileChange{Path: st.Path, Kind: st.Kind, Added: st.Added, Removed: st.Removed})
		fmt.Fprintf(&b, "%-9s %s +%d -%d\n", st.Kind, names.Quote(st.Path), st.Added, st.Removed)
	}
	if len(res.Files) == 0 {
		return text("session %s: %s changed nothing", id, what), res, nil
	}
	if !in.Stat {
		var patch strings.Builder
		p := &capped{buf: &patch, limit: maxPatch}
		for _, f := range d.Files {
			if writePatch(p, f) != nil {
				break
			}
		}
		res.Patch, res.Truncated = strings.ToValidUTF8(patch.String(), "\uFFFD"), p.full
		b.WriteString("\n" + res.Patch)
		if res.Truncated {
			b.WriteString("\n(the patch goes on: ask with stat for the list of files)")
		}
	}
	return text("session %s, %s: %d changed file(s):\n%s", id, what, len(res.Files), b.String()), res, nil
}

// checkpointFrom is the checkpoint the changes of checkpoint cid are
// counted against.
func checkpointFrom(ctx context.Context, eng Engine, id string, cid int64) (int64, error) {
	all, err := eng.Checkpoints(ctx, id)
	if err != nil {
		return 0, err
	}
	for _, c := range all {
		if c.ID == cid {
			return c.From, nil
		}
	}
	return 0, errdefs.NotFoundf("session %s has no checkpoint %d: list_checkpoints lists them", id, cid)
}

// writePatch writes one file's change in git's patch form: its hunks, or
// a line saying what changed when it has none (binary, a mode, a type).
func writePatch(w *capped, f api.FileDiff) error {
	oldName, newName := names.Quote("a/"+f.Path), names.Quote("b/"+f.Path)
	if f.From != "" {
		oldName = names.Quote("a/" + f.From)
	}
	switch f.Kind {
	case api.KindAdded:
		oldName = "/dev/null"
	case api.KindDeleted:
		newName = "/dev/null"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git %s %s\n", names.Quote("a/"+f.Path), names.Quote("b/"+f.Path))
	if len(f.Hunks) == 0 {
		why := f.Kind
		if f.Binary {
			why = "binary " + why
		}
		fmt.Fprintf(&b, "(%s, no text diff)\n", why)
	} else {
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", oldName, newName)
		for _, h := range f.Hunks {
			fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", h.OldStart, h.OldLines, h.NewStart, h.NewLines)
			for _, l := range h.Lines {
				b.WriteString(l)
				if !strings.HasSuffix(l, "\n") {
					b.WriteString("\n\\ No newline at end of file\n")
				}
			}
		}
	}
	_, err := w.Write([]byte(b.String()))
	return err
}
