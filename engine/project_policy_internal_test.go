package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// The ask timeout is a setting: a session under the ask mode that sets
// none gets the engine's, and its own wins.
func TestAskTimeoutSetting(t *testing.T) {
	c := newCore(t)
	ctx := context.Background()
	if _, err := c.e.SetSettings(ctx, api.Settings{Egress: api.EgressPolicy{AskTimeout: 2 * time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if got := c.e.Settings(ctx).Egress; got.AskTimeout != 2*time.Minute || got.Mode != "custom" {
		t.Fatalf("settings' egress after setting the ask timeout alone: %+v", got)
	}
	if _, err := c.e.SetSettings(ctx, api.Settings{Egress: api.EgressPolicy{AskTimeout: 2 * time.Hour}}); !errdefs.IsInvalid(err) {
		t.Errorf("a 2h ask timeout: %v, want invalid", err)
	}
	for _, tc := range []struct {
		spec *api.EgressPolicy
		want time.Duration
	}{
		{&api.EgressPolicy{Mode: "ask"}, 2 * time.Minute},
		{&api.EgressPolicy{Mode: "ask", AskTimeout: 5 * time.Second}, 5 * time.Second},
		{&api.EgressPolicy{Allow: []string{"example.org"}}, 2 * time.Minute},
	} {
		s, err := c.e.create(ctx, api.CreateRequest{Project: c.project, Image: "airlock/tiny", Egress: tc.spec}, idle{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Egress == nil || s.Egress.AskTimeout != tc.want {
			t.Errorf("session of %+v: egress %+v, want ask timeout %s", *tc.spec, s.Egress, tc.want)
		}
		if got := c.e.liveSession(s.ID).net.Gateway.proxy.Policy().AskTimeout; got != tc.want {
			t.Errorf("the proxy of %+v holds questions %s, want %s", *tc.spec, got, tc.want)
		}
		if err := c.e.Remove(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// A project's saved policy: `policy save` writes a session's running
// policy into .airlock/policy.yaml (keeping the accept policy beside it),
// and the project's next sessions start from it.
func TestProjectPolicy(t *testing.T) {
	c := newCore(t)
	ctx := context.Background()
	file := filepath.Join(c.project, ".airlock", "policy.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("auto_accept: [\"docs/**\"] # docs need no human\negress:\n  mode: ask\n  allow: [api.example.org]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	newSession := func(spec *api.EgressPolicy) api.Session {
		t.Helper()
		s, err := c.e.create(ctx, api.CreateRequest{Project: c.project, Image: "airlock/tiny", Egress: spec}, idle{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.e.Remove(ctx, s.ID) })
		return s
	}
	s := newSession(nil)
	if s.Egress == nil || s.Egress.Mode != "ask" || !slices.Equal(s.Egress.Allow, []string{"api.example.org"}) {
		t.Fatalf("a session of the project starts with %+v, want the project's policy", s.Egress)
	}
	// Rules without a mode add to the project's; a mode replaces it.
	if s2 := newSession(&api.EgressPolicy{Allow: []string{"extra.example"}}); s2.Egress.Mode != "ask" || !slices.Equal(s2.Egress.Allow, []string{"api.example.org", "extra.example"}) {
		t.Errorf("--allow over the project's policy: %+v", s2.Egress)
	}
	if s3 := newSession(&api.EgressPolicy{Mode: "deny-all"}); s3.Egress.Mode != "deny-all" || len(s3.Egress.Allow) != 0 {
		t.Errorf("--net deny-all over the project's policy: %+v", s3.Egress)
	}

	// What the user allowed while the session ran is saved.
	if _, err := c.e.Policy(ctx, s.ID, api.PolicyChange{Allow: []string{"GET docs.example.org/**"}, Inspect: []string{"docs.example.org"}, AskTimeout: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	saved, err := c.e.SavePolicy(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if saved.File != file {
		t.Errorf("saved in %s, want %s", saved.File, file)
	}
	b, _ := os.ReadFile(file)
	for _, want := range []string{"auto_accept:", "# docs need no human", "GET docs.example.org/**", "ask_timeout: 1m30s"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the saved file lacks %q:\n%s", want, b)
		}
	}
	if s4 := newSession(nil); !slices.Equal(s4.Egress.Allow, []string{"api.example.org", "GET docs.example.org/**"}) || s4.Egress.AskTimeout != 90*time.Second {
		t.Errorf("a session after the save starts with %+v", s4.Egress)
	}

	// A section the engine cannot read refuses new sessions, saying where.
	if err := os.WriteFile(file, []byte("egress:\n  mode: ask\n  alow: [x.example]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = c.e.create(ctx, api.CreateRequest{Project: c.project, Image: "airlock/tiny"}, idle{})
	if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "alow") {
		t.Errorf("create under a misspelt egress section: %v, want invalid naming the file and the key", err)
	}
}
