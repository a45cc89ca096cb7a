package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

const testToken = "a-token-of-this-test-0123456789"

// logBuffer collects a server's log lines; handlers log from many
// goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// quiet is an engine every session of which exists and whose other calls
// fail as not found; tests override what they need.
type quiet struct{ Engine }

func (quiet) Exists(context.Context, string) error { return nil }
func (quiet) Exec(context.Context, string, api.ExecRequest, engine.ExecIO) (int, error) {
	return 0, nil
}
func (quiet) Import(_ context.Context, r io.Reader) (api.Snapshot, []string, error) {
	io.Copy(io.Discard, r)
	return api.Snapshot{ID: "imported"}, nil, nil
}
func (quiet) SetSecret(context.Context, string, string) error { return nil }
func (quiet) DeleteSecret(context.Context, string) error      { return nil }
func (quiet) Create(context.Context, api.CreateRequest) (api.Session, error) {
	return api.Session{}, errdefs.NotFoundf("no project here")
}

// newServer is a Server over eng, with its log kept.
func newServer(eng Engine) (*Server, *logBuffer) {
	logs := &logBuffer{}
	s := New(eng, nil, slog.New(slog.NewTextHandler(logs, nil)), api.VersionInfo{API: api.Version})
	s.StartUI = func() (string, error) { return "http://127.0.0.1:1/?token=x", nil }
	return s, logs
}

// tcpServer serves s's TCP side (with a one-page interface) on a loopback
// port.
func tcpServer(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(s.TCPHandler(TCP{
		Assets: fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>Airlock</title>")}},
		Built:  true, Token: testToken, Loopback: true,
	}))
	t.Cleanup(ts.Close)
	return ts
}

func portOf(ts *httptest.Server) string {
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	return p
}

// answer is what a test request got back.
type answer struct {
	status int
	header http.Header
	body   string
	err    api.Error // the error body, if any
}

// call sends one request to ts, never following a redirect. headers are
// "Name: value" lines.
func call(t *testing.T, ts *httptest.Server, method, path, body string, headers ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Add(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if resp.StatusCode >= 400 {
		json.Unmarshal(b, &a.err)
	}
	return a
}
