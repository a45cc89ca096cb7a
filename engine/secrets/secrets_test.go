package secrets

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/errdefs"
)

// table is the engine's secrets table in memory.
type table map[string]string

func (t table) SetSecret(_ context.Context, name, sealed string) error {
	t[name] = sealed
	return nil
}

func (t table) Secret(_ context.Context, name string) (string, error) {
	v, ok := t[name]
	if !ok {
		return "", errdefs.NotFoundf("no secret %s", name)
	}
	return v, nil
}

func (t table) DeleteSecret(_ context.Context, name string) error {
	if _, ok := t[name]; !ok {
		return errdefs.NotFoundf("no secret %s", name)
	}
	delete(t, name)
	return nil
}

func open(t *testing.T, dir string, tb table) *Store {
	t.Helper()
	s, err := Open(dir, tb)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A stored secret comes back as it was, and the table (the database
// file) never holds it readable; the key file is the owner's alone.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir, tb := t.TempDir(), table{}
	s := open(t, dir, tb)
	const key = "sk-ant-very-secret"
	if err := s.Set(ctx, "ANTHROPIC_API_KEY", key); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tb["ANTHROPIC_API_KEY"], key) || !strings.HasPrefix(tb["ANTHROPIC_API_KEY"], "v1:") {
		t.Errorf("stored as %q: want it sealed", tb["ANTHROPIC_API_KEY"])
	}
	if err := s.Set(ctx, "OTHER", key); err != nil {
		t.Fatal(err)
	}
	if tb["OTHER"] == tb["ANTHROPIC_API_KEY"] {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	// A second store over the same state directory (the engine
	// restarted) reads it with the same key.
	for _, st := range []*Store{s, open(t, dir, tb)} {
		if v, err := st.Value(ctx, "any-session", "ANTHROPIC_API_KEY"); err != nil || v != key {
			t.Errorf("value %q, %v", v, err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Errorf("key file: %v, %v", fi, err)
	}
	// Stored before encryption: read as it is.
	tb["OLD"] = "plain-value"
	if v, err := s.Value(ctx, "", "OLD"); err != nil || v != "plain-value" {
		t.Errorf("a value stored before encryption: %q, %v", v, err)
	}
	if err := s.Delete(ctx, "OTHER"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Value(ctx, "", "OTHER"); !errdefs.IsNotFound(err) {
		t.Errorf("a deleted secret: %v, want not found", err)
	}
}

// A value sealed under another key, a damaged value and a damaged key
// file each fail in words that say what to do; nothing is replaced.
func TestWrongKeyAndCorruption(t *testing.T) {
	ctx := context.Background()
	tb := table{}
	if err := open(t, t.TempDir(), tb).Set(ctx, "API_KEY", "sk-1"); err != nil {
		t.Fatal(err)
	}
	other := open(t, t.TempDir(), tb) // another key over the same table
	_, err := other.Value(ctx, "", "API_KEY")
	if err == nil || !strings.Contains(err.Error(), "key file") || !strings.Contains(err.Error(), "airlock secret set API_KEY") {
		t.Errorf("a value sealed under another key: %v", err)
	}

	for name, sealed := range map[string]string{
		"not base64": "v1:!!!",
		"too short":  "v1:AAAA",
		"flipped":    flip(tb["API_KEY"]),
	} {
		tb["BROKEN"] = sealed
		if v, err := other.Value(ctx, "", "BROKEN"); err == nil || !strings.Contains(err.Error(), "BROKEN") {
			t.Errorf("%s: %q, %v: want an error naming the secret", name, v, err)
		}
	}

	dir := t.TempDir()
	p := filepath.Join(dir, KeyFile)
	if err := os.WriteFile(p, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, tb); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged key file: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "short" {
		t.Errorf("the damaged key file was replaced: %q", b)
	}
}

// flip changes one byte of a sealed value's ciphertext.
func flip(sealed string) string {
	b := []byte(sealed)
	i := len(b) / 2 // inside a whole base64 group: every bit counts
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// Names and values are checked before anything is stored.
func TestSetRefusesBadInput(t *testing.T) {
	tb := table{}
	s := open(t, t.TempDir(), tb)
	for _, c := range []struct{ name, value string }{
		{"1ABC", "v"}, {"A-B", "v"}, {"", "v"}, {strings.Repeat("A", 129), "v"}, {"EMPTY", ""},
	} {
		if err := s.Set(context.Background(), c.name, c.value); !errdefs.IsInvalid(err) {
			t.Errorf("Set(%q, %q): %v, want invalid", c.name, c.value, err)
		}
	}
	if len(tb) != 0 {
		t.Errorf("stored %v", tb)
	}
	for _, name := range []string{"_", "A", "a_1", strings.Repeat("A", 128)} {
		if err := s.Set(context.Background(), name, "v"); err != nil {
			t.Errorf("Set(%q): %v", name, err)
		}
	}
}

// A value given for a session wins over the stored one for that session
// only, and is gone once the session is forgotten (removed).
func TestGivenValues(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), table{})
	if err := s.Set(ctx, "KEY", "stored"); err != nil {
		t.Fatal(err)
	}
	s.Give("s1", "KEY", "given")
	s.Give("s1", "ONLY_GIVEN", "g")
	for _, c := range []struct{ session, name, want string }{
		{"s1", "KEY", "given"}, {"s2", "KEY", "stored"}, {"s1", "ONLY_GIVEN", "g"},
	} {
		if v, err := s.Value(ctx, c.session, c.name); err != nil || v != c.want {
			t.Errorf("%s %s: %q, %v, want %q", c.session, c.name, v, err, c.want)
		}
	}
	if err := s.Check(ctx, "s1", "KEY", "ONLY_GIVEN"); err != nil {
		t.Error(err)
	}
	if err := s.Check(ctx, "s2", "ONLY_GIVEN"); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "airlock secret set ONLY_GIVEN") {
		t.Errorf("another session's given value: %v", err)
	}
	s.Forget("s1")
	if v, err := s.Value(ctx, "s1", "KEY"); err != nil || v != "stored" {
		t.Errorf("after Forget: %q, %v, want the stored value", v, err)
	}
	if _, err := s.Value(ctx, "s1", "ONLY_GIVEN"); !errdefs.IsNotFound(err) {
		t.Errorf("after Forget the given value is still there: %v", err)
	}
}
