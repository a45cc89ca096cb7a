package egress

import (
	"strings"
	"testing"
	"time"
)

// A project's egress section is read strictly, and saving it keeps the
// file's other sections and their comments.
func TestProjectPolicy(t *testing.T) {
	file := "# the project's accept policy\nauto_accept: [\"docs/**\"] # docs are fine\nhold: [Makefile]\n"
	if s, err := ReadProject([]byte(file)); err != nil || s != nil {
		t.Fatalf("a file without an egress section: %v, %v; want nil, nil", s, err)
	}
	want := Spec{Mode: Ask, Allow: []string{"GET api.github.com/repos/**"}, Deny: []string{"POST api.github.com/**"},
		Inspect: []string{"api.github.com"}, AskTimeout: 2 * time.Minute}
	out, err := WriteProject([]byte(file), want)
	if err != nil {
		t.Fatal(err)
	}
	for _, kept := range []string{"# the project's accept policy", "auto_accept:", "# docs are fine", "hold:", "ask_timeout: 2m0s"} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("saved file lost %q:\n%s", kept, out)
		}
	}
	got, err := ReadProject(out)
	if err != nil || got == nil {
		t.Fatalf("read back: %v, %v\n%s", got, err, out)
	}
	if got.Mode != want.Mode || strings.Join(got.Allow, ",") != strings.Join(want.Allow, ",") || strings.Join(got.Deny, ",") != strings.Join(want.Deny, ",") ||
		strings.Join(got.Inspect, ",") != "api.github.com" || got.AskTimeout != want.AskTimeout {
		t.Errorf("read back %+v, want %+v", *got, want)
	}
	// Saving again replaces the section rather than adding a second.
	again, err := WriteProject(out, Spec{Mode: DenyAll})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(again), "egress:"); n != 1 {
		t.Errorf("%d egress sections after a second save:\n%s", n, again)
	}
	if s, _ := ReadProject(again); s == nil || s.Mode != DenyAll || len(s.Allow) != 0 {
		t.Errorf("second save read back as %+v", s)
	}
	// An empty file gets the section alone.
	if b, err := WriteProject(nil, Spec{Mode: Custom, Allow: []string{"example.org"}}); err != nil || !strings.HasPrefix(strings.TrimLeft(string(b), "# "), "The network policy") {
		t.Errorf("empty file: %v\n%s", err, b)
	}

	for bad, says := range map[string]string{
		"egress:\n  mode: ask\n  alow: [x.org]\n":      "alow",
		"egress:\n  mode: open\n":                      "network mode",
		"egress:\n  ask_timeout: soon\n":               "ask_timeout",
		"egress:\n  allow: [\"POST example.org/x\"]\n": "inspect",
		"- a list\n": "",
	} {
		if _, err := ReadProject([]byte(bad)); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, says)
		}
	}
}
