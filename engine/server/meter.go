package server

import (
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

// pause freezes a session and answers it as it is then.
func (s *Server) pause(r *http.Request, _ none) (api.Session, error) {
	if err := s.eng.Pause(r.Context(), r.PathValue("id")); err != nil {
		return api.Session{}, err
	}
	return s.eng.Get(r.Context(), r.PathValue("id"))
}

// resume thaws a session and answers it as it is then.
func (s *Server) resume(r *http.Request, _ none) (api.Session, error) {
	if err := s.eng.Resume(r.Context(), r.PathValue("id")); err != nil {
		return api.Session{}, err
	}
	return s.eng.Get(r.Context(), r.PathValue("id"))
}

// hibernate records a session's checkpoint and releases its container,
// tmpfs and network (hibernate.go in the engine).
func (s *Server) hibernate(r *http.Request, req api.HibernateRequest) (api.Session, error) {
	return s.eng.Hibernate(r.Context(), r.PathValue("id"), req)
}

// wake brings a hibernated session back.
func (s *Server) wake(r *http.Request, _ none) (api.Session, error) {
	return s.eng.Wake(r.Context(), r.PathValue("id"))
}

func (s *Server) limits(r *http.Request, req api.Limits) (api.Session, error) {
	return s.eng.SetLimits(r.Context(), r.PathValue("id"), req)
}

func (s *Server) budget(r *http.Request, req api.Budgets) (api.Session, error) {
	return s.eng.SetBudgets(r.Context(), r.PathValue("id"), req)
}

func (s *Server) meter(r *http.Request, _ none) (api.Meter, error) {
	return s.eng.Meter(r.Context(), r.PathValue("id"))
}

func (s *Server) lifecycle(r *http.Request, _ none) ([]api.LifecycleEvent, error) {
	return s.eng.Lifecycle(r.Context(), r.PathValue("id"))
}
