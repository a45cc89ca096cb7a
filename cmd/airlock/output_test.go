package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

var someSessions = []api.Session{
	{ID: "3f2a00000001", Project: "/src/app", State: "running", Limits: api.Limits{CPUs: 2}},
	{ID: "77bc00000002", Project: "/src/lib", State: "paused"},
}

// render runs printList over someSessions with the given flags.
func render(t *testing.T, o output) (string, error) {
	t.Helper()
	var b bytes.Buffer
	err := printList(&o, &b, someSessions, func() error {
		b.WriteString("HUMAN TABLE\n")
		return nil
	})
	return b.String(), err
}

func TestOutputFormats(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    output
		want string
	}{
		{"default is the command's own text", output{}, "HUMAN TABLE\n"},
		{"table alone is the default too", output{format: "table"}, "HUMAN TABLE\n"},
		{"fields", output{format: "{{.ID}} {{.State}}"}, "3f2a00000001 running\n77bc00000002 paused\n"},
		{"nested field", output{format: "{{.Limits.CPUs}}"}, "2\n0\n"},
		{"shell escapes", output{format: `{{.ID}}\t{{.State}}`}, "3f2a00000001\trunning\n77bc00000002\tpaused\n"},
		{"functions", output{format: "{{upper .State}} {{truncate .ID 4}}"}, "RUNNING 3f2a\nPAUSED 77bc\n"},
		{"table with a header from the fields", output{format: `table {{.ID}}\t{{.State}}\t{{.Limits.CPUs}}`},
			"ID            STATE    LIMITS.CPUS\n3f2a00000001  running  2\n77bc00000002  paused   0\n"},
		{"table of something else has no header", output{format: `table {{if .ID}}x{{end}}`}, "x\nx\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := render(t, tc.o)
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestOutputJSON(t *testing.T) {
	for _, o := range []output{{json: true}, {format: "json"}, {format: " json "}} {
		got, err := render(t, o)
		var back []api.Session
		if err != nil || json.Unmarshal([]byte(got), &back) != nil || len(back) != 2 || back[1].ID != someSessions[1].ID {
			t.Errorf("%+v: %q, %v", o, got, err)
		}
	}
	// {{json .}} is one compact JSON object per line.
	got, err := render(t, output{format: "{{json .}}"})
	lines := strings.Split(strings.TrimSpace(got), "\n")
	var s api.Session
	if err != nil || len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &s) != nil || s.Project != "/src/app" {
		t.Errorf("{{json .}}: %q, %v", got, err)
	}
	// JSON lines, for the listings that always printed those.
	got, _ = render(t, output{json: true, lines: true})
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &s) != nil || s.State != "paused" {
		t.Errorf("JSON lines: %q", got)
	}
	// An empty listing is an empty array, never null.
	var b bytes.Buffer
	if err := printList(&output{json: true}, &b, []api.Session(nil), nil); err != nil || strings.TrimSpace(b.String()) != "[]" {
		t.Errorf("empty: %q, %v", b.String(), err)
	}
	// One object prints as itself.
	b.Reset()
	if err := printOne(&output{json: true}, &b, api.EgressPolicy{Mode: "custom"}, nil); err != nil || !strings.Contains(b.String(), `"mode": "custom"`) || strings.HasPrefix(b.String(), "[") {
		t.Errorf("one: %q, %v", b.String(), err)
	}
}

func TestOutputErrors(t *testing.T) {
	for _, tc := range []struct {
		o    output
		want string
	}{
		{output{json: true, format: "{{.ID}}"}, "not both"},
		{output{format: "{{.ID"}, "unclosed action"},
		{output{format: "{{.Nope}}"}, ".ID, .Project"}, // names the fields there are
		{output{format: "{{nosuchfunc .ID}}"}, "not defined"},
	} {
		out, err := render(t, tc.o)
		if err == nil || errdefs.ClassOf(err) != errdefs.Invalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v (output %q), want an invalid-input error saying %q", tc.o, err, out, tc.want)
		}
	}
}

func TestTailMark(t *testing.T) {
	m := &tailMark{}
	if got := m.advance("one\n", false); got != "one\n" {
		t.Errorf("first: %q", got)
	}
	if got := m.advance("one\ntwo\n", false); got != "two\n" {
		t.Errorf("second: %q", got)
	}
	// Once the engine keeps only head and tail, the place is found again
	// by the last bytes printed.
	cut := "on\n[... output truncated by airlock ...]\none\ntwo\nthree\n"
	if got := m.advance(cut, true); got != "three\n" {
		t.Errorf("after the cut: %q", got)
	}
	// Output that outran the tail is said to be skipped, not invented.
	lost := "one\n\n[... output truncated by airlock ...]\nnine\nten\n"
	if got := m.advance(lost, true); !strings.HasPrefix(got, "[... output skipped") || !strings.HasSuffix(got, "nine\nten\n") {
		t.Errorf("skipped: %q", got)
	}
}
