package mcp

import (
	"strings"
	"testing"
)

// TestWorkspacePath keeps every path a tool is given below /workspace, by
// name, whatever the model writes.
func TestWorkspacePath(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"", "/workspace", ""},
		{".", "/workspace", ""},
		{"src/app.py", "/workspace/src/app.py", ""},
		{"./src//app.py", "/workspace/src/app.py", ""},
		{"/workspace/src/../README.md", "/workspace/README.md", ""},
		{"--help", "/workspace/--help", ""},
		{"-rf /", "/workspace/-rf ", ""},
		{"..", "", "outside the session's workspace"},
		{"../etc/passwd", "", "outside the session's workspace"},
		{"src/../../etc", "", "outside the session's workspace"},
		{"/etc/passwd", "", "outside the session's workspace"},
		{"/workspace-other/x", "", "outside the session's workspace"},
		{"/workspace/../workspace2", "", "outside the session's workspace"},
		{"a\x00b", "", "NUL"},
	} {
		got, err := workspacePath(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("workspacePath(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("workspacePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := projectPath("/workspace"); err == nil {
		t.Errorf("projectPath of the whole workspace: want an error")
	}
	if got, _ := projectPath("/workspace/src/x"); got != "src/x" {
		t.Errorf("projectPath(/workspace/src/x) = %q, want src/x", got)
	}
}

// TestTailKeepsTheEnd checks what a long command's result carries: the
// last bytes, a count of those left out, and progress that only grows.
func TestTailKeepsTheEnd(t *testing.T) {
	var seen []float64
	tl := &tail{limit: 10, progress: func(n int64, _ string) { seen = append(seen, float64(n)) }}
	tl.Write([]byte("first line\n"))
	tl.Write([]byte("second\nthird\n"))
	if got := tl.String(); got != "ond\nthird\n" || tl.dropped != 14 {
		t.Errorf("kept %q, dropped %d; want the last 10 bytes and 14 dropped", got, tl.dropped)
	}
	if len(seen) == 0 || seen[0] != 11 {
		t.Errorf("progress %v: want the first write reported with its 11 bytes", seen)
	}
	if got := lastLine([]byte("make: ok\nFAIL pkg/foo\n\n")); got != "FAIL pkg/foo" {
		t.Errorf("lastLine = %q, want the last non-empty line", got)
	}
}
