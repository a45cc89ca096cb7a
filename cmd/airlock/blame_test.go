package main

import (
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// Each hunk's annotation says its turn or command and the call that made
// it, and how sure that is; what the agent wrote reaches the terminal
// without its control characters.
func TestBlameText(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 55, 28, 0, time.Local)
	for _, tc := range []struct {
		h    api.HunkBlame
		want string
	}{
		{api.HunkBlame{}, "[not checkpointed yet]"},
		{api.HunkBlame{Checkpoint: 3, Kind: api.CheckpointTurn, Turn: 2, Call: &api.BlameCall{Tool: "Edit", Input: "/workspace/a.txt", ID: "toolu_1", Time: at, Match: api.BlameMatchText, Edits: 2}},
			"[turn 2, checkpoint 3; Edit /workspace/a.txt, call toolu_1 at 09:55:28]"},
		{api.HunkBlame{Checkpoint: 3, Kind: api.CheckpointTurn, Turn: 2, Call: &api.BlameCall{Tool: "Write", Input: "b.txt", Time: at, Match: api.BlameMatchLast, Edits: 3}},
			"[turn 2, checkpoint 3; Write b.txt at 09:55:28, the last of 3 edits of the file in the turn]"},
		{api.HunkBlame{Checkpoint: 3, Kind: api.CheckpointTurn, Turn: 2, Call: &api.BlameCall{Tool: "Write", Input: "b.txt", Time: at, Match: api.BlameMatchLast, Edits: 1}},
			"[turn 2, checkpoint 3; Write b.txt at 09:55:28, the turn's one edit of the file]"},
		{api.HunkBlame{Checkpoint: 4, Kind: api.CheckpointTurn, Turn: 2}, "[turn 2, checkpoint 4; no event of the turn names the file]"},
		{api.HunkBlame{Checkpoint: 5, Kind: api.CheckpointCommand, Command: 7, CommandLine: "make test"}, "[command 7 `make test`, checkpoint 5]"},
		{api.HunkBlame{Checkpoint: 6, Kind: api.CheckpointPeriodic, Command: 7}, "[command 7 (periodic), checkpoint 6]"},
		{api.HunkBlame{Checkpoint: 6, Kind: api.CheckpointPeriodic}, "[periodic, checkpoint 6]"},
		{api.HunkBlame{Checkpoint: 3, Kind: api.CheckpointTurn, Turn: 1, Call: &api.BlameCall{Tool: "Bash\x1b]0;pwned\a", Input: "rm\n-rf \x1b[2J", Time: at, Match: api.BlameMatchText}},
			"[turn 1, checkpoint 3; Bash\ufffd]0;pwned\ufffd rm\ufffd-rf \ufffd[2J at 09:55:28]"},
	} {
		if got := blameText(tc.h); got != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.h, got, tc.want)
		}
		if strings.ContainsAny(blameText(tc.h), "\x1b\n\a") {
			t.Errorf("a control character reached the terminal: %q", blameText(tc.h))
		}
	}
}
