package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// TestWatchEvents follows GET /v1/events against a real engine: the list
// first, then a session created, a command that changed a file, a pause
// from another client and the resume, the removal; and the stream ends
// when the engine's HTTP server shuts down, so that it does not hold the
// shutdown up.
func TestWatchEvents(t *testing.T) {
	e := enginetest.Start(t)
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := HTTPServer(New(e.Engine, nil, nil, api.VersionInfo{API: api.Version}).Handler(), nil)
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}

	resp, err := hc.Get("http://engine/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("GET /v1/events: %d %q", resp.StatusCode, ct)
	}
	events := make(chan api.SessionEvent, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev api.SessionEvent
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Errorf("an event that is not JSON: %q", data)
				}
				events <- ev
			}
		}
	}()
	// next waits for the event want accepts, skipping others.
	next := func(what string, want func(api.SessionEvent) bool) api.SessionEvent {
		t.Helper()
		for ev := range events {
			if want(ev) {
				return ev
			}
		}
		t.Fatalf("the stream ended before %s", what)
		return api.SessionEvent{}
	}
	first := next("the list", func(api.SessionEvent) bool { return true })
	if first.Type != api.SessionsListed || len(first.Sessions) != 0 {
		t.Fatalf("the first event is %+v, want the (empty) list", first)
	}

	ctx := context.Background()
	p := t.TempDir()
	os.WriteFile(filepath.Join(p, "a.txt"), []byte("a\n"), 0o644)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	if err != nil {
		t.Fatal(err)
	}
	state := func(st string) func(api.SessionEvent) bool {
		return func(ev api.SessionEvent) bool {
			return ev.Type == api.SessionChanged && ev.Session.ID == s.ID && ev.Session.State == st
		}
	}
	next("the session created", state(api.StateRunning))

	if _, err := e.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo b > b.txt"}}, engine.ExecIO{}); err != nil {
		t.Fatal(err)
	}
	next("its count of changes", func(ev api.SessionEvent) bool {
		return ev.Type == api.SessionChanged && ev.Session.ID == s.ID && ev.Session.Changed == 1
	})

	// Another client (the CLI, say) pauses and resumes it.
	for _, verb := range []string{"pause", "resume"} {
		r, err := hc.Post("http://engine/v1/sessions/"+s.ID+"/"+verb, "application/json", nil)
		if err != nil || r.StatusCode != 200 {
			t.Fatalf("%s: %v %v", verb, r, err)
		}
		r.Body.Close()
		next(verb, state(map[string]string{"pause": api.StatePaused, "resume": api.StateRunning}[verb]))
	}

	if err := e.Remove(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	next("the removal", func(ev api.SessionEvent) bool { return ev.Type == api.SessionRemoved && ev.ID == s.ID })

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		t.Errorf("shutdown with a stream open: %v", err)
	}
	for range events {
	}
}
