package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/errdefs"
	"github.com/coder/websocket"
)

// panicky is an engine with bugs: every call it makes panics, some of them
// after the answer has begun (a stream's first line, an exec's first
// output, a session made).
type panicky struct{ quiet }

func (panicky) List(context.Context) ([]api.Session, error) { panic("a bug in List") }
func (panicky) Agent(_ context.Context, _ string, _ api.AgentRequest, sink func(api.Event)) (api.Turn, error) {
	sink(api.Event{Type: "message", Text: "working"})
	panic("a bug in Agent")
}
func (panicky) Exec(_ context.Context, _ string, _ api.ExecRequest, sio engine.ExecIO) (int, error) {
	sio.Stdout.Write([]byte("partial output\n"))
	panic("a bug in Exec")
}
func (panicky) Run(_ context.Context, creq api.CreateRequest, _ api.ExecRequest, sio engine.ExecIO, created func(api.Session)) (int, error) {
	if creq.Project == "/before" {
		panic("a bug in Run before the session")
	}
	created(api.Session{ID: "abc"})
	sio.Stdout.Write([]byte("partial output\n"))
	panic("a bug in Run")
}
func (panicky) Create(context.Context, api.CreateRequest) (api.Session, error) {
	var m map[string]int
	m["nil map"]++ // a runtime error, not a panic(value)
	return api.Session{}, nil
}

// buggyBuilder reports progress, then panics.
type buggyBuilder struct{}

func (buggyBuilder) Build(_ context.Context, _ api.ImageBuildRequest, progress images.Progress) (*api.Image, error) {
	progress(api.Progress{Stage: "rootfs", Message: "busybox rootfs"})
	panic("a bug in Build")
}

// socketServer serves s's socket API on a unix socket and returns a
// client of it.
func socketServer(t *testing.T, s *Server) (*client.Client, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := HTTPServer(s.Handler(), s.log)
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return client.New(sock), sock
}

// wantPanicReported checks that a panic came back as the engine's error and
// was logged with its stack.
func wantPanicReported(t *testing.T, err error, logs *logBuffer, bug string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: the call succeeded", bug)
	}
	if errdefs.ClassOf(err) != errdefs.Internal || !strings.Contains(err.Error(), "engine's log") {
		t.Errorf("%s came back as %s %q: want an internal error that points at the engine's log", bug, errdefs.ClassOf(err), err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(logs.String(), bug) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l := logs.String(); !strings.Contains(l, bug) || !strings.Contains(l, "goroutine ") || !strings.Contains(l, "engine/server") {
		t.Errorf("the log lacks %q with its stack:\n%s", bug, l)
	}
}

// TestPanicFailsOnlyItsRequest: a bug in a handler or an engine call,
// before or after the answer began, streamed or upgraded, fails that
// request with a classed error and a log line with the stack; the engine
// keeps serving.
func TestPanicFailsOnlyItsRequest(t *testing.T) {
	s, logs := newServer(panicky{})
	s.images = buggyBuilder{}
	c, _ := socketServer(t, s)
	ctx := context.Background()
	alive := func(after string) {
		t.Helper()
		if _, err := c.Ping(ctx); err != nil {
			t.Fatalf("after %s the engine does not answer: %v", after, err)
		}
	}

	t.Run("plain", func(t *testing.T) {
		_, err := c.Sessions(ctx)
		wantPanicReported(t, err, logs, "a bug in List")
		alive("a panic in a handler")
	})
	t.Run("runtime error", func(t *testing.T) {
		_, err := c.Create(ctx, api.CreateRequest{Project: "/p"})
		wantPanicReported(t, err, logs, "assignment to entry in nil map")
		alive("a runtime error in a handler")
	})
	t.Run("agent stream", func(t *testing.T) {
		var events []api.Event
		_, err := c.Agent(ctx, "abc", api.AgentRequest{Agent: "custom", Prompt: "x"}, func(e api.Event) { events = append(events, e) })
		wantPanicReported(t, err, logs, "a bug in Agent")
		if len(events) != 1 || events[0].Text != "working" {
			t.Errorf("the events before the panic: %+v", events)
		}
		alive("a panic in a stream")
	})
	t.Run("image build stream", func(t *testing.T) {
		var stages []string
		_, err := c.BuildImage(ctx, api.ImageBuildRequest{Kind: "tiny"}, func(p api.Progress) { stages = append(stages, p.Stage) })
		wantPanicReported(t, err, logs, "a bug in Build")
		if len(stages) != 2 || stages[0] != "rootfs" {
			t.Errorf("the build's progress: %v", stages)
		}
		// The build lock was released with the panic.
		_, err = c.BuildImage(ctx, api.ImageBuildRequest{Kind: "tiny"}, nil)
		if errdefs.IsConflict(err) {
			t.Errorf("a build after the panic: %v", err)
		}
		alive("a panic in a build")
	})
	t.Run("exec", func(t *testing.T) {
		var out bytes.Buffer
		_, err := c.Exec(ctx, "abc", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{Stdout: &out, Stderr: &out}, nil)
		wantPanicReported(t, err, logs, "a bug in Exec")
		if out.String() != "partial output\n" {
			t.Errorf("the output before the panic: %q", out.String())
		}
		alive("a panic in an upgraded stream")
	})
	t.Run("run before the session", func(t *testing.T) {
		_, err := c.Run(ctx, api.RunRequest{Create: api.CreateRequest{Project: "/before"}, Exec: api.ExecRequest{Argv: []string{"true"}}}, client.ExecIO{}, nil)
		wantPanicReported(t, err, logs, "a bug in Run before the session")
		alive("a panic before an upgrade")
	})
	t.Run("run", func(t *testing.T) {
		var out bytes.Buffer
		_, err := c.Run(ctx, api.RunRequest{Create: api.CreateRequest{Project: "/p"}, Exec: api.ExecRequest{Argv: []string{"true"}}}, client.ExecIO{Stdout: &out, Stderr: &out}, nil)
		wantPanicReported(t, err, logs, "a bug in Run")
		alive("a panic in run's stream")
	})
}

// TestPanicInTerminal: the terminal's WebSocket gets the error message
// before it closes.
func TestPanicInTerminal(t *testing.T) {
	s, logs := newServer(panicky{})
	ts := tcpServer(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/v1/sessions/abc/terminal",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var ctl struct {
		Error *api.Error `json:"error"`
	}
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("the terminal closed without saying why: %v", err)
		}
		if typ == websocket.MessageText {
			json.Unmarshal(data, &ctl)
			break
		}
	}
	if ctl.Error == nil {
		t.Fatal("the terminal's last message has no error")
	}
	wantPanicReported(t, errdefs.New(errdefs.Class(ctl.Error.Class), "%s", ctl.Error.Message), logs, "a bug in Exec")
	if a := call(t, ts, "GET", "/v1/version", "", "Authorization: Bearer "+testToken); a.status != 200 {
		t.Errorf("after a panic in a terminal the engine answers %d", a.status)
	}
}

// TestPanicInGoroutine: a goroutine a handler starts (reading a stream's
// frames, a terminal's messages) recovers too, and says so.
func TestPanicInGoroutine(t *testing.T) {
	s, logs := newServer(quiet{})
	r, _ := http.NewRequest("POST", "/v1/sessions/abc/exec", nil)
	failed := make(chan error, 1)
	s.spawn(r, func() { panic("a bug in a stream's reader") }, func(err error) { failed <- err })
	select {
	case err := <-failed:
		wantPanicReported(t, err, logs, "a bug in a stream's reader")
	case <-time.After(5 * time.Second):
		t.Fatal("the goroutine's panic was not reported")
	}
}

// TestHTTPServerBounds: the servers the engine runs time out slow headers
// and idle connections and cap header size.
func TestHTTPServerBounds(t *testing.T) {
	s, _ := newServer(quiet{})
	hs := HTTPServer(s.Handler(), s.log)
	if hs.ReadHeaderTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 || hs.MaxHeaderBytes > 1<<20 || hs.ErrorLog == nil {
		t.Errorf("server bounds: header timeout %v, idle %v, header bytes %d, error log %v", hs.ReadHeaderTimeout, hs.IdleTimeout, hs.MaxHeaderBytes, hs.ErrorLog)
	}
	if hs.ReadTimeout != 0 || hs.WriteTimeout != 0 {
		t.Error("a whole-request timeout would cut streams (exec, terminals, exports)")
	}
	// A client that never finishes its headers is cut off.
	hs.ReadHeaderTimeout = 200 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(l)
	defer hs.Close()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET /v1/version HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 512)
	n, err := conn.Read(b)
	if err == nil && !strings.Contains(string(b[:n]), "408") {
		t.Errorf("a half-sent request got %q", b[:n])
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the engine waits for ever on a client that never finishes its headers")
	}
}
