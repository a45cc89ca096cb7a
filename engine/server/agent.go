package server

import (
	"net/http"
	"strconv"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// agent runs an agent turn, streaming events as JSON lines; the last line
// has the turn or an error. Errors before the first event are plain HTTP
// errors.
func (s *Server) agent(w http.ResponseWriter, r *http.Request) {
	var req api.AgentRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	out := &jsonLines{w: w}
	fail := func(err error) { out.fail(err, func(e *api.Error) any { return api.AgentLine{Error: e} }) }
	defer s.catch(r, fail)
	turn, err := s.eng.Agent(r.Context(), r.PathValue("id"), req, func(ev api.Event) { out.send(api.AgentLine{Event: &ev}) })
	if err != nil {
		fail(err)
		return
	}
	out.send(api.AgentLine{Turn: &turn})
	out.close()
}

func (s *Server) turns(r *http.Request, _ none) ([]api.Turn, error) {
	turns, err := s.eng.Turns(r.Context(), r.PathValue("id"))
	if turns == nil && err == nil {
		turns = []api.Turn{}
	}
	return turns, err
}

// events lists a session's agent events; turn=N keeps one turn's.
func (s *Server) events(r *http.Request, _ none) ([]api.Event, error) {
	turn := 0
	if v := r.URL.Query().Get("turn"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, errdefs.Invalidf("turn %q: give a turn number (1, 2, ...)", v)
		}
		turn = n
	}
	return s.eng.Events(r.Context(), r.PathValue("id"), turn)
}
