package server

import (
	"net/http"
	"strconv"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

func (s *Server) policy(r *http.Request, req api.PolicyChange) (api.EgressPolicy, error) {
	return s.eng.Policy(r.Context(), r.PathValue("id"), req)
}

// savePolicy writes the session's policy into its project's policy file.
func (s *Server) savePolicy(r *http.Request, _ none) (api.SavedPolicy, error) {
	return s.eng.SavePolicy(r.Context(), r.PathValue("id"))
}

// netLog lists a session's connections: blocked=1 keeps the blocked
// ones, limit=N the last N.
func (s *Server) netLog(r *http.Request, _ none) ([]api.EgressEntry, error) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, errdefs.Invalidf("limit %q: give a number", v)
		}
		limit = n
	}
	return s.eng.EgressLog(r.Context(), r.PathValue("id"), r.URL.Query().Get("blocked") == "1", limit)
}

// pending lists the questions of sessions under the ask mode that wait
// for an answer.
func (s *Server) pending(r *http.Request, _ none) ([]api.PendingQuestion, error) {
	return s.eng.Pending(r.Context())
}

func (s *Server) decide(r *http.Request, req api.Decide) (none, error) {
	return none{}, s.eng.Decide(r.Context(), req)
}
