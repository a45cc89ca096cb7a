package server

import (
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

// listSecrets names the stored secrets; their values never leave the
// engine.
func (s *Server) listSecrets(r *http.Request, _ none) ([]api.Secret, error) {
	return s.eng.Secrets(r.Context())
}

func (s *Server) setSecret(r *http.Request, req api.SecretRequest) (none, error) {
	return none{}, s.eng.SetSecret(r.Context(), r.PathValue("name"), req.Value)
}

func (s *Server) deleteSecret(r *http.Request, _ none) (none, error) {
	return none{}, s.eng.DeleteSecret(r.Context(), r.PathValue("name"))
}
