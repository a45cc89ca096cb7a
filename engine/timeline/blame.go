package timeline

import (
	"context"
	"fmt"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
	"github.com/airlock/airlock/review"
)

// Blame names, for each hunk of d (session id's diff against the
// project), the newest checkpoint whose own changes added or removed one
// of the hunk's lines: the turn or command that last changed it. Lines
// are followed by their text through each checkpoint's changes to its
// file, read from the store (and from the project where the session had
// not changed the file), never from the live session. Each hunk also
// names its command's line or, in a turn, the agent's tool call that
// edited the file (see calls.call).
func (t *Timeline) Blame(ctx context.Context, id string, d api.Diff) (api.Blame, error) {
	out := api.Blame{Session: id, Hunks: []api.HunkBlame{}, Diff: d}
	t.Settle(id)
	s, err := t.existing(id)
	if err != nil || s == nil {
		for _, f := range d.Files {
			for _, h := range f.Hunks {
				out.Hunks = append(out.Hunks, api.HunkBlame{Path: f.Path, Hunk: h.ID, NewStart: h.NewStart})
			}
		}
		return out, err
	}
	project, err := t.core.Project(ctx, id)
	if err != nil {
		return out, err
	}
	list, err := t.List(ctx, id)
	if err != nil {
		return out, err
	}
	proj, err := confined.OpenRoot(project)
	if err != nil {
		return out, err
	}
	defer proj.Close()
	who := newCalls(t.core, id, list)
	byID := map[int64]api.Checkpoint{}
	for _, c := range list {
		byID[c.ID] = c
	}
	states := make([]state, 0, len(list)+1)
	for _, id := range append([]int64{0}, ids(list)...) {
		st, err := newState(s, checkpoint.ID(id), proj)
		if err != nil {
			return out, err
		}
		states = append(states, st)
	}
	for _, f := range d.Files {
		if len(f.Hunks) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		added, removed, err := lineHistory(states, f.Path)
		if err != nil {
			return out, fmt.Errorf("%s: %w", names.Quote(f.Path), err)
		}
		for _, h := range f.Hunks {
			hb := api.HunkBlame{Path: f.Path, Hunk: h.ID, NewStart: h.NewStart}
			for _, l := range h.Lines {
				var c int64
				switch l[0] {
				case '+':
					c = added[l[1:]]
				case '-':
					c = removed[l[1:]]
				}
				hb.Checkpoint = max(hb.Checkpoint, c)
			}
			if c, ok := byID[hb.Checkpoint]; ok {
				hb.Kind, hb.Turn, hb.Command = c.Kind, c.Turn, c.Command
				who.attribute(ctx, &hb, h)
			}
			out.Hunks = append(out.Hunks, hb)
		}
	}
	return out, nil
}

func ids(list []api.Checkpoint) []int64 {
	out := make([]int64, len(list))
	for i, c := range list {
		out[i] = c.ID
	}
	return out
}

// lineHistory follows path p through the states (the session's start,
// then its checkpoints in order): for each line text, the newest
// checkpoint that added it and the newest that removed it.
func lineHistory(states []state, p string) (added, removed map[string]int64, err error) {
	added, removed = map[string]int64{}, map[string]int64{}
	prev := states[0]
	ps, err := prev.at(p)
	if err != nil {
		return nil, nil, err
	}
	budget := maxTotal
	for _, cur := range states[1:] {
		cs, err := cur.at(p)
		if err != nil {
			return nil, nil, err
		}
		if !cs.same(ps) {
			old, _, _, err := prev.text(p, ps)
			if err != nil {
				return nil, nil, err
			}
			new, _, _, err := cur.text(p, cs)
			if err != nil {
				return nil, nil, err
			}
			if budget -= len(old) + len(new); budget < 0 {
				break
			}
			for _, h := range review.Hunks(old, new) {
				for _, l := range h.Lines {
					switch l[0] {
					case '+':
						added[l[1:]] = int64(cur.id)
					case '-':
						removed[l[1:]] = int64(cur.id)
					}
				}
			}
		}
		prev, ps = cur, cs
	}
	return added, removed, nil
}
