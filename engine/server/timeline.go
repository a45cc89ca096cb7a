package server

import (
	"net/http"
	"strconv"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

func (s *Server) checkpoints(r *http.Request, _ none) ([]api.Checkpoint, error) {
	return s.eng.Checkpoints(r.Context(), r.PathValue("id"))
}

// checkpointDiff reads turn, from and to (turn numbers) or
// from_checkpoint and to_checkpoint (ids) from the query.
func (s *Server) checkpointDiff(r *http.Request, _ none) (api.Diff, error) {
	var q api.CheckpointDiffQuery
	for _, f := range []struct {
		name string
		set  func(int64)
	}{
		{"turn", func(v int64) { q.Turn = int(v) }},
		{"from", func(v int64) { q.From = int(v) }},
		{"to", func(v int64) { q.To = int(v) }},
		{"from_checkpoint", func(v int64) { q.FromCheckpoint = v }},
		{"to_checkpoint", func(v int64) { q.ToCheckpoint = v }},
	} {
		raw := r.URL.Query().Get(f.name)
		if raw == "" {
			continue
		}
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || v < 0 {
			return api.Diff{}, errdefs.Invalidf("%s=%q: give a number (`airlock turns ID` lists turns and checkpoints)", f.name, raw)
		}
		f.set(v)
	}
	return s.eng.CheckpointDiff(r.Context(), r.PathValue("id"), q)
}

func (s *Server) undo(r *http.Request, req api.UndoRequest) (api.Undone, error) {
	return s.eng.Undo(r.Context(), r.PathValue("id"), req)
}

func (s *Server) fork(r *http.Request, req api.ForkRequest) (api.Restored, error) {
	return s.eng.Fork(r.Context(), r.PathValue("id"), req)
}

// blame takes the paths to diff as path=P query parameters, as diff does.
func (s *Server) blame(r *http.Request, _ none) (api.Blame, error) {
	return s.eng.Blame(r.Context(), r.PathValue("id"), r.URL.Query()["path"])
}
