package engine

import (
	"context"
	"github.com/airlock/airlock/engine/timeline"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/secrets"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/container"
)

// removeDocker is Docker for a removal: it records the containers
// removed and answers nothing else.
type removeDocker struct {
	Docker
	removed []string
}

func (d *removeDocker) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	d.removed = append(d.removed, id)
	return nil
}

// quietMeter is a Meter with no cgroups to remove.
type quietMeter struct{ Meter }

func (quietMeter) Remove(context.Context, string) error { return nil }

// `airlock rm` forgets the API key an agent turn gave the session (it was
// kept in memory for the session's injections): once the session is
// gone, no request can be given it. Runs without Docker.
func TestRemoveForgetsSessionSecrets(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sec, err := secrets.Open(dir, st)
	if err != nil {
		t.Fatal(err)
	}
	d := &removeDocker{}
	e := &Engine{docker: d, store: st, stateDir: dir, log: slog.New(slog.DiscardHandler),
		sessions: map[string]*live{}, secrets: sec, meter: quietMeter{}}
	e.ports = newPorts(e)
	e.timeline = newTimeline(e, timeline.Options{Every: -1})
	const id, name = "0123456789ab", "ANTHROPIC_API_KEY"
	if err := os.MkdirAll(e.sessionDir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSession(ctx, store.Session{ID: id, Project: t.TempDir(), Image: "airlock/tiny", State: api.StateRunning,
		Created: time.Now(), Dir: e.sessionDir(id)}); err != nil {
		t.Fatal(err)
	}
	e.setSessionSecret(id, name, "sk-given-by-the-caller")
	if v, err := e.secret(ctx, id, name); err != nil || v != "sk-given-by-the-caller" {
		t.Fatalf("the session's key before rm: %q, %v", v, err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.removed, []string{"airlock-" + id}) {
		t.Errorf("containers removed: %v", d.removed)
	}
	if v, err := e.secret(ctx, id, name); !errdefs.IsNotFound(err) {
		t.Errorf("after rm the session's key is still held: %q, %v", v, err)
	}
}
