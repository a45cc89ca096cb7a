package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// commands lists a session's commands; since=ID keeps those from that
// command on (what `logs -f` has not seen finish).
func (s *Server) commands(r *http.Request, _ none) ([]api.Command, error) {
	var since int64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, errdefs.Invalidf("since %q: give a command id (0, 1, 2, ...)", v)
		}
		since = n
	}
	cmds, err := s.eng.Commands(r.Context(), r.PathValue("id"), r.URL.Query().Get("output") == "1")
	if err != nil {
		return nil, err
	}
	out := []api.Command{}
	for _, c := range cmds {
		if c.ID >= since {
			out = append(out, c)
		}
	}
	return out, nil
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
