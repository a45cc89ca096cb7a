package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// diff streams the session's diff as one JSON object, file by file, so
// that the engine holds one batch of a large session's files, never all:
// `{"files":[...],"session":...}`, or with stat=1 `{"stats":[...],...}`
// (a full diff leaves the stats to the client: they are a summary of the
// files). Like a patch, a failure after the first byte cuts the response
// short, so the client sees an error, never a diff that looks whole.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("stat") == "1" {
		s.diffStat(w, r)
		return
	}
	out := &objectStream{w: w, field: "files"}
	d, err := s.eng.DiffEach(r.Context(), r.PathValue("id"), diffQuery(r), func(f api.FileDiff) error { return out.element(f) })
	if err == nil {
		err = out.finish(restOf(d))
	}
	if err != nil {
		out.fail(err)
	}
}

// diffStat streams the diff's summary: as JSON (`{"stats":[...],...}`),
// or, for a client that accepts api.StatLines, as its lines then the rest
// as one JSON line (what `airlock diff --stat` reads: hundreds of
// thousands of paths decode far faster as lines).
func (s *Server) diffStat(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), diffQuery(r)
	if !strings.Contains(r.Header.Get("Accept"), api.StatLines) {
		out := &objectStream{w: w, field: "stats"}
		d, err := s.eng.DiffStatLines(r.Context(), id, q, func(line []byte) error {
			if _, ok := api.ParseStatWidth(line); ok {
				return nil
			}
			st, err := api.ParseStatLine(line)
			if err != nil {
				return err
			}
			return out.element(st)
		})
		if err == nil {
			err = out.finish(restOf(d))
		}
		if err != nil {
			out.fail(err)
		}
		return
	}
	out := &lineStream{w: w}
	d, err := s.eng.DiffStatLines(r.Context(), id, q, out.line)
	if err == nil {
		err = out.finish(restOf(d))
	}
	if err != nil {
		out.fail(err)
	}
}

// diffQuery is a diff request's query: the paths and what becomes of
// ignored changes (?ignored=only|all).
func diffQuery(r *http.Request) api.DiffQuery {
	return api.DiffQuery{Paths: r.URL.Query()["path"], Ignored: r.URL.Query().Get("ignored")}
}

// diffRest is what a streamed diff sends after its files or stats.
type diffRest struct {
	Session        string        `json:"session"`
	Commits        []api.Commit  `json:"commits,omitempty"`
	Workspace      api.Workspace `json:"workspace"`
	Ignored        *api.Ignored  `json:"ignored,omitempty"`
	SessionIgnored *api.Ignored  `json:"session_ignored,omitempty"`
}

func restOf(d api.Diff) diffRest {
	return diffRest{d.Session, d.Commits, d.Workspace, d.Ignored, d.SessionIgnored}
}

// accept streams an accept's outcomes as the engine hands them on (one
// per path: hundreds of thousands for a large session), so the engine
// never holds them all; the response is the api.Outcomes object clients
// decode. An accept, once started, finishes even if the client goes away.
func (s *Server) accept(w http.ResponseWriter, r *http.Request) {
	var req api.Selection
	if err := decodeAtMost(w, r, &req, maxSelectionBody); err != nil {
		writeError(w, err)
		return
	}
	out := &objectStream{w: w, field: "outcomes"}
	res, err := s.eng.AcceptEach(context.WithoutCancel(r.Context()), r.PathValue("id"), req, func(o api.Outcome) error { return out.element(o) })
	if err == nil {
		err = out.finish(struct {
			Branch         string       `json:"branch,omitempty"`
			Commits        []api.Commit `json:"commits,omitempty"`
			Ignored        *api.Ignored `json:"ignored,omitempty"`
			SessionIgnored *api.Ignored `json:"session_ignored,omitempty"`
		}{res.Branch, res.Commits, res.Ignored, res.SessionIgnored})
	}
	if err != nil {
		out.fail(err)
	}
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request) {
	// Streamed: the engine writes nothing before it can fail cleanly (an
	// error response then), and a failure after its first byte cuts the
	// response short, so the client sees an error, never a patch that
	// looks whole.
	pw := &patchWriter{w: w}
	err := s.eng.Patch(r.Context(), r.PathValue("id"), r.URL.Query()["path"], pw)
	switch {
	case err == nil && !pw.started:
		w.Header().Set("Content-Type", "text/x-diff")
	case err != nil && !pw.started:
		writeError(w, err)
	case err != nil:
		fmt.Fprintf(w, "\n# airlock: the patch is incomplete: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		panic(http.ErrAbortHandler)
	}
}

// patchWriter starts a patch response on its first byte.
type patchWriter struct {
	w       http.ResponseWriter
	started bool
}

func (p *patchWriter) Write(b []byte) (int, error) {
	if !p.started {
		p.w.Header().Set("Content-Type", "text/x-diff")
		p.started = true
	}
	return (&stallWriter{w: p.w}).Write(b)
}

// stallWriter writes a streamed response. A client that stops reading
// fails the write after streamStall, so that a patch or a diff never holds
// its session's review lock forever.
type stallWriter struct{ w http.ResponseWriter }

const streamStall = time.Minute

func (s *stallWriter) Write(b []byte) (int, error) {
	http.NewResponseController(s.w).SetWriteDeadline(time.Now().Add(streamStall))
	return s.w.Write(b)
}

func (s *Server) discard(r *http.Request, sel api.Selection) (api.Outcomes, error) {
	// A discard stops between files when the client goes away.
	return outcomes(s.eng.Discard(r.Context(), r.PathValue("id"), sel))
}

// outcomes answers an empty list, never null, when nothing was selected.
func outcomes(out api.Outcomes, err error) (api.Outcomes, error) {
	if err == nil && out.Outcomes == nil {
		out.Outcomes = []api.Outcome{}
	}
	return out, err
}
