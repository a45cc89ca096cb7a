package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/enginetest"
)

// TestAcceptEditedPatchE2E: the user saves `airlock diff ID --patch`,
// drops a hunk and a file from it, keeps a binary file and a rename, and
// `airlock accept ID --patch` writes exactly that into the project. A
// patch the project no longer fits is refused whole with exit 75.
func TestAcceptEditedPatchE2E(t *testing.T) {
	c := newCLI(t)
	c.ok("image", "build", "--tiny")
	p := sampleProject(t)
	var notes strings.Builder
	for i := 1; i <= 20; i++ {
		notes.WriteString("note " + string(rune('a'+i)) + "\n")
	}
	must(t, os.WriteFile(filepath.Join(p, "notes.txt"), []byte(notes.String()), 0o644))
	must(t, os.WriteFile(filepath.Join(p, "logo.bin"), []byte("\x00host logo"), 0o644))
	must(t, os.WriteFile(filepath.Join(p, "old.txt"), []byte("one\ntwo\nthree\nfour\nfive\nsix\n"), 0o644))

	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c",
		"sed -i -e 's/note c/agent c/' -e 's/note s/agent s/' notes.txt; printf '\\000\\001agent logo\\377' > logo.bin; "+
			"mv old.txt new.txt; echo seven >> new.txt; echo hi > hello.txt")
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no session: %s", errs)
	}
	id := m[1]
	full := c.ok("diff", id, "--patch")
	for _, want := range []string{"GIT binary patch", "rename from old.txt", "+agent c", "+agent s", "b/hello.txt"} {
		if !strings.Contains(full, want) {
			t.Fatalf("diff --patch lacks %q:\n%s", want, full)
		}
	}

	// The edit: hello.txt goes, and so does the hunk with "agent s".
	var edited strings.Builder
	for _, sec := range strings.Split(full, "diff --git ")[1:] {
		if strings.HasPrefix(sec, "a/hello.txt ") {
			continue
		}
		if strings.HasPrefix(sec, "a/notes.txt ") {
			hunks := strings.Split(sec, "\n@@ ")
			var kept []string
			for _, h := range hunks {
				if !strings.Contains(h, "+agent s") {
					kept = append(kept, h)
				}
			}
			sec = strings.Join(kept, "\n@@ ")
			if !strings.HasSuffix(sec, "\n") {
				sec += "\n"
			}
		}
		edited.WriteString("diff --git " + sec)
	}
	patchFile := filepath.Join(t.TempDir(), "edited.patch")
	must(t, os.WriteFile(patchFile, []byte(edited.String()), 0o600))
	out := c.ok("accept", id, "--patch", patchFile)
	for _, want := range []string{"notes.txt", "logo.bin", "new.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("accept --patch does not report %s:\n%s", want, out)
		}
	}

	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(p, name))
		return string(b)
	}
	wantNotes := strings.Replace(notes.String(), "note c", "agent c", 1)
	if got := read("notes.txt"); got != wantNotes {
		t.Errorf("notes.txt = %q, want only the kept hunk: %q", got, wantNotes)
	}
	if got := read("logo.bin"); got != "\x00\x01agent logo\xff" {
		t.Errorf("logo.bin = %q", got)
	}
	if got := read("new.txt"); got != "one\ntwo\nthree\nfour\nfive\nsix\nseven\n" {
		t.Errorf("new.txt = %q", got)
	}
	for _, gone := range []string{"old.txt", "hello.txt"} {
		if _, err := os.Lstat(filepath.Join(p, gone)); err == nil {
			t.Errorf("%s: want it absent from the project", gone)
		}
	}
	if got := read("src/app.py"); got != "def greet():\n    return 'hello'\n" {
		t.Errorf("src/app.py, not in the patch, changed: %q", got)
	}

	// The whole patch no longer fits what the project has now: refused,
	// nothing written, and the error says which file and what to do.
	before := read("notes.txt")
	must(t, os.WriteFile(patchFile, []byte(full), 0o600))
	code, _, errs := c.run("accept", id, "--patch", patchFile)
	if code != 75 || !strings.Contains(errs, "the patch does not apply to the project's ") || !strings.Contains(errs, "airlock diff ID --patch") {
		t.Errorf("a stale patch: exit %d, %s", code, errs)
	}
	if read("notes.txt") != before {
		t.Errorf("a refused patch wrote notes.txt")
	}
	if _, err := os.Lstat(filepath.Join(p, "hello.txt")); err == nil {
		t.Errorf("a refused patch wrote hello.txt")
	}
}
