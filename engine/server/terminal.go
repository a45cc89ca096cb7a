package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/coder/websocket"
)

// terminal runs an interactive shell (or ?cmd=ARG&cmd=ARG) in a session
// with a TTY over a WebSocket, for browsers: binary messages carry the
// terminal's bytes both ways; text messages carry JSON control, from the
// client {"resize": {"width", "height"}}, from the engine {"exit_code": N}
// or {"error": {...}} before it closes.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.eng.Exists(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	argv := r.URL.Query()["cmd"]
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", "if command -v bash >/dev/null; then exec bash -l; else exec sh -l; fi"}
	}
	width, _ := strconv.Atoi(r.URL.Query().Get("cols"))
	height, _ := strconv.Atoi(r.URL.Query().Get("rows"))
	if width <= 0 || height <= 0 {
		width, height = 80, 24
	}
	// A browser's Origin must be this page's (the TCP listener checks it
	// first, with its own message).
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The last message: the exit code or why there is none.
	var endOnce sync.Once
	end := func(code int, err error) {
		endOnce.Do(func() {
			var msg []byte
			if err != nil {
				msg, _ = json.Marshal(map[string]any{"error": api.Error{Class: string(errdefs.ClassOf(err)), Message: err.Error()}})
			} else {
				msg, _ = json.Marshal(map[string]any{"exit_code": code})
			}
			c.Write(context.WithoutCancel(ctx), websocket.MessageText, msg)
			c.Close(websocket.StatusNormalClosure, "")
		})
	}
	fail := func(err error) { end(-1, err); cancel() }
	defer s.catch(r, fail)
	inR, inW := io.Pipe()
	resize := make(chan api.Resize, 4)
	s.spawn(r, func() {
		defer inW.Close()
		for {
			typ, data, err := c.Read(ctx)
			if err != nil {
				cancel()
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := inW.Write(data); err != nil {
					return
				}
				continue
			}
			var ctl struct {
				Resize *api.Resize `json:"resize"`
			}
			if json.Unmarshal(data, &ctl) == nil && ctl.Resize != nil {
				select {
				case resize <- *ctl.Resize:
				default:
				}
			}
		}
	}, fail)
	out := &wsWriter{ctx: ctx, c: c}
	end(s.eng.Exec(ctx, id, api.ExecRequest{Argv: argv, TTY: true, Stdin: true, Width: uint(width), Height: uint(height)},
		engine.ExecIO{Stdin: inR, Stdout: out, Stderr: out, Resize: resize}))
}

type wsWriter struct {
	ctx context.Context
	c   *websocket.Conn
}

func (w *wsWriter) Write(p []byte) (int, error) {
	if err := w.c.Write(w.ctx, websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
