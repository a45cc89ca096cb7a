package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

// policy save writes into the project only: a .airlock or policy.yaml
// that is a symlink is refused (the engine is root), and what it makes
// belongs to the project's owner.
func TestSavePolicyStaysInTheProject(t *testing.T) {
	c := newCore(t)
	ctx := context.Background()
	if err := os.Chown(c.project, 1234, 1234); err != nil {
		t.Fatal(err)
	}
	s, err := c.e.create(ctx, api.CreateRequest{Project: c.project, Image: "airlock/tiny", Egress: &api.EgressPolicy{Mode: "deny-all"}}, idle{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.e.Remove(ctx, s.ID) })

	elsewhere := t.TempDir()
	dir := filepath.Join(c.project, ".airlock")
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := c.e.SavePolicy(ctx, s.ID); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("save through a symlinked .airlock: %v, want a refusal", err)
	}
	os.Remove(dir)
	os.Mkdir(dir, 0o755)
	target := filepath.Join(elsewhere, "policy.yaml")
	os.WriteFile(target, []byte("hold: [x]\n"), 0o644)
	if err := os.Symlink(target, filepath.Join(dir, "policy.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.e.SavePolicy(ctx, s.ID); err == nil {
		t.Errorf("save over a symlinked policy.yaml succeeded")
	}
	if b, _ := os.ReadFile(target); string(b) != "hold: [x]\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 1 {
		t.Errorf("files appeared outside the project: %v", entries)
	}

	os.Remove(filepath.Join(dir, "policy.yaml"))
	os.Remove(dir)
	if _, err := c.e.SavePolicy(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "policy.yaml")} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || st.Uid != 1234 || st.Gid != 1234 {
			t.Errorf("%s: owner %d:%d (%v), want the project's 1234:1234", p, st.Uid, st.Gid, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the save left more than the file: %v", entries)
	}
}
