package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// edits are the agent's file_edit events: every call naming a path, and
// per turn the last call naming it.
type edits struct {
	all  map[string][]CallRef   // by path, oldest first
	last map[int]map[string]int // turn -> path -> seq
}

func (e edits) add(turn, seq int, path string) {
	p := projectPath(path)
	e.all[p] = append(e.all[p], CallRef{Turn: turn, Seq: seq})
	if e.last[turn] == nil {
		e.last[turn] = map[string]int{}
	}
	e.last[turn][p] = seq
}

// projectPath is an event's path as the patch names it: relative to the
// project (agents report /workspace/X or ./X as well).
func projectPath(p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, "/workspace/"), "./")
}

// blameByRange keys a blame's hunks by path and hunk range, as the
// patch's headers name them (the patch and the blame's diff are the same
// hunks of the same review, read one after the other).
func blameByRange(b api.Blame) map[string]api.HunkBlame {
	ranges := map[string]string{} // path \x00 hunk id -> range
	for _, f := range b.Diff.Files {
		for _, h := range f.Hunks {
			ranges[f.Path+"\x00"+h.ID] = fmt.Sprint(h.OldStart, h.OldLines, h.NewStart, h.NewLines)
		}
	}
	out := make(map[string]api.HunkBlame, len(b.Hunks))
	for _, hb := range b.Hunks {
		if r, ok := ranges[hb.Path+"\x00"+hb.Hunk]; ok {
			out[hb.Path+"\x00"+r] = hb
		}
	}
	return out
}

// hunkRange is a "@@ -a,b +c,d @@" header's numbers as blameByRange
// keys them (a count left out is 1); "" if it is not one.
func hunkRange(header string) string {
	var n [4]int
	f := strings.Fields(header)
	if len(f) < 4 || f[0] != "@@" || f[3] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return ""
	}
	for i, r := range []string{f[1][1:], f[2][1:]} {
		start, count, ok := strings.Cut(r, ",")
		var err error
		if n[2*i], err = strconv.Atoi(start); err != nil {
			return ""
		}
		n[2*i+1] = 1
		if ok {
			if n[2*i+1], err = strconv.Atoi(count); err != nil {
				return ""
			}
		}
	}
	return fmt.Sprint(n[0], n[1], n[2], n[3])
}

// attribution says what produced each hunk of the patch (docs/AUDIT.md,
// "Which turn and call produced a hunk").
type attribution struct {
	edits    edits
	blame    map[string]api.HunkBlame // by path \x00 range
	byID     map[int64]Checkpoint
	turns    []Turn
	commands []Command
	// untracked: the session has no checkpoints (it predates the
	// timeline); hunks are attributed by file only.
	untracked bool
}

func (a attribution) producer(path, header string) *Producer {
	if a.untracked {
		if e := a.edits.all[path]; len(e) > 0 {
			last := e[len(e)-1]
			return &Producer{Turn: last.Turn, Seq: last.Seq}
		}
		return nil
	}
	hb, ok := a.blame[path+"\x00"+hunkRange(header)]
	if !ok || hb.Checkpoint == 0 {
		return nil
	}
	p := &Producer{Checkpoint: hb.Checkpoint, Kind: hb.Kind, Turn: hb.Turn, Command: hb.Command}
	if c, ok := a.byID[hb.Checkpoint]; ok && p.Turn == 0 && p.Command == 0 && c.Kind == api.CheckpointPeriodic {
		// A periodic checkpoint belongs to what was running when it was
		// taken: a turn first (an agent's turn runs its own commands).
		p.Turn, p.Command = a.runningAt(c.Time)
	}
	if p.Turn > 0 {
		p.Seq = a.edits.last[p.Turn][path]
	}
	return p
}

// runningAt names the turn, else the command, that was running at t.
func (a attribution) runningAt(t time.Time) (turn int, command int64) {
	during := func(start time.Time, end *time.Time) bool {
		return !t.Before(start) && (end == nil || !t.After(*end))
	}
	for _, tu := range a.turns {
		if during(tu.Started, tu.Ended) {
			return tu.N, 0
		}
	}
	for _, c := range a.commands {
		if during(c.Started, c.Ended) {
			return 0, c.ID
		}
	}
	return 0, 0
}
