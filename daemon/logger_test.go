package daemon

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/airlock/airlock/names"
)

// TestLoggerQuotesNames: a path a session named, in a log attribute or an
// error, reaches the engine's log as one line with its control, escape,
// bidirectional and invisible characters escaped (the text handler quotes
// any value holding a character that is not printable).
func TestLoggerQuotesNames(t *testing.T) {
	var b bytes.Buffer
	log := NewLogger(&b, false)
	for _, n := range []string{"x\n--- a\ta.txt", "uni\u202egnp.exe", "esc\x1b[31mred", "README.md\u200b", "bad\xff"} {
		log.Info("accept", "path", n, "err", errors.New("open "+n+": denied"))
	}
	out := strings.TrimSuffix(b.String(), "\n")
	if got := strings.Count(out, "\n"); got != 4 {
		t.Errorf("5 log records took %d lines:\n%s", got+1, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if ps := names.Check(line); len(ps) > 0 {
			t.Errorf("a log line holds %v: %s", ps, line)
		}
	}
}
