package server

import (
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

func (s *Server) listSessions(r *http.Request, _ none) ([]api.Session, error) {
	list, err := s.eng.List(r.Context())
	if list == nil && err == nil {
		list = []api.Session{}
	}
	return list, err
}

func (s *Server) createSession(r *http.Request, req api.CreateRequest) (api.Session, error) {
	return s.eng.Create(r.Context(), req)
}

func (s *Server) getSession(r *http.Request, _ none) (api.Session, error) {
	return s.eng.Get(r.Context(), r.PathValue("id"))
}

func (s *Server) removeSession(r *http.Request, _ none) (none, error) {
	return none{}, s.eng.Remove(r.Context(), r.PathValue("id"))
}
