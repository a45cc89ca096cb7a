package review_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/review"
)

// TestNamesScanner: names that display as something else, and names that
// look like another in their folder (the project's or the session's), are
// flagged with the name quoted and what it looks like; plain Unicode names
// and the project's own look-alikes are not.
func TestNamesScanner(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "README.md"), "# r\n", 0o644)
	write(t, filepath.Join(p, "src/main.go"), "package main\n", 0o644)
	write(t, filepath.Join(p, "old.txt"), "x\n", 0o644)
	write(t, filepath.Join(p, "Notes.md"), strings.Repeat("a line of notes\n", 20), 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	for _, n := range []string{
		"x\n--- a\ta.txt", "uni\u202egnp.exe", "esc\x1b[31mred", "README.md\u200b", "src/Main.go",
		"caf\u00e9.txt", "cafe\u0301.txt", "раураl.txt", "paypal.txt", "日本語.md", "bad\xff", "SRC/deep/x.go", "new/y.go",
	} {
		write(t, filepath.Join(m, n), "x\n", 0o644)
	}
	write(t, filepath.Join(m, "README.md"), "# r\nmore\n", 0o644)                  // modified: its name is the project's
	must(t, os.Rename(filepath.Join(m, "Notes.md"), filepath.Join(m, "NOTES.md"))) // renamed: its old name is gone

	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	must(t, review.Policy{}.Check(context.Background(), l, diffs, nil))
	got := map[string][]string{}
	for _, d := range diffs {
		if d.Path == "NOTES.md" && d.Kind != review.Renamed {
			t.Errorf("NOTES.md is %s, want renamed (the case the scanner must not flag)", d.Kind)
		}
		for _, f := range d.Findings {
			if f.Scanner == "names" {
				got[d.Path] = append(got[d.Path], f.Rule+": "+f.Message)
			}
		}
	}
	for path, want := range map[string][]string{
		"x\n--- a\ta.txt":  {`control: the name "x\n--- a\ta.txt" holds control characters (\n, \t)`},
		"uni\u202egnp.exe": {`bidi: the name "uni\u202egnp.exe" holds bidirectional controls (\u202e): it displays as uniexe.png`},
		"esc\x1b[31mred":   {`escape: the name "esc\x1b[31mred" holds a terminal escape (\x1b)`},
		"README.md\u200b":  {`invisible: the name "README.md\u200b" holds invisible characters (\u200b): it displays as README.md`, `lookalike: the name "README.md\u200b" looks like README.md, a name the project has in the same folder (the same but for invisible characters)`},
		"src/Main.go":      {`lookalike: the name src/Main.go looks like src/main.go, a name the project has in the same folder (the same but for case)`},
		"caf\u00e9.txt":    {"lookalike: the name caf\u00e9.txt looks like cafe\u0301.txt, another name this session wrote in the same folder (the same letters composed differently)"},
		"cafe\u0301.txt":   {"lookalike: the name cafe\u0301.txt looks like caf\u00e9.txt"},
		"раураl.txt":       {"lookalike: the name раураl.txt looks like paypal.txt, another name this session wrote in the same folder (look-alike letters)"},
		"paypal.txt":       {"lookalike: the name paypal.txt looks like раураl.txt"},
		"bad\xff":          {`invalid_utf8: the name "bad\xff" is not valid UTF-8 (\xff)`},
		"SRC/deep/x.go":    {`lookalike: the folder SRC of SRC/deep/x.go looks like src, a name the project has in the same folder (the same but for case)`},
		"new/y.go":         nil,
		"NOTES.md":         nil,
		"README.md":        nil,
		"日本語.md":           nil,
	} {
		if len(got[path]) != len(want) {
			t.Errorf("%q: findings %q, want %d like %q", path, got[path], len(want), want)
			continue
		}
		for i := range want {
			if !strings.HasPrefix(got[path][i], want[i]) {
				t.Errorf("%q: finding %q, want it to begin %q", path, got[path][i], want[i])
			}
		}
	}
	off := false
	pol := review.Policy{Scanners: review.Scanners{Names: &off}}
	diffs, err = review.Review(l)
	must(t, err)
	must(t, pol.Check(context.Background(), l, diffs, nil))
	for _, d := range diffs {
		for _, f := range d.Findings {
			if f.Scanner == "names" {
				t.Errorf("names: off, yet %q flagged: %s", d.Path, f.Message)
			}
		}
	}
}
