// Package server puts an engine on the wire: the local JSON-over-HTTP API
// that the CLI and the desktop app use, served on a unix socket. Errors
// map their class to an HTTP status and an api.Error body; exec streams
// upgrade the connection to the framing in engine/api. One file per
// resource (sessions.go, exec.go, review.go, agent.go, egress.go,
// meter.go, ports.go, snapshots.go, images.go, settings.go, secrets.go,
// schedules.go); most
// handlers are the one shape serve (handle.go) writes.
package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// Server serves one engine.
type Server struct {
	eng     Engine
	images  Builder
	log     *slog.Logger
	version api.VersionInfo
	builds  sync.Mutex // one image build at a time
	latency latencies  // of review calls, for /metrics (metrics.go)
	// StartUI, when set, opens the TCP listener with the browser UI and
	// returns its address (with the token); POST /v1/ui calls it.
	StartUI func() (string, error)
	bounds  struct {
		importBody int64         // the most an import reads
		importIdle time.Duration // how long an import waits for a byte
	}
	// shutdown ends event streams with their http.Server (see watch.go).
	shutdown struct {
		sync.Mutex
		of map[*http.Server]context.Context
	}
}

// New returns the API handler for eng. version describes this engine.
func New(eng Engine, builder Builder, log *slog.Logger, version api.VersionInfo) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{eng: eng, images: builder, log: log.With("component", "api"), version: version}
	s.bounds.importBody, s.bounds.importIdle = defaultMaxImport, defaultImportIdle
	return s
}

// Handler serves the API (on the engine's socket). A panic fails only its
// request (see guard).
func (s *Server) Handler() http.Handler {
	return s.guard(s.routes())
}

// routes routes the API. serve (handle.go) writes most handlers from a
// call; the streams (diff, patch, exec, run, agent, build, export,
// import, terminal) are handlers of their own.
func (s *Server) routes() http.Handler {
	m := http.NewServeMux()
	p := "/" + api.Version
	m.HandleFunc("GET "+p+"/version", serve(200, s.getVersion))
	m.HandleFunc("POST "+p+"/ui", serve(200, s.startUI))
	// sessions.go
	m.HandleFunc("GET "+p+"/sessions", serve(200, s.listSessions))
	m.HandleFunc("POST "+p+"/sessions", serve(http.StatusCreated, s.createSession))
	m.HandleFunc("GET "+p+"/sessions/{id}", serve(200, s.getSession))
	m.HandleFunc("DELETE "+p+"/sessions/{id}", serve(http.StatusNoContent, s.removeSession))
	// review.go
	m.HandleFunc("GET "+p+"/sessions/{id}/diff", s.timed("diff", s.diff))
	m.HandleFunc("GET "+p+"/sessions/{id}/patch", s.timed("patch", s.patch))
	m.HandleFunc("POST "+p+"/sessions/{id}/accept", s.timed("accept", s.accept))
	m.HandleFunc("POST "+p+"/sessions/{id}/discard", s.timed("discard", serve(200, s.discard)))
	// exec.go, terminal.go
	m.HandleFunc("GET "+p+"/sessions/{id}/commands", serve(200, s.commands))
	m.HandleFunc("POST "+p+"/sessions/{id}/exec", s.exec)
	m.HandleFunc("POST "+p+"/run", s.run)
	m.HandleFunc("GET "+p+"/sessions/{id}/terminal", s.terminal)
	// agent.go
	m.HandleFunc("POST "+p+"/sessions/{id}/agent", s.agent)
	m.HandleFunc("GET "+p+"/sessions/{id}/turns", serve(200, s.turns))
	m.HandleFunc("GET "+p+"/sessions/{id}/events", serve(200, s.events))
	// egress.go
	m.HandleFunc("POST "+p+"/sessions/{id}/policy", serve(200, s.policy))
	m.HandleFunc("POST "+p+"/sessions/{id}/policy/save", serve(200, s.savePolicy))
	m.HandleFunc("GET "+p+"/sessions/{id}/net", serve(200, s.netLog))
	m.HandleFunc("GET "+p+"/net/pending", serve(200, s.pending))
	m.HandleFunc("POST "+p+"/net/decide", serve(http.StatusNoContent, s.decide))
	// meter.go
	m.HandleFunc("POST "+p+"/sessions/{id}/pause", serve(200, s.pause))
	m.HandleFunc("POST "+p+"/sessions/{id}/resume", serve(200, s.resume))
	m.HandleFunc("POST "+p+"/sessions/{id}/hibernate", serve(200, s.hibernate))
	m.HandleFunc("POST "+p+"/sessions/{id}/wake", serve(200, s.wake))
	m.HandleFunc("GET "+p+"/sessions/{id}/meter", serve(200, s.meter))
	m.HandleFunc("POST "+p+"/sessions/{id}/budget", serve(200, s.budget))
	m.HandleFunc("POST "+p+"/sessions/{id}/limits", serve(200, s.limits))
	m.HandleFunc("GET "+p+"/sessions/{id}/lifecycle", serve(200, s.lifecycle))
	// ports.go
	m.HandleFunc("POST "+p+"/sessions/{id}/ports", serve(http.StatusCreated, s.openPort))
	m.HandleFunc("GET "+p+"/sessions/{id}/ports", serve(200, s.listPorts))
	m.HandleFunc("DELETE "+p+"/sessions/{id}/ports/{port}", serve(http.StatusNoContent, s.closePort))
	m.HandleFunc("GET "+p+"/sessions/{id}/ports/listening", serve(200, s.listeningPorts))
	// timeline.go
	m.HandleFunc("GET "+p+"/sessions/{id}/checkpoints", serve(200, s.checkpoints))
	m.HandleFunc("GET "+p+"/sessions/{id}/checkpoints/diff", serve(200, s.checkpointDiff))
	m.HandleFunc("POST "+p+"/sessions/{id}/undo", serve(200, s.undo))
	m.HandleFunc("GET "+p+"/sessions/{id}/blame", serve(200, s.blame))
	m.HandleFunc("POST "+p+"/sessions/{id}/fork", serve(http.StatusCreated, s.fork))
	// snapshots.go
	m.HandleFunc("POST "+p+"/sessions/{id}/snapshots", serve(http.StatusCreated, s.takeSnapshot))
	m.HandleFunc("GET "+p+"/snapshots", serve(200, s.listSnapshots))
	m.HandleFunc("POST "+p+"/snapshots/import", s.importSnapshot)
	m.HandleFunc("GET "+p+"/snapshots/{ref}", serve(200, s.getSnapshot))
	m.HandleFunc("DELETE "+p+"/snapshots/{ref}", serve(http.StatusNoContent, s.removeSnapshot))
	m.HandleFunc("POST "+p+"/snapshots/{ref}/restore", serve(http.StatusCreated, s.restoreSnapshot))
	m.HandleFunc("GET "+p+"/snapshots/{ref}/export", s.exportSnapshot)
	// settings.go, secrets.go
	m.HandleFunc("GET "+p+"/settings", serve(200, s.getSettings))
	m.HandleFunc("PUT "+p+"/settings", serve(200, s.putSettings))
	m.HandleFunc("GET "+p+"/secrets", serve(200, s.listSecrets))
	m.HandleFunc("PUT "+p+"/secrets/{name}", serve(http.StatusNoContent, s.setSecret))
	m.HandleFunc("DELETE "+p+"/secrets/{name}", serve(http.StatusNoContent, s.deleteSecret))
	// schedules.go
	m.HandleFunc("GET "+p+"/schedules", serve(200, s.listSchedules))
	m.HandleFunc("POST "+p+"/schedules", serve(http.StatusCreated, s.addSchedule))
	m.HandleFunc("GET "+p+"/schedules/{name}", serve(200, s.getSchedule))
	m.HandleFunc("DELETE "+p+"/schedules/{name}", serve(http.StatusNoContent, s.removeSchedule))
	m.HandleFunc("POST "+p+"/schedules/{name}/run", serve(200, s.runSchedule))
	m.HandleFunc("GET "+p+"/schedules/{name}/runs", serve(200, s.scheduleRuns))
	// images.go
	m.HandleFunc("GET "+p+"/images", serve(200, s.listImages))
	m.HandleFunc("POST "+p+"/images/build", s.buildImage)
	m.HandleFunc("GET "+p+"/events", s.watch)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errdefs.NotFoundf("no endpoint %s %s in API %s: see docs/API.md", r.Method, r.URL.Path, api.Version))
	})
	return m
}

func (s *Server) getVersion(r *http.Request, _ none) (api.VersionInfo, error) {
	v := s.version
	v.API, v.Level = api.Version, api.Level
	return v, nil
}

// startUI opens (once) the engine's TCP listener for the browser UI and
// answers its address with the token.
func (s *Server) startUI(r *http.Request, _ none) (map[string]string, error) {
	if s.StartUI == nil {
		return nil, errdefs.Unavailablef("this engine serves no user interface")
	}
	u, err := s.StartUI()
	if err != nil {
		return nil, err
	}
	return map[string]string{"url": u}, nil
}

// Listen opens the engine's unix socket at path with mode 0600 (owner
// only), replacing a stale socket but refusing to take over a live one.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, errdefs.Conflictf("an engine already answers on %s: stop it first, or give another --engine socket", path)
	}
	os.Remove(path)
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
