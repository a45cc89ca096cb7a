package server

import (
	"net/http"

	"github.com/airlock/airlock/engine/api"
)

func (s *Server) takeSnapshot(r *http.Request, req api.SnapshotRequest) (api.Snapshot, error) {
	return s.eng.Snapshot(r.Context(), r.PathValue("id"), req)
}

func (s *Server) listSnapshots(r *http.Request, _ none) ([]api.Snapshot, error) {
	return s.eng.Snapshots(r.Context())
}

func (s *Server) getSnapshot(r *http.Request, _ none) (api.Snapshot, error) {
	return s.eng.GetSnapshot(r.Context(), r.PathValue("ref"))
}

func (s *Server) removeSnapshot(r *http.Request, _ none) (none, error) {
	return none{}, s.eng.RemoveSnapshot(r.Context(), r.PathValue("ref"))
}

func (s *Server) restoreSnapshot(r *http.Request, req api.RestoreRequest) (api.Restored, error) {
	return s.eng.Restore(r.Context(), r.PathValue("ref"), req)
}

// exportSnapshot streams the image tar. Everything that can fail before
// the first byte does; a failure later aborts the stream, so the client
// never takes a cut tar for a whole one.
func (s *Server) exportSnapshot(w http.ResponseWriter, r *http.Request) {
	x, err := s.eng.PrepareExport(r.Context(), r.PathValue("ref"), r.URL.Query().Get("base") != "0")
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if err := x.Write(w); err != nil {
		s.log.Error("export a snapshot", "snapshot", r.PathValue("ref"), "err", err)
		panic(http.ErrAbortHandler)
	}
}

// importSnapshot reads an image tar, bounded in size and in how long it
// waits for the client.
func (s *Server) importSnapshot(w http.ResponseWriter, r *http.Request) {
	body := newImportBody(w, r, s.bounds.importBody, s.bounds.importIdle)
	snap, warnings, err := s.eng.Import(r.Context(), body)
	body.done(err != nil)
	if err != nil && body.err != nil {
		err = body.err // what the engine made of the read error says less
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Imported{Snapshot: snap, Warnings: warnings})
}
