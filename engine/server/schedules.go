package server

import (
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

func (s *Server) listSchedules(r *http.Request, _ none) ([]api.Schedule, error) {
	return s.eng.Schedules(r.Context())
}

func (s *Server) addSchedule(r *http.Request, req api.Schedule) (api.Schedule, error) {
	return s.eng.AddSchedule(r.Context(), req)
}

func (s *Server) getSchedule(r *http.Request, _ none) (api.Schedule, error) {
	return s.eng.Schedule(r.Context(), r.PathValue("name"))
}

func (s *Server) removeSchedule(r *http.Request, _ none) (none, error) {
	return none{}, s.eng.RemoveSchedule(r.Context(), r.PathValue("name"))
}

// runSchedule answers once the run's session runs, or with wait once the
// run ended; the run goes on if the client goes away.
func (s *Server) runSchedule(r *http.Request, req api.ScheduleRunRequest) (api.ScheduleRun, error) {
	return s.eng.RunSchedule(r.Context(), r.PathValue("name"), req)
}

func (s *Server) scheduleRuns(r *http.Request, _ none) ([]api.ScheduleRun, error) {
	return s.eng.ScheduleRuns(r.Context(), r.PathValue("name"))
}
