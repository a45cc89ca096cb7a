package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
)

func open(t *testing.T) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "airlock.db")
	s, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestSessionsAndIDPrefixes(t *testing.T) {
	s, path := open(t)
	ctx := context.Background()
	for _, id := range []string{"abc111", "abc222", "def333"} {
		if err := s.PutSession(ctx, store.Session{ID: id, Project: "/p", Image: "img", State: api.StateRunning, Created: time.Now(), Dir: "/d/" + id,
			Limits: api.Limits{CPUs: 1, Memory: 1 << 30}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		id    string
		want  string
		class errdefs.Class
	}{
		{"def", "def333", ""},
		{"abc111", "abc111", ""},
		{"abc", "", errdefs.Conflict},
		{"zzz", "", errdefs.NotFound},
		{"a%", "", errdefs.Invalid},
		{"", "", errdefs.Invalid},
	} {
		got, err := s.Session(ctx, tc.id)
		if tc.class != "" {
			if errdefs.ClassOf(err) != tc.class {
				t.Errorf("Session(%q): %v, want class %s", tc.id, err, tc.class)
			}
			continue
		}
		if err != nil || got.ID != tc.want || got.Limits.Memory != 1<<30 {
			t.Errorf("Session(%q) = %+v, %v", tc.id, got, err)
		}
	}
	// Reopening migrates nothing twice and keeps the data.
	s.Close()
	s2, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	list, err := s2.Sessions(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("after reopen: %d sessions, %v", len(list), err)
	}
}

func TestCommandsRecordAndCascade(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	s.PutSession(ctx, store.Session{ID: "s1", Project: "/p", Image: "i", State: api.StateRunning, Created: time.Now(), Dir: "/d"})
	id, err := s.StartCommand(ctx, store.Command{Command: api.Command{Session: "s1", Argv: []string{"make", "test"}, Started: time.Now()}, ExecID: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	running, _ := s.RunningCommands(ctx)
	if len(running) != 1 || running[0].ExecID != "e1" {
		t.Errorf("running: %+v", running)
	}
	s.SetOutput(ctx, id, []byte("ok\n"), false)
	code := 2
	s.FinishCommand(ctx, id, "exited", &code, time.Now())
	cmds, err := s.Commands(ctx, "s1", true)
	if err != nil || len(cmds) != 1 || cmds[0].Output != "ok\n" || *cmds[0].ExitCode != 2 || cmds[0].Argv[1] != "test" {
		t.Fatalf("commands: %+v, %v", cmds, err)
	}
	if running, _ := s.RunningCommands(ctx); len(running) != 0 {
		t.Errorf("finished command still running: %+v", running)
	}
	s.DeleteSession(ctx, "s1")
	if cmds, _ := s.Commands(ctx, "s1", false); len(cmds) != 0 {
		t.Errorf("commands survive their session: %+v", cmds)
	}
}
