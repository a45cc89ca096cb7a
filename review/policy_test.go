package review_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/secretscan"
	"github.com/airlock/airlock/secretscan/gitleaks"

	"github.com/airlock/airlock/review"
)

func TestPolicyAndScanners(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "README.md"), "# r\n", 0o644)
	write(t, filepath.Join(p, "tool.sh"), "echo\n", 0o644)
	write(t, filepath.Join(p, PolicyPath()), "auto_accept: [\"docs/**\", \"*.md\"]\nhold: [\"secret-config/**\"]\nscanners:\n  large_binary: 1000\n", 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	write(t, filepath.Join(m, "docs/guide.md"), "how to\n", 0o644)                                          // auto
	write(t, filepath.Join(m, "README.md"), "# r\nmore\n", 0o644)                                           // auto (*.md)
	write(t, filepath.Join(m, "package-lock.json"), "{}\n", 0o644)                                          // held by default
	write(t, filepath.Join(m, ".github/workflows/ci.yml"), "on: push\n", 0o644)                             // held by default
	write(t, filepath.Join(m, "secret-config/x"), "x\n", 0o644)                                             // held by the project
	write(t, filepath.Join(m, PolicyPath()), "auto_accept: [\"**\"]\n", 0o644)                              // the agent loosening the policy: held
	write(t, filepath.Join(m, "docs/keys.md"), "stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF\n", 0o644) // auto, but a secret
	write(t, filepath.Join(m, "blob.bin"), strings.Repeat("\x00\x01", 1000), 0o644)                         // large binary
	must(t, os.Chmod(filepath.Join(m, "tool.sh"), 0o755))                                                   // exec bit
	write(t, filepath.Join(m, "suid"), "x\n", 0o644)
	must(t, os.Chmod(filepath.Join(m, "suid"), os.ModeSetuid|0o755))
	must(t, os.Symlink("../../etc/passwd", filepath.Join(m, "docs/escape.md")))

	l := review.Layers{Upper: ws.Upper(), Project: p}
	// The policy comes from the host's copy of the project.
	pol, err := review.LoadPolicy(filepath.Join(p, PolicyPath()), false)
	must(t, err)
	diffs, err := review.Review(l)
	must(t, err)
	must(t, pol.Check(context.Background(), l, diffs, gitleaks.New()))
	by := map[string]review.FileDiff{}
	for _, d := range diffs {
		by[d.Path] = d
	}
	for path, want := range map[string]string{
		"package-lock.json":        "package-lock.json",
		".github/workflows/ci.yml": ".github/**",
		"secret-config/x":          "secret-config/**",
		PolicyPath():               ".airlock/**",
	} {
		if !strings.Contains(by[path].Held, want) {
			t.Errorf("%s: held %q, want by %q", path, by[path].Held, want)
		}
	}
	scanner := func(path string) string {
		var s []string
		for _, f := range by[path].Findings {
			s = append(s, f.Scanner)
		}
		return strings.Join(s, ",")
	}
	for path, want := range map[string]string{
		"docs/keys.md":   "secrets",
		"blob.bin":       "large_binary",
		"tool.sh":        "exec_bit",
		"suid":           "exec_bit,setuid",
		"docs/escape.md": "symlink_escape",
		"docs/guide.md":  "",
	} {
		if got := scanner(path); got != want {
			t.Errorf("%s: findings %q, want %q", path, got, want)
		}
	}
	if f := by["docs/keys.md"].Findings; len(f) == 0 || f[0].Line != 1 {
		t.Errorf("secret finding should name line 1: %+v", f)
	}
	// Auto-accept takes exactly the clean auto-accept paths.
	out, err := review.Accept(l, diffs, review.Selection{Auto: true}, journal(t))
	must(t, err)
	var accepted []string
	for _, o := range out {
		if o.Applied {
			accepted = append(accepted, o.Path)
		}
	}
	if strings.Join(accepted, ",") != "README.md,docs/guide.md" {
		t.Errorf("auto-accepted %v, want README.md and docs/guide.md", accepted)
	}
	if b, _ := os.ReadFile(filepath.Join(p, PolicyPath())); strings.Contains(string(b), `"**"`) {
		t.Errorf("the agent's policy reached the host")
	}
}

func TestPolicyRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, says string }{
		{"auto_accept: [\"[\"]\n", "invalid glob"},
		{"unknown_field: 1\n", "invalid policy"},
		{"auto_accept: 5\n", "invalid policy"},
	} {
		f := filepath.Join(dir, "p.yaml")
		os.WriteFile(f, []byte(tc.body), 0o644)
		if _, err := review.LoadPolicy(f, false); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v, want %q", tc.body, err, tc.says)
		}
	}
	if _, err := review.LoadPolicy(filepath.Join(dir, "missing.yaml"), false); err == nil {
		t.Errorf("a missing required policy file should fail")
	}
	// The egress section is engine/egress's: the review reads past it.
	f := filepath.Join(dir, "egress.yaml")
	os.WriteFile(f, []byte("hold: [Makefile]\negress:\n  mode: ask\n  allow: [example.org]\n"), 0o644)
	if pol, err := review.LoadPolicy(f, false); err != nil || len(pol.Hold) != 1 {
		t.Errorf("a policy with an egress section: %+v, %v", pol, err)
	}
}

func PolicyPath() string { return review.PolicyFile }

// failingFinder is a secret scanner that cannot look.
type failingFinder struct{ err error }

func (f failingFinder) Find(context.Context, []string) ([][]secretscan.Match, error) {
	return nil, f.err
}

// TestSecretScanFails: a scan that fails (the scanner crashed, or the
// engine has none) flags every text file it was to look at, so that none
// passes as clean; files it was not to look at keep no finding; only the
// review's own end fails Check.
func TestSecretScanFails(t *testing.T) {
	added := func(path string) review.FileDiff {
		return review.FileDiff{Change: review.Change{Path: path, Type: review.File}, Hunks: []review.Hunk{{NewStart: 1, NewLines: 1, Lines: []string{"+text\n"}}}}
	}
	for name, find := range map[string]secretscan.Finder{
		"scanner crashed": failingFinder{errors.New("the secret scanner failed: signal: killed")},
		"no scanner":      nil,
	} {
		t.Run(name, func(t *testing.T) {
			diffs := []review.FileDiff{added("a.go"), added("b.go"), {Change: review.Change{Path: "bin", Type: review.File, Binary: true}}}
			must(t, review.Policy{}.Check(context.Background(), review.Layers{}, diffs, find))
			for _, d := range diffs[:2] {
				if len(d.Findings) != 1 || d.Findings[0].Scanner != "secrets" || !strings.HasPrefix(d.Findings[0].Message, "not scanned for secrets: ") {
					t.Errorf("%s: findings %+v, want one saying it was not scanned", d.Path, d.Findings)
				}
			}
			if len(diffs[2].Findings) != 0 {
				t.Errorf("a binary file, never scanned: %+v", diffs[2].Findings)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (review.Policy{}).Check(ctx, review.Layers{}, []review.FileDiff{added("a.go")}, failingFinder{context.Canceled}); !errors.Is(err, context.Canceled) {
		t.Errorf("a review whose context ended: %v", err)
	}
}

// countingFinder counts the scans it was asked for, and cannot look.
type countingFinder struct{ n *int }

func (f countingFinder) Find(context.Context, []string) ([][]secretscan.Match, error) {
	*f.n++
	return nil, errors.New("the secret scanner failed")
}

// TestSecretScanOnlyWhatWasAdded: a file the session only removed lines
// from has nothing to scan: a scan that fails does not flag it, and a
// batch of such files starts no scan (no scanner child) at all.
func TestSecretScanOnlyWhatWasAdded(t *testing.T) {
	removed := func(path string) review.FileDiff {
		return review.FileDiff{Change: review.Change{Path: path, Type: review.File, Kind: review.Modified},
			Hunks: []review.Hunk{{OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 1, Lines: []string{" kept\n", "-gone\n"}}}}
	}
	added := review.FileDiff{Change: review.Change{Path: "new.go", Type: review.File}, Hunks: []review.Hunk{{NewStart: 1, NewLines: 1, Lines: []string{"+text\n"}}}}
	var n int
	diffs := []review.FileDiff{removed("a.go"), added, removed("b.go")}
	must(t, review.Policy{}.Check(context.Background(), review.Layers{}, diffs, countingFinder{&n}))
	for _, d := range []review.FileDiff{diffs[0], diffs[2]} {
		if len(d.Findings) != 0 {
			t.Errorf("%s, which only lost a line: %+v", d.Path, d.Findings)
		}
	}
	if len(diffs[1].Findings) != 1 || n != 1 {
		t.Errorf("the added file: %+v after %d scans; want it flagged as not scanned after one", diffs[1].Findings, n)
	}
	n = 0
	diffs = []review.FileDiff{removed("a.go"), removed("b.go")}
	must(t, review.Policy{}.Check(context.Background(), review.Layers{}, diffs, countingFinder{&n}))
	if n != 0 || len(diffs[0].Findings)+len(diffs[1].Findings) != 0 {
		t.Errorf("only lines removed: %d scans, findings %+v %+v; want none", n, diffs[0].Findings, diffs[1].Findings)
	}
}

// lineFinder finds a secret on each line holding SECRET, text by text.
type lineFinder struct{ asked *[][]string }

func (f lineFinder) Find(_ context.Context, texts []string) ([][]secretscan.Match, error) {
	*f.asked = append(*f.asked, texts)
	found := make([][]secretscan.Match, len(texts))
	for i, t := range texts {
		for n, l := range strings.Split(t, "\n") {
			if strings.Contains(l, "SECRET") {
				found[i] = append(found[i], secretscan.Match{Rule: "fake", Description: "a fake", Line: n + 1})
			}
		}
	}
	return found, nil
}

// TestSecretScanPerFile: a batch's files go to the scanner in one Find,
// one text per file of what it added, and each finding lands on its own
// file at the file's line (lines the session kept are counted, not
// scanned).
func TestSecretScanPerFile(t *testing.T) {
	diffs := []review.FileDiff{
		{Change: review.Change{Path: "a.go", Type: review.File}, Hunks: []review.Hunk{{NewStart: 1, NewLines: 2, Lines: []string{"+one\n", "+SECRET a\n"}}}},
		{Change: review.Change{Path: "b.go", Type: review.File, Kind: review.Modified}, Hunks: []review.Hunk{{OldStart: 10, OldLines: 1, NewStart: 10, NewLines: 3, Lines: []string{" kept SECRET\n", "+new\n", "+SECRET b"}}}},
	}
	var asked [][]string
	must(t, review.Policy{}.Check(context.Background(), review.Layers{}, diffs, lineFinder{&asked}))
	if len(asked) != 1 || len(asked[0]) != 2 || asked[0][1] != "new\nSECRET b\n" {
		t.Fatalf("asked %q; want one Find of one text per file, what each added", asked)
	}
	for i, want := range []int{2, 12} {
		if f := diffs[i].Findings; len(f) != 1 || f[0].Line != want || f[0].Rule != "fake" {
			t.Errorf("%s: %+v; want one finding on line %d", diffs[i].Path, f, want)
		}
	}
}
