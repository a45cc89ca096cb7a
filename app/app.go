// Package app is the desktop app's bridge to the engine: the methods the
// Wails frontend calls. The frontend is the same one the engine serves to
// browsers (frontend/); here its API calls go through Request and Stream
// to the engine's unix socket, and the terminal through Terminal*, with
// output as Wails events. It is the only package besides the root main.go
// that imports Wails, and all Wails runtime calls go through runtime.go.
package app

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
)

// App is bound to the frontend.
type App struct {
	ctx    context.Context
	socket string
	client *client.Client
	events eventer
	seq    atomic.Int64

	mu      sync.Mutex
	terms   map[string]*term
	streams map[string]context.CancelFunc // open Streams, by id
}

// eventer sends events to the frontend (runtime.go; a fake in tests).
type eventer interface {
	emit(name string, data ...any)
}

// New returns an app that talks to the engine on socket.
func New(socket string) *App {
	return &App{socket: socket, client: client.New(socket), terms: map[string]*term{}, streams: map[string]context.CancelFunc{}}
}

// Startup is called by Wails when the window is ready. When no engine
// answers and the app runs as root, it starts one (`airlock serve`, found
// next to the app or on the PATH); as a normal user the interface says
// how to install the engine as a service. A scheduled run that ends, and
// a session under --net ask that waits for an answer, are told with a
// desktop notification.
func (a *App) Startup(ctx context.Context) {
	a.ctx = ctx
	a.events = wailsEvents{ctx}
	if n := newNotifier(ctx); n != nil {
		go a.watchRuns(ctx, n, runsPoll)
		go a.watchQuestions(ctx, n, questionsPoll)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := a.client.Ping(pctx)
	cancel()
	if err == nil || os.Geteuid() != 0 {
		return
	}
	bin := filepath.Join(filepath.Dir(os.Args[0]), "airlock")
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("airlock"); err != nil {
			return
		}
	}
	cmd := exec.Command(bin, "serve", "--engine", a.socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		go cmd.Wait()
		a.client.WaitReady(ctx, 15*time.Second)
	}
}

// Shutdown closes the terminals and streams when the window goes.
func (a *App) Shutdown(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.terms {
		t.cancel()
	}
	for _, cancel := range a.streams {
		cancel()
	}
}

// classed prefixes an error with its class ("not_found: ..."), which the
// frontend turns back into the engine's error.
func classed(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s", errdefs.ClassOf(err), err.Error())
}

func checkPath(path string) error {
	if !strings.HasPrefix(path, "/") || strings.Contains(path, "..") {
		return errdefs.Invalidf("bad API path %q", path)
	}
	return nil
}

// Request forwards one API call (path below /v1, with its query) and
// returns the answer's body.
func (a *App) Request(method, path, body string) (string, error) {
	if err := checkPath(path); err != nil {
		return "", classed(err)
	}
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	rc, err := a.client.Raw(a.ctx, method, path, b)
	if debug {
		log.Printf("app: %s %s: %v", method, path, err)
	}
	if err != nil {
		return "", classed(err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	return string(out), classed(err)
}

// debug logs the frontend's calls (AIRLOCK_APP_DEBUG=1), for tests and
// for finding out what the window did.
var debug = os.Getenv("AIRLOCK_APP_DEBUG") != ""

// Stream forwards a call whose answer comes in lines: JSON lines (agent
// turns, image builds) or server-sent events (the session events). It
// returns a stream id at once; each line comes as the event "stream:ID",
// and the end as "stream-end:ID" with the error, if any. StreamClose
// ends it early. Lines may come before the window has the id: a window
// that must see every line uses StreamAs.
func (a *App) Stream(method, path, body string) (string, error) {
	id := strconv.FormatInt(a.seq.Add(1), 10)
	return id, a.startStream(id, method, path, body)
}

// StreamAs is Stream under an id the window chose (letters, digits and
// '-', at most 64), so that it listens for the id's events before the
// first line can come.
func (a *App) StreamAs(id, method, path, body string) error {
	if err := windowID(id); err != nil {
		return classed(err)
	}
	return a.startStream(id, method, path, body)
}

// ReadAs forwards a call whose large answer the window reads as it comes
// (a diff: one JSON object of many megabytes, frontend/src/lib/arraystream.ts):
// its bytes come in order as events "read:ID" (base64 chunks of at most
// 64 KiB), the end as "read-end:ID" with the error, if any (a cut answer
// is one). The id is the window's, as for StreamAs; StreamClose ends it.
func (a *App) ReadAs(id, method, path string) error {
	if err := windowID(id); err != nil {
		return classed(err)
	}
	return a.open(id, method, path, "", func(rc io.Reader) error {
		buf := make([]byte, 64<<10)
		for {
			n, err := rc.Read(buf)
			if n > 0 {
				a.events.emit("read:"+id, base64.StdEncoding.EncodeToString(buf[:n]))
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}, "read-end:"+id)
}

// windowID checks an id the window chose for a stream.
func windowID(id string) error {
	if id == "" || len(id) > 64 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
		return errdefs.Invalidf("stream id %q: give 1 to 64 letters, digits or '-'", id)
	}
	if _, err := strconv.ParseInt(id, 10, 64); err == nil {
		return errdefs.Invalidf("stream id %q: a number is one Stream may choose; add a letter", id)
	}
	return nil
}

func (a *App) startStream(id, method, path, body string) error {
	return a.open(id, method, path, body, func(rc io.Reader) error {
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		first := true
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				if debug && first {
					log.Printf("app: stream %s: its first line", id)
				}
				first = false
				a.events.emit("stream:"+id, line)
			}
		}
		return sc.Err()
	}, "stream-end:"+id)
}

// open starts the call under id and hands its answer to pump in a
// goroutine, then emits end with pump's error ("" when none, or when the
// stream was closed).
func (a *App) open(id, method, path, body string, pump func(io.Reader) error, end string) error {
	if err := checkPath(path); err != nil {
		return classed(err)
	}
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	a.mu.Lock()
	_, taken := a.streams[id]
	a.mu.Unlock()
	if taken {
		return classed(errdefs.Conflictf("stream id %q is in use", id))
	}
	ctx, cancel := context.WithCancel(a.ctx)
	rc, err := a.client.Raw(ctx, method, path, b)
	if debug {
		log.Printf("app: %s %s: %v (stream %s)", method, path, err, id)
	}
	if err != nil {
		cancel()
		return classed(err)
	}
	a.mu.Lock()
	a.streams[id] = cancel
	a.mu.Unlock()
	go func() {
		defer func() {
			a.mu.Lock()
			delete(a.streams, id)
			a.mu.Unlock()
			cancel()
		}()
		defer rc.Close()
		msg := ""
		if err := pump(rc); err != nil && ctx.Err() == nil {
			msg = classed(err).Error()
		}
		a.events.emit(end, msg)
	}()
	return nil
}

// StreamClose ends a Stream (the window stops following it).
func (a *App) StreamClose(id string) {
	a.mu.Lock()
	cancel := a.streams[id]
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

type term struct {
	in     *io.PipeWriter
	cancel context.CancelFunc

	mu   sync.Mutex
	exec *client.Exec // nil until the shell runs
}

// TerminalOpen starts a shell on a PTY in the session. Output comes as
// events "term:ID" (base64), the end as "term-exit:ID" with the exit code
// (-1 when unknown) and an error message.
func (a *App) TerminalOpen(session string, cols, rows int) (string, error) {
	if cols <= 0 || rows <= 0 {
		cols, rows = 80, 24
	}
	id := "t" + strconv.FormatInt(a.seq.Add(1), 10)
	ctx, cancel := context.WithCancel(a.ctx)
	inR, inW := io.Pipe()
	t := &term{in: inW, cancel: cancel}
	a.mu.Lock()
	a.terms[id] = t
	a.mu.Unlock()
	out := writerFunc(func(p []byte) (int, error) {
		a.events.emit("term:"+id, base64.StdEncoding.EncodeToString(p))
		return len(p), nil
	})
	req := api.ExecRequest{Argv: []string{"/bin/sh", "-c", "if command -v bash >/dev/null; then exec bash -l; else exec sh -l; fi"},
		TTY: true, Stdin: true, Width: uint(cols), Height: uint(rows)}
	go func() {
		defer func() {
			a.mu.Lock()
			delete(a.terms, id)
			a.mu.Unlock()
			cancel()
		}()
		code, err := a.client.Exec(ctx, session, req, client.ExecIO{Stdin: inR, Stdout: out, Stderr: out}, func(x *client.Exec) {
			t.mu.Lock()
			t.exec = x
			t.mu.Unlock()
		})
		msg := ""
		if err != nil && !errors.Is(err, context.Canceled) {
			msg, code = err.Error(), -1
		}
		a.events.emit("term-exit:"+id, code, msg)
	}()
	return id, nil
}

func (a *App) term(id string) *term {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.terms[id]
}

// TerminalInput types into a terminal (base64).
func (a *App) TerminalInput(id, b64 string) error {
	t := a.term(id)
	if t == nil {
		return classed(errdefs.NotFoundf("terminal %s has ended", id))
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return classed(errdefs.Invalidf("terminal input: %v", err))
	}
	_, err = t.in.Write(b)
	return classed(err)
}

// TerminalResize changes a terminal's size.
func (a *App) TerminalResize(id string, cols, rows int) {
	if t := a.term(id); t != nil && cols > 0 && rows > 0 {
		t.mu.Lock()
		x := t.exec
		t.mu.Unlock()
		if x != nil {
			x.Resize(uint(cols), uint(rows))
		}
	}
}

// TerminalClose ends a terminal.
func (a *App) TerminalClose(id string) {
	if t := a.term(id); t != nil {
		t.in.Close()
		t.cancel()
	}
}

// PickProject opens the native folder dialog.
func (a *App) PickProject() (string, error) { return pickFolder(a.ctx, "Choose a project") }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
