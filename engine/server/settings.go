package server

import (
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

func (s *Server) getSettings(r *http.Request, _ none) (api.Settings, error) {
	return s.eng.Settings(r.Context()), nil
}

func (s *Server) putSettings(r *http.Request, req api.Settings) (api.Settings, error) {
	return s.eng.SetSettings(r.Context(), req)
}
