package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/creack/pty"
	"github.com/spf13/cobra"
)

func TestUsageArgs(t *testing.T) {
	for _, tc := range []struct {
		use    string
		kinds  []argKind
		repeat bool
	}{
		{"exec ID -- COMMAND [ARG...]", []argKind{argSession}, false},
		{"rm ID [ID...]", []argKind{argSession, argSession}, true},
		{"meter [ID]", []argKind{argSession}, false},
		{"restore SNAPSHOT", []argKind{argSnapshot}, false},
		{"rm SNAPSHOT...", []argKind{argSnapshot}, true},
		{"accept ID [PATH...]", []argKind{argSession}, false},
		{"ls", nil, false},
		{"rm NAME", nil, false},
	} {
		kinds, repeat := usageArgs(tc.use)
		if !reflect.DeepEqual(kinds, tc.kinds) || repeat != tc.repeat {
			t.Errorf("%q: %v %v, want %v %v", tc.use, kinds, repeat, tc.kinds, tc.repeat)
		}
	}
}

// fakeEngine serves sessions and snapshots on a unix socket, as the
// engine's API does.
func fakeEngine(t *testing.T) string {
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]api.Session{
			{ID: "3f2a00000001", State: "running", Project: "/src/app"},
			{ID: "3f9900000002", State: "paused", Project: "/src/app"},
			{ID: "77bc00000003", State: "running", Project: "/src/lib"},
		})
	})
	m.HandleFunc("GET /v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]api.Schedule{{Name: "nightly", Cron: "@daily"}, {Name: "hourly", Cron: "@hourly"}})
	})
	m.HandleFunc("GET /v1/snapshots", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]api.Snapshot{
			{ID: "aaaa1111bbbb2222", Name: "before-refactor", Session: "3f2a00000001"},
			{ID: "cccc3333dddd4444", Session: "77bc00000003"},
		})
	})
	srv := &http.Server{Handler: m}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// complete runs cobra's completion request as a shell does and returns
// the values offered (descriptions dropped) and the directive line.
func complete(t *testing.T, socket string, args ...string) ([]string, string) {
	t.Helper()
	root := newRoot(&globals{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{cobra.ShellCompRequestCmd, "--engine", socket}, args...))
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("complete %v: %v", args, err)
	}
	var values []string
	directive := ""
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(line, ":") {
			directive = line
			continue
		}
		v, _, _ := strings.Cut(line, "\t")
		values = append(values, v)
	}
	return values, directive
}

func TestCompletion(t *testing.T) {
	sock := fakeEngine(t)
	noFiles := ":4" // ShellCompDirectiveNoFileComp
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"exec", ""}, []string{"3f2a00000001", "3f9900000002", "77bc00000003"}},
		{[]string{"diff", "3f"}, []string{"3f2a00000001", "3f9900000002"}},
		{[]string{"rm", "3f2a00000001", ""}, []string{"3f9900000002", "77bc00000003"}}, // not twice
		{[]string{"logs", "77"}, []string{"77bc00000003"}},
		{[]string{"restore", ""}, []string{"before-refactor", "cccc3333dddd"}},
		{[]string{"snapshot", "rm", "b"}, []string{"before-refactor"}},
		{[]string{"run", "--agent", "co"}, []string{"codex"}},
		{[]string{"schedule", "run", "n"}, []string{"nightly"}},
		{[]string{"policy", "3f2a00000001", "--net", ""}, []string{"allow-all", "deny-all", "custom", "ask"}},
	} {
		got, directive := complete(t, sock, tc.args...)
		if tc.args[0] == "run" || tc.args[0] == "policy" {
			got = matching(got, tc.args[len(tc.args)-1], nil) // the shell filters fixed lists
		}
		if !reflect.DeepEqual(got, tc.want) || directive != noFiles {
			t.Errorf("complete %v: %v %s, want %v %s", tc.args, got, directive, tc.want, noFiles)
		}
	}
	// Past a command's one session id, the shell completes as usual.
	if got, directive := complete(t, sock, "exec", "3f2a00000001", ""); len(got) != 0 || directive != ":0" {
		t.Errorf("second argument of exec: %v %s", got, directive)
	}
}

// TestCompletionWithoutEngine: with no engine answering, completion is
// quietly empty, fast, and starts no engine.
func TestCompletionWithoutEngine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	got, directive := complete(t, sock, "exec", "")
	if len(got) != 0 || directive != ":4" {
		t.Errorf("got %v %s", got, directive)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("completion started an engine on %s", sock)
	}
}

func TestColorOn(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	if !colorOn(tty) {
		t.Error("a terminal without NO_COLOR gets no colour")
	}
	if colorOn(w) {
		t.Error("a pipe gets colour")
	}
	t.Setenv("NO_COLOR", "1")
	if colorOn(tty) {
		t.Error("NO_COLOR=1 still colours a terminal")
	}
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "dumb")
	if colorOn(tty) {
		t.Error("TERM=dumb gets colour")
	}
}
