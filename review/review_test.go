package review_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/airlock/airlock/testenv"
)

// mountWS mounts a real tmpfs+overlay workspace over project.
func mountWS(t *testing.T, project string) *overlay.Workspace {
	t.Helper()
	ws, err := mountWSSize(t, project, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func mountWSSize(t *testing.T, project string, size int64) (*overlay.Workspace, error) {
	t.Helper()
	testenv.Root(t, "review tests mount real overlays")
	if err := overlay.Check(); err != nil {
		testenv.Missing(t, fmt.Sprintf("overlay unavailable: %v", err))
	}
	ws, err := overlay.Mount(project, filepath.Join(t.TempDir(), "ws"), size)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { ws.Unmount() })
	return ws, nil
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// project makes the sample project used by most tests.
func project(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "README.md"), "# demo\n", 0o644)
	write(t, filepath.Join(p, "main.go"), "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n", 0o644)
	write(t, filepath.Join(p, "run.sh"), "#!/bin/sh\necho run\n", 0o644)
	write(t, filepath.Join(p, "same.txt"), "same\n", 0o644)
	write(t, filepath.Join(p, "old/a.txt"), "a\n", 0o644)
	write(t, filepath.Join(p, "old/b.txt"), "b\n", 0o644)
	write(t, filepath.Join(p, "lib/x.txt"), "x\n", 0o644)
	write(t, filepath.Join(p, "lib/y.txt"), "y\n", 0o644)
	write(t, filepath.Join(p, "tofile/z.txt"), "z\n", 0o644)
	if err := os.Symlink("README.md", filepath.Join(p, "link")); err != nil {
		t.Fatal(err)
	}
	return p
}

// agent makes one change of every kind through the merged view, as a
// process in the container would.
func agent(t *testing.T, m string) {
	write(t, filepath.Join(m, "hello.txt"), "hi\n", 0o644)                                                 // added
	write(t, filepath.Join(m, "main.go"), "package main\n\nfunc main() {\n\tprintln(\"bye\")\n}\n", 0o644) // modified
	must(t, os.Chmod(filepath.Join(m, "run.sh"), 0o755))                                                   // mode
	must(t, os.Remove(filepath.Join(m, "README.md")))                                                      // deleted
	must(t, os.WriteFile(filepath.Join(m, "same.txt"), []byte("same\n"), 0o644))                           // rewritten, equal: no change
	must(t, os.RemoveAll(filepath.Join(m, "old")))                                                         // deleted dir
	must(t, os.RemoveAll(filepath.Join(m, "lib")))                                                         // replaced dir (opaque)
	write(t, filepath.Join(m, "lib/x.txt"), "x2\n", 0o644)
	must(t, os.RemoveAll(filepath.Join(m, "tofile"))) // dir -> file
	write(t, filepath.Join(m, "tofile"), "now a file\n", 0o644)
	must(t, os.Remove(filepath.Join(m, "link"))) // symlink retargeted
	must(t, os.Symlink("main.go", filepath.Join(m, "link")))
	write(t, filepath.Join(m, "bin.dat"), "\x00\x01\x02binary", 0o644) // binary
	must(t, os.Mkdir(filepath.Join(m, "empty"), 0o755))                // added empty dir
	must(t, syscall.Mkfifo(filepath.Join(m, "fifo"), 0o644))           // special
}

func journal(t *testing.T) string { return filepath.Join(t.TempDir(), "accept.journal") }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestChangesEveryKind(t *testing.T) {
	p := project(t)
	ws := mountWS(t, p)
	agent(t, ws.Merged())
	changes, err := review.Changes(review.Layers{Upper: ws.Upper(), Project: p})
	must(t, err)
	got := map[string]string{}
	for _, c := range changes {
		got[c.Path] = string(c.Kind) + ":" + string(c.Type)
		if c.Path == "bin.dat" && !c.Binary {
			t.Errorf("bin.dat not detected as binary")
		}
	}
	want := map[string]string{
		"hello.txt": "added:file",
		"main.go":   "modified:file",
		"run.sh":    "mode:file",
		"README.md": "deleted:",
		"old":       "deleted:",
		"lib/x.txt": "modified:file",
		"lib/y.txt": "deleted:",
		"tofile":    "replaced:file",
		"link":      "modified:symlink",
		"bin.dat":   "added:file",
		"empty":     "added:dir",
		"fifo":      "added:special",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected change %s: %s", k, got[k])
		}
	}
	// The host project is untouched by the session.
	if b, _ := os.ReadFile(filepath.Join(p, "README.md")); string(b) != "# demo\n" {
		t.Errorf("host README changed: %q", b)
	}
}

func TestPatchAppliesWithGitApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git is not installed")
	}
	p := project(t)
	copyDir := filepath.Join(t.TempDir(), "copy")
	must(t, exec.Command("cp", "-a", p, copyDir).Run())
	ws := mountWS(t, p)
	agent(t, ws.Merged())
	write(t, filepath.Join(ws.Merged(), "sp ace/q\"uote\tname.txt"), "odd names\n", 0o644)
	write(t, filepath.Join(ws.Merged(), "nonl.txt"), "no newline", 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}
	changes, err := review.Changes(l)
	must(t, err)
	var buf bytes.Buffer
	must(t, review.Patch(&buf, l, changes))
	cmd := exec.Command("git", "apply", "-v", "-")
	cmd.Dir = copyDir
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, out, buf.String())
	}
	// The patched copy matches the session's view for every file git tracks.
	for _, f := range []string{"hello.txt", "main.go", "lib/x.txt", "tofile", "bin.dat", "sp ace/q\"uote\tname.txt", "nonl.txt"} {
		a, _ := os.ReadFile(filepath.Join(copyDir, f))
		b, _ := os.ReadFile(filepath.Join(ws.Merged(), f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: patched %q, session %q", f, a, b)
		}
	}
	for _, f := range []string{"README.md", "old/a.txt", "lib/y.txt"} {
		if _, err := os.Lstat(filepath.Join(copyDir, f)); err == nil {
			t.Errorf("%s should be deleted by the patch", f)
		}
	}
	if fi, _ := os.Stat(filepath.Join(copyDir, "run.sh")); fi.Mode()&0o100 == 0 {
		t.Errorf("run.sh should be executable after the patch")
	}
	if l, _ := os.Readlink(filepath.Join(copyDir, "link")); l != "main.go" {
		t.Errorf("link -> %q, want main.go", l)
	}
}

func TestAcceptAll(t *testing.T) {
	p := project(t)
	ws := mountWS(t, p)
	agent(t, ws.Merged())
	must(t, os.Chmod(filepath.Join(ws.Merged(), "hello.txt"), os.ModeSetuid|0o755)) // must not survive
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	outcomes, err := review.Accept(l, diffs, review.Selection{}, journal(t))
	must(t, err)
	for _, o := range outcomes {
		if o.Path == "fifo" {
			if o.Applied || !strings.Contains(o.Error, "never accepted") {
				t.Errorf("fifo: %+v", o)
			}
			continue
		}
		if !o.Applied {
			t.Errorf("%s not applied: %s", o.Path, o.Error)
		}
	}
	// The project now equals the session's view, except the FIFO.
	after, err := review.Changes(l)
	must(t, err)
	if len(after) != 1 || after[0].Path != "fifo" {
		t.Errorf("after accept, changes left: %+v", after)
	}
	fi, err := os.Stat(filepath.Join(p, "hello.txt"))
	must(t, err)
	if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("hello.txt mode %v: want 0755 without setuid", fi.Mode())
	}
	if _, err := os.Lstat(filepath.Join(p, "fifo")); err == nil {
		t.Errorf("fifo reached the project")
	}
	entries, _ := filepath.Glob(filepath.Join(p, ".airlock-*"))
	if len(entries) > 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestAcceptSelectedPaths(t *testing.T) {
	p := project(t)
	ws := mountWS(t, p)
	agent(t, ws.Merged())
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	_, err = review.Accept(l, diffs, review.Selection{Paths: []string{"hello.txt", "lib"}}, journal(t))
	must(t, err)
	all, err := review.Changes(l)
	must(t, err)
	if b, _ := os.ReadFile(filepath.Join(p, "hello.txt")); string(b) != "hi\n" {
		t.Errorf("hello.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(p, "lib/y.txt")); err == nil {
		t.Errorf("lib/y.txt should be gone with the replaced lib/")
	}
	if b, _ := os.ReadFile(filepath.Join(p, "main.go")); !strings.Contains(string(b), "hi") {
		t.Errorf("main.go was not selected but changed: %q", b)
	}
	if _, err := review.Select(all, []string{"nope.txt"}); err == nil {
		t.Errorf("selecting a path with no change should fail")
	}
}

func TestAcceptRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, p, m string) // p: project, m: merged
		path  string
		want  string
	}{
		{"host parent became a symlink", func(t *testing.T, p, m string) {
			write(t, filepath.Join(m, "dir/new.txt"), "x", 0o644)
			must(t, os.MkdirAll(filepath.Join(p, "outside"), 0o755))
			must(t, os.Symlink(filepath.Join(p, "outside"), filepath.Join(p, "dir")))
		}, "dir/new.txt", "symlink"},
		{"host parent became a file", func(t *testing.T, p, m string) {
			write(t, filepath.Join(m, "sub/new.txt"), "x", 0o644)
			write(t, filepath.Join(p, "sub"), "a file now", 0o644)
		}, "sub/new.txt", "not a directory"},
		{"fifo", func(t *testing.T, p, m string) {
			must(t, syscall.Mkfifo(filepath.Join(m, "pipe"), 0o644))
		}, "pipe", "never accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := project(t)
			ws := mountWS(t, p)
			l := review.Layers{Upper: ws.Upper(), Project: p}
			// The session's change is made before the host diverges.
			tc.setup(t, p, ws.Merged())
			diffs, err := review.Review(l)
			must(t, err)
			out, err := review.Accept(l, diffs, review.Selection{Paths: []string{tc.path}}, journal(t))
			must(t, err)
			if len(out) != 1 || out[0].Applied || !strings.Contains(out[0].Error, tc.want) {
				t.Fatalf("outcome %+v, want refusal mentioning %q", out, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(p, "outside/new.txt")); err == nil {
				t.Fatalf("wrote through a symlink")
			}
		})
	}
	for _, bad := range []string{"../etc/passwd", "/etc/passwd", "a/../../b"} {
		if _, err := review.CleanPath(bad); err == nil {
			t.Errorf("CleanPath(%q) accepted", bad)
		}
	}
}

func TestDiscardRestoresProjectView(t *testing.T) {
	p := project(t)
	ws := mountWS(t, p)
	agent(t, ws.Merged())
	l := review.Layers{Upper: ws.Upper(), Project: p}
	all, err := review.Review(l)
	must(t, err)
	out, err := review.Discard(l, ws.Merged(), all, review.Selection{})
	must(t, err)
	for _, o := range out {
		if !o.Applied {
			t.Errorf("discard %s: %s", o.Path, o.Error)
		}
	}
	left, err := review.Changes(l)
	must(t, err)
	if len(left) != 0 {
		t.Errorf("after discarding everything, changes left: %+v", left)
	}
	if b, _ := os.ReadFile(filepath.Join(ws.Merged(), "old/a.txt")); string(b) != "a\n" {
		t.Errorf("old/a.txt not restored in the session: %q", b)
	}
}

func TestFullWorkspaceStillReviews(t *testing.T) {
	testenv.Root(t, "mounts a small workspace")
	p := project(t)
	ws, err := overlay.Mount(p, filepath.Join(t.TempDir(), "ws"), 2<<20)
	must(t, err)
	defer ws.Unmount()
	big := bytes.Repeat([]byte("x"), 4<<20)
	err = os.WriteFile(filepath.Join(ws.Merged(), "big.txt"), big, 0o644)
	if err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("writing past the cap: err = %v, want ENOSPC", err)
	}
	u, err := ws.Usage()
	must(t, err)
	if !u.Full {
		t.Errorf("usage %+v should say full", u)
	}
	if _, err := review.Changes(review.Layers{Upper: ws.Upper(), Project: p}); err != nil {
		t.Errorf("review of a full workspace: %v", err)
	}
}
