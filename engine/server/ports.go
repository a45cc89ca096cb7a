package server

import (
	"net/http"
	"strconv"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

func (s *Server) openPort(r *http.Request, req api.PortRequest) (api.Port, error) {
	return s.eng.OpenPort(r.Context(), r.PathValue("id"), req)
}

func (s *Server) listPorts(r *http.Request, _ none) ([]api.Port, error) {
	return s.eng.Ports(r.Context(), r.PathValue("id"))
}

func (s *Server) closePort(r *http.Request, _ none) (none, error) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		return none{}, errdefs.Invalidf("port %q: give the session's port number", r.PathValue("port"))
	}
	return none{}, s.eng.ClosePort(r.Context(), r.PathValue("id"), port)
}

func (s *Server) listeningPorts(r *http.Request, _ none) ([]api.ListeningPort, error) {
	return s.eng.ListeningPorts(r.Context(), r.PathValue("id"))
}
