// Package server puts an engine on the wire: the local JSON-over-HTTP API
// that the CLI and the desktop app use, served on a unix socket. Errors
// map their class to an HTTP status and an api.Error body; exec streams
// upgrade the connection to the framing in engine/api.
package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
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

// routes routes the API.
func (s *Server) routes() http.Handler {
	m := http.NewServeMux()
	p := "/" + api.Version
	m.HandleFunc("GET "+p+"/version", s.getVersion)
	m.HandleFunc("GET "+p+"/sessions", s.listSessions)
	m.HandleFunc("POST "+p+"/sessions", s.createSession)
	m.HandleFunc("GET "+p+"/sessions/{id}", s.getSession)
	m.HandleFunc("DELETE "+p+"/sessions/{id}", s.removeSession)
	m.HandleFunc("GET "+p+"/sessions/{id}/diff", s.timed("diff", s.diff))
	m.HandleFunc("GET "+p+"/sessions/{id}/patch", s.timed("patch", s.patch))
	m.HandleFunc("POST "+p+"/sessions/{id}/accept", s.timed("accept", s.accept))
	m.HandleFunc("POST "+p+"/sessions/{id}/discard", s.timed("discard", s.discard))
	m.HandleFunc("GET "+p+"/sessions/{id}/commands", s.commands)
	m.HandleFunc("POST "+p+"/sessions/{id}/exec", s.exec)
	m.HandleFunc("POST "+p+"/run", s.run)
	m.HandleFunc("POST "+p+"/sessions/{id}/agent", s.agent)
	m.HandleFunc("POST "+p+"/sessions/{id}/policy", s.policy)
	m.HandleFunc("POST "+p+"/sessions/{id}/pause", s.pause)
	m.HandleFunc("POST "+p+"/sessions/{id}/resume", s.resume)
	m.HandleFunc("GET "+p+"/sessions/{id}/meter", s.meter)
	m.HandleFunc("POST "+p+"/sessions/{id}/budget", s.budget)
	m.HandleFunc("POST "+p+"/sessions/{id}/limits", s.limits)
	m.HandleFunc("GET "+p+"/sessions/{id}/lifecycle", s.lifecycle)
	m.HandleFunc("GET "+p+"/sessions/{id}/net", s.netLog)
	m.HandleFunc("GET "+p+"/sessions/{id}/turns", s.turns)
	m.HandleFunc("GET "+p+"/sessions/{id}/events", s.events)
	m.HandleFunc("POST "+p+"/sessions/{id}/snapshots", s.takeSnapshot)
	m.HandleFunc("GET "+p+"/snapshots", s.listSnapshots)
	m.HandleFunc("POST "+p+"/snapshots/import", s.importSnapshot)
	m.HandleFunc("GET "+p+"/snapshots/{ref}", s.getSnapshot)
	m.HandleFunc("DELETE "+p+"/snapshots/{ref}", s.removeSnapshot)
	m.HandleFunc("POST "+p+"/snapshots/{ref}/restore", s.restoreSnapshot)
	m.HandleFunc("GET "+p+"/snapshots/{ref}/export", s.exportSnapshot)
	m.HandleFunc("GET "+p+"/sessions/{id}/terminal", s.terminal)
	m.HandleFunc("POST "+p+"/ui", s.startUI)
	m.HandleFunc("GET "+p+"/settings", s.getSettings)
	m.HandleFunc("PUT "+p+"/settings", s.putSettings)
	m.HandleFunc("GET "+p+"/secrets", s.listSecrets)
	m.HandleFunc("PUT "+p+"/secrets/{name}", s.setSecret)
	m.HandleFunc("DELETE "+p+"/secrets/{name}", s.deleteSecret)
	m.HandleFunc("GET "+p+"/images", s.listImages)
	m.HandleFunc("POST "+p+"/images/build", s.buildImage)
	m.HandleFunc("GET "+p+"/events", s.watch)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errdefs.NotFoundf("no endpoint %s %s in API %s: see docs/API.md", r.Method, r.URL.Path, api.Version))
	})
	return m
}

// Status maps an error class to its HTTP status.
func Status(c errdefs.Class) int {
	switch c {
	case errdefs.Invalid:
		return http.StatusBadRequest
	case errdefs.NotFound:
		return http.StatusNotFound
	case errdefs.Conflict:
		return http.StatusConflict
	case errdefs.Unavailable:
		return http.StatusServiceUnavailable
	case errdefs.Forbidden:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, err error) {
	c := errdefs.ClassOf(err)
	writeJSON(w, Status(c), api.Error{Class: string(c), Message: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	v := s.version
	v.API, v.Level = api.Version, api.Level
	writeJSON(w, 200, v)
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.eng.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if list == nil {
		list = []api.Session{}
	}
	writeJSON(w, 200, list)
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	sess, err := s.eng.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sess)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.eng.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, sess)
}

func (s *Server) removeSession(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.Remove(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// diff streams the session's diff as one JSON object, file by file, so
// that the engine holds one batch of a large session's files, never all:
// `{"files":[...],"session":...}`, or with stat=1 `{"stats":[...],...}`
// (a full diff leaves the stats to the client: they are a summary of the
// files). Like a patch, a failure after the first byte cuts the response
// short, so the client sees an error, never a diff that looks whole.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	stat := r.URL.Query().Get("stat") == "1"
	dw := newDiffWriter(w, stat)
	d, err := s.eng.DiffEach(r.Context(), r.PathValue("id"), r.URL.Query()["path"], stat, dw.file)
	if err == nil {
		err = dw.finish(d)
	}
	switch {
	case err != nil && !dw.started:
		writeError(w, err)
	case err != nil:
		panic(http.ErrAbortHandler)
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

func (s *Server) discard(w http.ResponseWriter, r *http.Request) {
	// A discard stops between files when the client goes away.
	s.outcomes(w, r, func(_ context.Context, id string, sel review.Selection) (api.Outcomes, error) {
		return s.eng.Discard(r.Context(), id, sel)
	})
}

func (s *Server) outcomes(w http.ResponseWriter, r *http.Request, do func(context.Context, string, review.Selection) (api.Outcomes, error)) {
	var req api.Selection
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	// An accept, once started, finishes even if the client goes away.
	out, err := do(context.WithoutCancel(r.Context()), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	if out.Outcomes == nil {
		out.Outcomes = []review.Outcome{}
	}
	writeJSON(w, 200, out)
}

// commands lists a session's commands; since=ID keeps those from that
// command on (what `logs -f` has not seen finish).
func (s *Server) commands(w http.ResponseWriter, r *http.Request) {
	var since int64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, errdefs.Invalidf("since %q: give a command id (0, 1, 2, ...)", v))
			return
		}
		since = n
	}
	cmds, err := s.eng.Commands(r.Context(), r.PathValue("id"), r.URL.Query().Get("output") == "1")
	if err != nil {
		writeError(w, err)
		return
	}
	out := []api.Command{}
	for _, c := range cmds {
		if c.ID >= since {
			out = append(out, c)
		}
	}
	writeJSON(w, 200, out)
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	list, err := s.eng.Images(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, list)
}

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

// jsonLines writes an application/x-ndjson answer, a line at a time from
// any goroutine; the first line begins the answer. Once it is closed (the
// last line written) later lines are dropped: an engine call that failed
// may still have goroutines reporting.
type jsonLines struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	enc     *json.Encoder
	started bool
	closed  bool
}

func (l *jsonLines) send(v any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sendLocked(v)
}

func (l *jsonLines) sendLocked(v any) {
	if l.closed {
		return
	}
	l.beginLocked()
	l.enc.Encode(v)
	http.NewResponseController(l.w).Flush()
}

// begin starts the answer before its first line.
func (l *jsonLines) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.beginLocked()
}

func (l *jsonLines) beginLocked() {
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", "application/x-ndjson")
		l.w.WriteHeader(200)
		l.enc = json.NewEncoder(l.w)
	}
}

// fail ends the answer with err: a plain HTTP error if nothing was sent
// yet, else the line line makes of it.
func (l *jsonLines) fail(err error, line func(*api.Error) any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if !l.started {
		writeError(l.w, err)
	} else {
		l.sendLocked(line(&api.Error{Class: string(errdefs.ClassOf(err)), Message: err.Error()}))
	}
	l.closed = true
}

func (l *jsonLines) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

func (s *Server) policy(w http.ResponseWriter, r *http.Request) {
	var req api.PolicyChange
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	p, err := s.eng.Policy(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, p)
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.Pause(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	s.getSession(w, r)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.Resume(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	s.getSession(w, r)
}

func (s *Server) limits(w http.ResponseWriter, r *http.Request) {
	var req api.Limits
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	sess, err := s.eng.SetLimits(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, sess)
}

func (s *Server) budget(w http.ResponseWriter, r *http.Request) {
	var req api.Budgets
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	sess, err := s.eng.SetBudgets(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, sess)
}

func (s *Server) meter(w http.ResponseWriter, r *http.Request) {
	m, err := s.eng.Meter(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, m)
}

func (s *Server) lifecycle(w http.ResponseWriter, r *http.Request) {
	l, err := s.eng.Lifecycle(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, l)
}

func (s *Server) netLog(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, errdefs.Invalidf("limit %q: give a number", v))
			return
		}
		limit = n
	}
	log, err := s.eng.EgressLog(r.Context(), r.PathValue("id"), r.URL.Query().Get("blocked") == "1", limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, log)
}

func (s *Server) turns(w http.ResponseWriter, r *http.Request) {
	turns, err := s.eng.Turns(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	if turns == nil {
		turns = []api.Turn{}
	}
	writeJSON(w, 200, turns)
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	turn := 0
	if v := r.URL.Query().Get("turn"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, errdefs.Invalidf("turn %q: give a turn number (1, 2, ...)", v))
			return
		}
		turn = n
	}
	evs, err := s.eng.Events(r.Context(), r.PathValue("id"), turn)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, evs)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	list, err := s.eng.Secrets(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, list)
}

func (s *Server) setSecret(w http.ResponseWriter, r *http.Request) {
	var req api.SecretRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.eng.SetSecret(r.Context(), r.PathValue("name"), req.Value); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.DeleteSecret(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// buildImage streams progress as JSON lines; the last line has Done or
// Error set.
func (s *Server) buildImage(w http.ResponseWriter, r *http.Request) {
	var req api.ImageBuildRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if !s.builds.TryLock() {
		writeError(w, errdefs.Conflictf("an image build is already running in this engine: wait for it to finish"))
		return
	}
	defer s.builds.Unlock()
	out := &jsonLines{w: w}
	out.begin()
	fail := func(err error) {
		out.fail(err, func(e *api.Error) any { return api.Progress{Stage: "failed", Error: e} })
	}
	defer s.catch(r, fail)
	var mu sync.Mutex
	last := time.Time{}
	send := func(p api.Progress) {
		mu.Lock()
		defer mu.Unlock()
		// Package managers print thousands of lines: pace them.
		if !p.Done && p.Error == nil && time.Since(last) < 50*time.Millisecond {
			return
		}
		last = time.Now()
		out.send(p)
	}
	if _, err := s.images.Build(r.Context(), req, send); err != nil {
		fail(err)
	}
	out.close()
}

// exec upgrades the connection and runs a command over frames.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.eng.Exists(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	if r.Header.Get("Upgrade") != api.UpgradeProtocol {
		writeError(w, errdefs.Invalidf("exec needs `Upgrade: %s`: see docs/API.md", api.UpgradeProtocol))
		return
	}
	st := s.newStream(w, r, req)
	defer st.close()
	defer s.catch(r, st.fail)
	if !st.upgrade() {
		return
	}
	st.finish(s.eng.Exec(st.ctx, r.PathValue("id"), req, st.sio(r.PathValue("id"))))
}

// run creates a session and runs its first command over frames. Errors
// before the session exists are plain HTTP responses.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	var req api.RunRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if r.Header.Get("Upgrade") != api.UpgradeProtocol {
		writeError(w, errdefs.Invalidf("run needs `Upgrade: %s`: see docs/API.md", api.UpgradeProtocol))
		return
	}
	st := s.newStream(w, r, req.Exec)
	defer st.close()
	defer s.catch(r, st.fail)
	// Until the upgrade, a client that goes away cancels the create.
	stop := context.AfterFunc(r.Context(), st.cancel)
	var id string
	upgraded := false
	sio := st.sio("")
	sio.Started = func(cmd int64) {
		api.WriteJSONFrame(st.out, api.FrameStarted, api.ExecStarted{Session: id, Command: cmd})
	}
	code, err := s.eng.Run(st.ctx, req.Create, req.Exec, sio, func(sess api.Session) {
		stop()
		id, upgraded = sess.ID, true
		if st.upgrade() {
			api.WriteJSONFrame(st.out, api.FrameSession, sess)
		}
	})
	if !upgraded {
		writeError(w, err)
		return
	}
	st.finish(code, err)
}

// stream is the engine's side of an upgraded exec connection.
type stream struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	req     api.ExecRequest
	ctx     context.Context
	cancel  func()
	conn    net.Conn
	out     *lockedWriter
	resize  chan api.Resize
	signals chan syscall.Signal
	stdin   io.Reader
	stdinW  *io.PipeWriter
}

func (s *Server) newStream(w http.ResponseWriter, r *http.Request, req api.ExecRequest) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	st := &stream{s: s, w: w, r: r, req: req, ctx: ctx, cancel: cancel, out: &lockedWriter{},
		resize: make(chan api.Resize, 4), signals: make(chan syscall.Signal, 4)}
	if req.Stdin {
		st.stdin, st.stdinW = io.Pipe()
	}
	return st
}

// upgrade switches the connection to frames and starts reading the
// client's; the stream's context ends with the connection.
func (st *stream) upgrade() bool {
	conn, brw, err := http.NewResponseController(st.w).Hijack()
	if err != nil {
		writeError(st.w, err)
		st.cancel()
		return false
	}
	st.conn = conn
	conn.SetDeadline(time.Time{}) // the server's are for requests, not streams
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", api.UpgradeProtocol)
	if err := brw.Flush(); err != nil {
		st.cancel()
		return false
	}
	st.out.set(conn)
	st.s.spawn(st.r, func() { st.s.readClient(brw.Reader, st.stdinW, st.resize, st.signals, st.cancel) }, st.fail)
	return true
}

func (st *stream) sio(id string) engine.ExecIO {
	return engine.ExecIO{
		Stdin:  st.stdin,
		Stdout: api.FrameWriter{W: st.out, Type: api.FrameStdout},
		Stderr: api.FrameWriter{W: st.out, Type: api.FrameStderr},
		Resize: st.resize,
		Signal: st.signals,
		Started: func(cmd int64) {
			api.WriteJSONFrame(st.out, api.FrameStarted, api.ExecStarted{Session: id, Command: cmd})
		},
	}
}

// finish writes the last frame: the exit code or the error.
func (st *stream) finish(code int, err error) {
	if err != nil {
		if st.ctx.Err() != nil {
			return // the client went away; the command is still recorded
		}
		st.errorFrame(err)
		return
	}
	api.WriteJSONFrame(st.out, api.FrameExit, api.ExecExit{ExitCode: code})
}

// fail ends the stream with err: a plain HTTP error before the upgrade,
// the error frame after it.
func (st *stream) fail(err error) {
	if st.conn == nil {
		writeError(st.w, err)
		return
	}
	st.errorFrame(err)
}

func (st *stream) errorFrame(err error) {
	api.WriteJSONFrame(st.out, api.FrameError, api.Error{Class: string(errdefs.ClassOf(err)), Message: err.Error()})
}

func (st *stream) close() {
	st.cancel()
	if st.conn != nil {
		st.conn.Close()
	}
}

// readClient reads the client's frames until the connection ends, which
// cancels the exec's context.
func (s *Server) readClient(r *bufio.Reader, stdin *io.PipeWriter, resize chan<- api.Resize, signals chan<- syscall.Signal, cancel func()) {
	defer cancel()
	closeStdin := func() {
		if stdin != nil {
			stdin.Close()
			stdin = nil
		}
	}
	defer closeStdin()
	for {
		typ, payload, err := api.ReadFrame(r)
		if err != nil {
			return
		}
		switch typ {
		case api.FrameStdin:
			if stdin != nil {
				stdin.Write(payload)
			}
		case api.FrameEOF:
			closeStdin()
		case api.FrameResize:
			var sz api.Resize
			if json.Unmarshal(payload, &sz) == nil {
				select {
				case resize <- sz:
				default:
				}
			}
		case api.FrameSignal:
			var sig api.Signal
			if json.Unmarshal(payload, &sig) == nil && sig.Signal > 0 && sig.Signal < 65 {
				select {
				case signals <- syscall.Signal(sig.Signal):
				default:
				}
			}
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return 0, io.ErrClosedPipe
	}
	return l.w.Write(p)
}

func (l *lockedWriter) set(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
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

func (s *Server) takeSnapshot(w http.ResponseWriter, r *http.Request) {
	var req api.SnapshotRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	snap, err := s.eng.Snapshot(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, snap)
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	out, err := s.eng.Snapshots(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, out)
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	out, err := s.eng.GetSnapshot(r.Context(), r.PathValue("ref"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, out)
}

func (s *Server) removeSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.RemoveSnapshot(r.Context(), r.PathValue("ref")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) restoreSnapshot(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	out, err := s.eng.Restore(r.Context(), r.PathValue("ref"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
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

func (s *Server) getSettings(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, s.eng.Settings(r.Context()))
}

func (s *Server) putSettings(w http.ResponseWriter, r *http.Request) {
	var req api.Settings
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	out, err := s.eng.SetSettings(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, out)
}

// startUI opens (once) the engine's TCP listener for the browser UI and
// answers its address with the token.
func (s *Server) startUI(w http.ResponseWriter, r *http.Request) {
	if s.StartUI == nil {
		writeError(w, errdefs.Unavailablef("this engine serves no user interface"))
		return
	}
	u, err := s.StartUI()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"url": u})
}
