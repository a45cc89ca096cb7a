// Package testenv is what tests ask of the machine they run on: root,
// mounts, and a way to say that something is missing. Under
// AIRLOCK_REQUIRE_INTEGRATION=1 (as `make test` and CI run) a missing
// prerequisite fails the test instead of skipping it, so CI never passes
// by skipping. Test support only: the standard library, nothing of the
// engine, so that any package's tests may import it.
package testenv

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Missing skips the test for want of a prerequisite, or fails it under
// AIRLOCK_REQUIRE_INTEGRATION=1.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("AIRLOCK_REQUIRE_INTEGRATION") == "1" {
		t.Fatalf("integration prerequisites missing: %s (run `make test`, which sets them up)", why)
	}
	t.Skipf("integration test skipped: %s (run `make test` as root to set them up)", why)
}

// Root is Missing unless the test runs as root; why says what needs it.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root: "+why)
	}
}

// MountsUnder lists the mount points at dir and beneath it, in the order
// they were mounted (outermost first), read from /proc/self/mountinfo with
// its octal escapes (a space is \040 there) undone.
func MountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if p := unescape(f[4]); p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// unescape undoes mountinfo's \ooo escapes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
