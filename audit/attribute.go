package audit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/airlock/airlock/engine/api"
)

// edits are the agent's file_edit events: every call naming a path.
type edits struct {
	all map[string][]CallRef // by path, oldest first
}

func (e edits) add(turn, seq int, path string) {
	p := projectPath(path)
	e.all[p] = append(e.all[p], CallRef{Turn: turn, Seq: seq})
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
// "Which turn and call produced a hunk"): the engine's blame, which
// names the checkpoint, its turn or command and the turn's call.
type attribution struct {
	edits edits
	blame map[string]api.HunkBlame // by path \x00 range
	// untracked: the session has no checkpoints (it predates the
	// timeline); hunks are attributed by file only.
	untracked bool
}

func (a attribution) producer(path, header string) *Producer {
	if a.untracked {
		if e := a.edits.all[path]; len(e) > 0 {
			last := e[len(e)-1]
			return &Producer{Turn: last.Turn, Seq: last.Seq, Match: api.BlameMatchLast}
		}
		return nil
	}
	hb, ok := a.blame[path+"\x00"+hunkRange(header)]
	if !ok || hb.Checkpoint == 0 {
		return nil
	}
	p := &Producer{Checkpoint: hb.Checkpoint, Kind: hb.Kind, Turn: hb.Turn, Command: hb.Command}
	if c := hb.Call; c != nil {
		p.Seq, p.Call, p.Tool, p.Match = c.Seq, c.ID, c.Tool, c.Match
	}
	return p
}
