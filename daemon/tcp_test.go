package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/errdefs"
)

func TestTokenFile(t *testing.T) {
	a, err := loadToken("")
	b, _ := loadToken("")
	if err != nil || len(a) != 48 || a == b {
		t.Errorf("random tokens %q and %q (%v): want two different 48-digit ones", a, b, err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	os.WriteFile(p, []byte("  a-token-of-this-test-0123456789\n"), 0o600)
	if tok, err := loadToken(p); err != nil || tok != "a-token-of-this-test-0123456789" {
		t.Errorf("token %q, %v", tok, err)
	}
	os.WriteFile(p, []byte("short\n"), 0o600)
	if _, err := loadToken(p); err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a short token: %v", err)
	}
	if _, err := loadToken(filepath.Join(dir, "none")); err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "token file") {
		t.Errorf("a missing token file: %v", err)
	}
}
