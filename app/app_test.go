package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/engine/server"
)

// events records what the app sends to the window.
type events struct {
	mu  sync.Mutex
	got map[string][]any
}

func (e *events) emit(name string, data ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.got == nil {
		e.got = map[string][]any{}
	}
	e.got[name] = append(e.got[name], data...)
}

func (e *events) all(name string) []any {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]any{}, e.got[name]...)
}

// start serves a real engine on a socket and returns an app on it, as the
// desktop window would have it.
func start(t *testing.T) (*App, *events, string) {
	t.Helper()
	e := enginetest.Start(t)
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: server.New(e.Engine, &images.Builder{Docker: e.Docker, Scratch: t.TempDir()}, nil, api.VersionInfo{API: api.Version}).Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	a := New(sock)
	ev := &events{}
	a.ctx, a.events = context.Background(), ev
	p := filepath.Join(t.TempDir(), "proj")
	os.MkdirAll(p, 0o755)
	os.WriteFile(filepath.Join(p, "README.md"), []byte("# app\n"), 0o644)
	return a, ev, p
}

// TestBindings drives the desktop app's bindings against a real engine:
// requests, an error with its class, a JSON-lines stream, a terminal.
func TestBindings(t *testing.T) {
	a, ev, p := start(t)
	body, _ := json.Marshal(api.CreateRequest{Project: p})
	out, err := a.Request("POST", "/sessions", string(body))
	if err != nil {
		t.Fatal(err)
	}
	var s api.Session
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.ID == "" {
		t.Fatalf("create through the app: %q %v", out, err)
	}
	if out, err := a.Request("GET", "/sessions", ""); err != nil || !strings.Contains(out, s.ID) {
		t.Errorf("list through the app: %q %v", out, err)
	}
	// Errors keep their class for the frontend.
	if _, err := a.Request("GET", "/sessions/000000000000", ""); err == nil || !strings.HasPrefix(err.Error(), "not_found: ") {
		t.Errorf("a missing session: %v", err)
	}
	if _, err := a.Request("GET", "/../secrets", ""); err == nil || !strings.HasPrefix(err.Error(), "invalid: ") {
		t.Errorf("a path out of the API: %v", err)
	}

	// A stream: a custom agent's turn, line by line, then its end.
	turn, _ := json.Marshal(api.AgentRequest{Agent: "custom", Cmd: "echo working on {prompt}; echo x > x.txt", Prompt: "it"})
	id, err := a.Stream("POST", "/sessions/"+s.ID+"/agent", string(turn))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(ev.all("stream-end:"+id)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if end := ev.all("stream-end:" + id); len(end) != 1 || end[0] != "" {
		t.Fatalf("the stream's end: %v", end)
	}
	var lines []string
	for _, l := range ev.all("stream:" + id) {
		lines = append(lines, l.(string))
	}
	if joined := strings.Join(lines, "\n"); !strings.Contains(joined, "working on it") || !strings.Contains(joined, `"turn"`) {
		t.Errorf("the stream's lines:\n%s", joined)
	}

	// A large answer read as bytes (the diff): its chunks, in order, make
	// the whole JSON.
	if err := a.ReadAs("w1-diff", "GET", "/sessions/"+s.ID+"/diff"); err != nil {
		t.Fatal(err)
	}
	for len(ev.all("read-end:w1-diff")) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if end := ev.all("read-end:w1-diff"); len(end) != 1 || end[0] != "" {
		t.Fatalf("the read's end: %v", end)
	}
	var raw []byte
	for _, c := range ev.all("read:w1-diff") {
		b, err := base64.StdEncoding.DecodeString(c.(string))
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b...)
	}
	var d api.Diff
	if err := json.Unmarshal(raw, &d); err != nil || len(d.Files) != 1 || d.Files[0].Path != "x.txt" {
		t.Errorf("the diff read through ReadAs: %v %q", err, raw)
	}
	if err := a.ReadAs("12", "GET", "/sessions/"+s.ID+"/diff"); err == nil {
		t.Error("ReadAs under a number Stream may choose was accepted")
	}

	// A terminal: typed into, resized, its output back as events.
	tid, err := a.TerminalOpen(s.ID, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.TerminalInput(tid, base64.StdEncoding.EncodeToString([]byte("cat x.txt; echo term-$((40+2))\n"))); err != nil {
		t.Fatal(err)
	}
	screen := func() string {
		var b strings.Builder
		for _, d := range ev.all("term:" + tid) {
			raw, _ := base64.StdEncoding.DecodeString(d.(string))
			b.Write(raw)
		}
		return b.String()
	}
	for !strings.Contains(screen(), "term-42") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if sc := screen(); !strings.Contains(sc, "\r\nx\r\n") {
		t.Errorf("the terminal shows %q", sc)
	}
	// (A resize reaches the PTY as the CLI's does: `airlock shell`'s
	// test checks it with stty, which the tiny image lacks.)
	a.TerminalResize(tid, 100, 30)
	a.TerminalInput(tid, base64.StdEncoding.EncodeToString([]byte("exit 3\n")))
	for len(ev.all("term-exit:"+tid)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if exit := ev.all("term-exit:" + tid); len(exit) != 2 || exit[0] != 3 {
		t.Errorf("the terminal's end: %v", exit)
	}
	if err := a.TerminalInput(tid, "eA=="); err == nil || !strings.HasPrefix(err.Error(), "not_found: ") {
		t.Errorf("input to an ended terminal: %v", err)
	}
}

// TestWatchStream: the session events reach the window through Stream as
// server-sent event lines (the list, then a session paused from
// elsewhere), and StreamClose ends the stream without an error.
func TestWatchStream(t *testing.T) {
	a, ev, p := start(t)
	id, err := a.Stream("GET", "/events", "")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.CreateRequest{Project: p})
	out, err := a.Request("POST", "/sessions", string(body))
	if err != nil {
		t.Fatal(err)
	}
	var s api.Session
	json.Unmarshal([]byte(out), &s)
	if _, err := a.Request("POST", "/sessions/"+s.ID+"/pause", ""); err != nil {
		t.Fatal(err)
	}
	paused := func() bool {
		for _, l := range ev.all("stream:" + id) {
			var e api.SessionEvent
			if data, ok := strings.CutPrefix(l.(string), "data: "); ok && json.Unmarshal([]byte(data), &e) == nil &&
				e.Type == api.SessionChanged && e.Session.ID == s.ID && e.Session.State == api.StatePaused {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !paused() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	lines := ev.all("stream:" + id)
	if len(lines) == 0 || !strings.HasPrefix(lines[0].(string), `data: {"type":"sessions"`) || !paused() {
		t.Fatalf("the event stream's lines: %v", lines)
	}
	a.StreamClose(id)
	for len(ev.all("stream-end:"+id)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if end := ev.all("stream-end:" + id); len(end) != 1 || end[0] != "" {
		t.Errorf("the stream's end after StreamClose: %v", end)
	}
}

// StreamAs runs a stream under the window's own id, so the window listens
// before the first line; ids it could collide with, or that are not plain,
// are refused.
func TestStreamAs(t *testing.T) {
	a, ev, _ := start(t)
	for _, bad := range []string{"", "12", "a b", "x/../y", strings.Repeat("a", 65)} {
		if err := a.StreamAs(bad, "GET", "/events", ""); err == nil {
			t.Errorf("StreamAs(%q) was accepted", bad)
		}
	}
	if err := a.StreamAs("w1-list", "GET", "/events", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.StreamAs("w1-list", "GET", "/events", ""); err == nil {
		t.Error("a second stream under an id in use was accepted")
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(ev.all("stream:w1-list")) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if lines := ev.all("stream:w1-list"); len(lines) == 0 || !strings.HasPrefix(lines[0].(string), `data: {"type":"sessions"`) {
		t.Fatalf("the stream's first line: %v", lines)
	}
	a.StreamClose("w1-list")
}
