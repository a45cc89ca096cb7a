package review_test

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
)

// The session's .git is the agent's: everything in it is hostile input.
// These tests build a project, a session workspace (a plain copy of the
// project, as the merged overlay shows it) in which the agent committed,
// and a second repository elsewhere on the host whose commits must never
// come out of the session.

type gitFixture struct {
	project, merged, secret string
	gitdir                  string // merged/.git
	hostHead, secretHead    string
}

func newGitFixture(t *testing.T) *gitFixture {
	t.Helper()
	dir := t.TempDir()
	f := &gitFixture{
		project: filepath.Join(dir, "project"),
		merged:  filepath.Join(dir, "merged"),
		secret:  filepath.Join(dir, "secret"),
	}
	f.gitdir = filepath.Join(f.merged, ".git")
	write(t, filepath.Join(f.project, "main.go"), "package main\n", 0o644)
	git(t, f.project, "init", "-q", "-b", "main")
	git(t, f.project, "add", "-A")
	git(t, f.project, "commit", "-qm", "initial")
	f.hostHead = git(t, f.project, "rev-parse", "HEAD")
	if out, err := exec.Command("cp", "-a", f.project, f.merged).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	write(t, filepath.Join(f.merged, "feature.go"), "package main\n\nfunc feature() {}\n", 0o644)
	git(t, f.merged, "add", "-A")
	git(t, f.merged, "-c", "user.name=Agent", "-c", "user.email=agent@example.com", "commit", "-qm", "agent work")
	write(t, filepath.Join(f.secret, "secret.txt"), "the host's secret\n", 0o600)
	git(t, f.secret, "init", "-q", "-b", "main")
	git(t, f.secret, "add", "-A")
	git(t, f.secret, "commit", "-qm", "secret")
	f.secretHead = git(t, f.secret, "rev-parse", "HEAD")
	return f
}

// setRef points the session's main branch at hash, as a loose ref.
func (f *gitFixture) setRef(t *testing.T, hash string) {
	t.Helper()
	write(t, filepath.Join(f.gitdir, "refs/heads/main"), hash+"\n", 0o644)
}

func (f *gitFixture) replace(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(f.gitdir, rel)
	must(t, os.RemoveAll(p))
	return p
}

type result struct {
	commits []review.Commit
	err     error
	alloc   uint64 // bytes allocated while it ran
}

// gitWithin runs f, failing the test when it has not returned after a while
// (a FIFO in .git would block an unconfined reader forever).
func gitWithin(t *testing.T, f func() ([]review.Commit, error)) result {
	t.Helper()
	ch := make(chan result, 1)
	go func() {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		c, err := f()
		runtime.ReadMemStats(&m1)
		ch <- result{c, err, m1.TotalAlloc - m0.TotalAlloc}
	}()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("still reading the session's .git after 30s: it hangs the engine")
	}
	return result{}
}

// hostile is what every refused repository must give: no commits, an
// error for the engine's log saying why, bounded memory, and nothing
// written into the project.
func (f *gitFixture) hostile(t *testing.T, why string, is error) {
	t.Helper()
	r := gitWithin(t, func() ([]review.Commit, error) { return review.Commits(f.project, f.merged) })
	for _, c := range r.commits {
		if c.Hash == f.secretHead || c.Subject == "secret" {
			t.Errorf("Commits returned the host repository's commit %s", c.Hash)
		}
	}
	if len(r.commits) != 0 {
		t.Errorf("Commits offered %d commits from a refused repository", len(r.commits))
	}
	checkRefusal(t, "Commits", r, why, is)
	r = gitWithin(t, func() ([]review.Commit, error) { return review.ImportCommits(f.project, f.merged, "airlock/s1") })
	checkRefusal(t, "ImportCommits", r, why, is)
	if r.err != nil && !errdefs.IsInvalid(r.err) {
		t.Errorf("ImportCommits error class %s, want invalid: %v", errdefs.ClassOf(r.err), r.err)
	}
	if err := exec.Command("git", "-C", f.project, "rev-parse", "--verify", "-q", "refs/heads/airlock/s1").Run(); err == nil {
		t.Errorf("a branch was created from a refused repository")
	}
	if err := exec.Command("git", "-C", f.project, "cat-file", "-e", f.secretHead).Run(); err == nil {
		t.Errorf("the host repository's commit was copied into the project")
	}
}

func checkRefusal(t *testing.T, op string, r result, why string, is error) {
	t.Helper()
	if r.err == nil {
		t.Errorf("%s: no error; want one saying %q", op, why)
	} else {
		if why != "" && !strings.Contains(r.err.Error(), why) {
			t.Errorf("%s: error %q does not say %q", op, r.err, why)
		}
		if is != nil && !errors.Is(r.err, is) {
			t.Errorf("%s: error %q is not %v", op, r.err, is)
		}
	}
	if r.alloc > 256<<20 {
		t.Errorf("%s allocated %d MiB reading a hostile repository", op, r.alloc>>20)
	}
}

func TestGitHostileRepositories(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, f *gitFixture)
		why   string // in the error
		is    error
	}{
		{"HEAD is a symlink to /dev/zero", func(t *testing.T, f *gitFixture) {
			must(t, os.Symlink("/dev/zero", f.replace(t, "HEAD")))
		}, "HEAD", confined.ErrSymlink},
		{"HEAD is a FIFO", func(t *testing.T, f *gitFixture) {
			must(t, unix.Mkfifo(f.replace(t, "HEAD"), 0o644))
		}, "HEAD", confined.ErrNotRegular},
		{"a branch is a symlink to a host file", func(t *testing.T, f *gitFixture) {
			// The host file names a commit the session has on no branch:
			// offering it would prove the host file was read.
			git(t, f.merged, "-c", "user.name=Agent", "-c", "user.email=agent@example.com", "commit", "-q", "--allow-empty", "-m", "secret")
			hidden := git(t, f.merged, "rev-parse", "HEAD")
			git(t, f.merged, "reset", "-q", "--hard", "HEAD~1")
			shadow := filepath.Join(filepath.Dir(f.secret), "shadow")
			write(t, shadow, hidden+"\n", 0o600)
			must(t, os.Symlink(shadow, f.replace(t, "refs/heads/main")))
		}, "refs/heads/main", confined.ErrSymlink},
		{"objects is a symlink to another repository", func(t *testing.T, f *gitFixture) {
			must(t, os.Symlink(filepath.Join(f.secret, ".git/objects"), f.replace(t, "objects")))
			f.setRef(t, f.secretHead)
		}, "objects", confined.ErrSymlink},
		{".git is a symlink to another repository", func(t *testing.T, f *gitFixture) {
			must(t, os.RemoveAll(f.gitdir))
			must(t, os.Symlink(filepath.Join(f.secret, ".git"), f.gitdir))
		}, ".git", confined.ErrSymlink},
		{".git file with an absolute gitdir", func(t *testing.T, f *gitFixture) {
			must(t, os.RemoveAll(f.gitdir))
			write(t, f.gitdir, "gitdir: "+filepath.Join(f.secret, ".git")+"\n", 0o644)
		}, "gitdir", nil},
		{".git file with a gitdir leaving the workspace", func(t *testing.T, f *gitFixture) {
			must(t, os.RemoveAll(f.gitdir))
			write(t, f.gitdir, "gitdir: ../secret/.git\n", 0o644)
		}, "gitdir", nil},
		{".git file with a gitdir through a symlink", func(t *testing.T, f *gitFixture) {
			must(t, os.RemoveAll(f.gitdir))
			must(t, os.Symlink(f.secret, filepath.Join(f.merged, "link")))
			write(t, f.gitdir, "gitdir: link/.git\n", 0o644)
		}, "gitdir", confined.ErrSymlink},
		{"commondir leaving the workspace", func(t *testing.T, f *gitFixture) {
			write(t, filepath.Join(f.gitdir, "commondir"), "../../secret/.git\n", 0o644)
		}, "commondir", nil},
		{"alternates to another repository", func(t *testing.T, f *gitFixture) {
			write(t, filepath.Join(f.gitdir, "objects/info/alternates"), filepath.Join(f.secret, ".git/objects")+"\n", 0o644)
			f.setRef(t, f.secretHead)
		}, "object", nil},
		{"relative alternates to another repository", func(t *testing.T, f *gitFixture) {
			write(t, filepath.Join(f.gitdir, "objects/info/alternates"), "../../../secret/.git/objects\n", 0o644)
			f.setRef(t, f.secretHead)
		}, "object", nil},
		{"a 2 GB sparse packed-refs", func(t *testing.T, f *gitFixture) {
			head := git(t, f.merged, "rev-parse", "HEAD")
			must(t, os.Remove(filepath.Join(f.gitdir, "refs/heads/main")))
			p := filepath.Join(f.gitdir, "packed-refs")
			write(t, p, head+" refs/heads/other\n", 0o644)
			must(t, os.Truncate(p, 2<<30))
		}, "packed-refs", confined.ErrTooLarge},
		{"a loose commit that inflates past its header (zlib bomb)", func(t *testing.T, f *gitFixture) {
			h := strings.Repeat("ab", 20)
			writeLoose(t, f.gitdir, h, bomb(t, "commit 250\x00", 256<<20))
			f.setRef(t, h)
		}, "object", nil},
		{"a loose commit declaring 4 GB", func(t *testing.T, f *gitFixture) {
			h := strings.Repeat("cd", 20)
			writeLoose(t, f.gitdir, h, bomb(t, "commit 4294967296\x00", 1<<20))
			f.setRef(t, h)
		}, "object", nil},
		{"a loose object that is not what its name says", func(t *testing.T, f *gitFixture) {
			// The content of the host repository's commit, under another name.
			raw := catRaw(t, f.secret, f.secretHead)
			h := strings.Repeat("ef", 20)
			writeLoose(t, f.gitdir, h, zlibBytes(raw))
			f.setRef(t, h)
		}, "object", nil},
		{"cyclic parents", func(t *testing.T, f *gitFixture) {
			// Real hashes cannot form a cycle: one of the two names lies.
			a, b := strings.Repeat("1a", 20), strings.Repeat("2b", 20)
			tree := git(t, f.merged, "rev-parse", "HEAD^{tree}")
			writeLoose(t, f.gitdir, a, zlibBytes(rawObject("commit", commitBody(tree, []string{b}, "a"))))
			writeLoose(t, f.gitdir, b, zlibBytes(rawObject("commit", commitBody(tree, []string{a}, "b"))))
			f.setRef(t, a)
		}, "object", nil},
		{"a pack entry declaring a huge size", func(t *testing.T, f *gitFixture) {
			h := strings.Repeat("3c", 20)
			raw := append(packObjectHeader(1, 1<<40), bomb(t, "", 256<<20)...)
			writePack(t, f.gitdir, []packEntry{{h, raw}})
			f.setRef(t, h)
		}, "object", nil},
		{"a pack delta declaring a huge result", func(t *testing.T, f *gitFixture) {
			base := commitBody(git(t, f.merged, "rev-parse", "HEAD^{tree}"), nil, "base")
			bh := hashOf("commit", base)
			delta := append(leb(uint64(len(base))), leb(1<<40)...)
			delta = append(delta, 0x90, 0xff) // copy 255 bytes from 0 (never reached)
			h := strings.Repeat("4d", 20)
			writePack(t, f.gitdir, []packEntry{
				{bh, append(packObjectHeader(1, uint64(len(base))), zlibBytes(base)...)},
				{h, append(append(packObjectHeader(7, uint64(len(delta))), mustHex(t, bh)...), zlibBytes(delta)...)},
			})
			f.setRef(t, h)
		}, "object", nil},
		{"a pack delta whose base is itself", func(t *testing.T, f *gitFixture) {
			h := strings.Repeat("5e", 20)
			delta := append(leb(10), leb(10)...)
			delta = append(delta, 0x0a)
			delta = append(delta, "0123456789"...)
			writePack(t, f.gitdir, []packEntry{{h, append(append(packObjectHeader(7, uint64(len(delta))), mustHex(t, h)...), zlibBytes(delta)...)}})
			f.setRef(t, h)
		}, "object", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newGitFixture(t)
			c.setup(t, f)
			f.hostile(t, c.why, c.is)
		})
	}
}

// TestGitImportRefusals: commits that list fine but must not be copied
// into the project.
func TestGitImportRefusals(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, f *gitFixture)
		why   string
	}{
		{"a blob over the size limit (a real zlib bomb)", func(t *testing.T, f *gitFixture) {
			const size = 128 << 20
			h := writeZeroBlob(t, f.gitdir, size)
			tree := looseObject(t, f.gitdir, "tree", treeBody(treeEntry{"100644", "big.bin", h}))
			f.setRef(t, looseObject(t, f.gitdir, "commit", commitBody(tree, []string{f.hostHead}, "big")))
		}, "larger than"},
		{"a tree deeper than git checks out", func(t *testing.T, f *gitFixture) {
			// In a pack: thousands of loose files take seconds to write.
			blob := looseObject(t, f.gitdir, "blob", []byte("x\n"))
			body := treeBody(treeEntry{"100644", "f", blob})
			var es []packEntry
			for i := 0; i < 2100; i++ {
				h := hashOf("tree", body)
				es = append(es, packEntry{h, append(packObjectHeader(2, uint64(len(body))), zlibBytes(body)...)})
				body = treeBody(treeEntry{"40000", "d", h})
			}
			writePack(t, f.gitdir, es)
			f.setRef(t, looseObject(t, f.gitdir, "commit", commitBody(es[len(es)-1].hash, []string{f.hostHead}, "deep")))
		}, "deep"},
		{"a tree entry named .git", func(t *testing.T, f *gitFixture) {
			blob := looseObject(t, f.gitdir, "blob", []byte("[core]\n\tfsmonitor = touch /tmp/pwned\n"))
			cfg := looseObject(t, f.gitdir, "tree", treeBody(treeEntry{"100644", "config", blob}))
			tree := looseObject(t, f.gitdir, "tree", treeBody(treeEntry{"40000", ".GIT", cfg}))
			f.setRef(t, looseObject(t, f.gitdir, "commit", commitBody(tree, []string{f.hostHead}, "dotgit")))
		}, ".GIT"},
		{"a tree entry with a path separator", func(t *testing.T, f *gitFixture) {
			blob := looseObject(t, f.gitdir, "blob", []byte("x\n"))
			tree := looseObject(t, f.gitdir, "tree", treeBody(treeEntry{"100644", "../escape", blob}))
			f.setRef(t, looseObject(t, f.gitdir, "commit", commitBody(tree, []string{f.hostHead}, "escape")))
		}, "escape"},
		{"a tree naming a blob that is a commit", func(t *testing.T, f *gitFixture) {
			tree := looseObject(t, f.gitdir, "tree", treeBody(treeEntry{"100644", "f", f.hostHead}))
			tree = looseObject(t, f.gitdir, "tree", treeBody(treeEntry{"100644", "g", git(t, f.merged, "rev-parse", "HEAD")}, treeEntry{"40000", "t", tree}))
			f.setRef(t, looseObject(t, f.gitdir, "commit", commitBody(tree, []string{f.hostHead}, "types")))
		}, "blob"},
		{"a commit without an author", func(t *testing.T, f *gitFixture) {
			tree := git(t, f.merged, "rev-parse", "HEAD^{tree}")
			f.setRef(t, looseObject(t, f.gitdir, "commit", []byte("tree "+tree+"\nparent "+f.hostHead+"\n\nno author\n")))
		}, "author"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newGitFixture(t)
			c.setup(t, f)
			r := gitWithin(t, func() ([]review.Commit, error) { return review.ImportCommits(f.project, f.merged, "airlock/s1") })
			checkRefusal(t, "ImportCommits", r, c.why, nil)
			if r.err != nil && !errdefs.IsInvalid(r.err) {
				t.Errorf("error class %s, want invalid: %v", errdefs.ClassOf(r.err), r.err)
			}
			if err := exec.Command("git", "-C", f.project, "rev-parse", "--verify", "-q", "refs/heads/airlock/s1").Run(); err == nil {
				t.Errorf("a branch was created")
			}
		})
	}
}

// TestGitLongHistoryIsBounded: a chain of more commits than are ever read
// is refused quickly, as a whole: never a partial list, never a branch
// whose history is missing from the project.
func TestGitLongHistoryIsBounded(t *testing.T) {
	f := newGitFixture(t)
	var in bytes.Buffer
	fmt.Fprintf(&in, "reset refs/heads/main\nfrom %s\n", git(t, f.merged, "rev-parse", "HEAD"))
	for i := 0; i < 1500; i++ {
		fmt.Fprintf(&in, "commit refs/heads/main\ncommitter A <a@example.com> %d +0000\ndata <<EOF\nc%d\nEOF\n\n", 1700000000+i, i)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Stdin = f.merged, &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	// (fast-import writes a pack: the history is read from it.)
	f.hostile(t, "more than", nil)
}

// TestGitSwapRace: the agent swaps its .git directory, in a loop, with a
// symlink to another repository on the host and with a .git file naming
// that repository, while the engine reads it. The engine never returns
// (or imports) the other repository's commits.
func TestGitSwapRace(t *testing.T) {
	f := newGitFixture(t)
	link, file := filepath.Join(f.merged, ".git-link"), filepath.Join(f.merged, ".git-file")
	must(t, os.Symlink(filepath.Join(f.secret, ".git"), link))
	write(t, file, "gitdir: "+filepath.Join(f.secret, ".git")+"\n", 0o644)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			other := link
			if i%4 >= 2 {
				other = file
			}
			unix.Renameat2(unix.AT_FDCWD, f.gitdir, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE)
			time.Sleep(50 * time.Microsecond)
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	var ok, refused int
	for i := 0; time.Now().Before(deadline); i++ {
		r := gitWithin(t, func() ([]review.Commit, error) { return review.Commits(f.project, f.merged) })
		for _, c := range r.commits {
			if c.Hash == f.secretHead || c.Subject == "secret" {
				t.Fatalf("round %d: Commits returned the host repository's commit", i)
			}
		}
		if r.err != nil {
			if refused < 3 {
				t.Log(r.err)
			}
			refused++
		} else if len(r.commits) == 1 {
			ok++
		}
		if i%8 == 0 {
			r := gitWithin(t, func() ([]review.Commit, error) {
				return review.ImportCommits(f.project, f.merged, fmt.Sprintf("airlock/s%d", i))
			})
			for _, c := range r.commits {
				if c.Hash == f.secretHead {
					t.Fatalf("round %d: ImportCommits imported the host repository's commit", i)
				}
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if err := exec.Command("git", "-C", f.project, "cat-file", "-e", f.secretHead).Run(); err == nil {
		t.Fatalf("the host repository's commit was copied into the project")
	}
	t.Logf("%d reads of the session's own repository, %d refused", ok, refused)
}

// --- building hostile objects by hand ---

func rawObject(typ string, body []byte) []byte {
	return append([]byte(fmt.Sprintf("%s %d\x00", typ, len(body))), body...)
}

func hashOf(typ string, body []byte) string {
	s := sha1.Sum(rawObject(typ, body))
	return hex.EncodeToString(s[:])
}

func zlibBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// bomb is a zlib stream of header followed by n zero bytes.
func bomb(t *testing.T, header string, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
	io.WriteString(w, header)
	if _, err := io.Copy(w, io.LimitReader(zeros{}, n)); err != nil {
		t.Fatal(err)
	}
	must(t, w.Close())
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// writeZeroBlob writes a valid loose blob of n zero bytes.
func writeZeroBlob(t *testing.T, gitdir string, n int64) string {
	t.Helper()
	hdr := fmt.Sprintf("blob %d\x00", n)
	s := sha1.New()
	io.WriteString(s, hdr)
	io.Copy(s, io.LimitReader(zeros{}, n))
	h := hex.EncodeToString(s.Sum(nil))
	writeLoose(t, gitdir, h, bomb(t, hdr, n))
	return h
}

func writeLoose(t *testing.T, gitdir, hash string, compressed []byte) {
	t.Helper()
	p := filepath.Join(gitdir, "objects", hash[:2], hash[2:])
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, compressed, 0o444))
}

func looseObject(t *testing.T, gitdir, typ string, body []byte) string {
	t.Helper()
	h := hashOf(typ, body)
	writeLoose(t, gitdir, h, zlibBytes(rawObject(typ, body)))
	return h
}

func catRaw(t *testing.T, dir, hash string) []byte {
	t.Helper()
	typ := git(t, dir, "cat-file", "-t", hash)
	body, err := exec.Command("git", "-C", dir, "cat-file", typ, hash).Output()
	must(t, err)
	return rawObject(typ, body)
}

func commitBody(tree string, parents []string, msg string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(&b, "parent %s\n", p)
	}
	fmt.Fprintf(&b, "author Agent <agent@example.com> 1700000000 +0000\ncommitter Agent <agent@example.com> 1700000000 +0000\n\n%s\n", msg)
	return []byte(b.String())
}

type treeEntry struct{ mode, name, hash string }

func treeBody(es ...treeEntry) []byte {
	var b bytes.Buffer
	for _, e := range es {
		h, _ := hex.DecodeString(e.hash)
		fmt.Fprintf(&b, "%s %s\x00", e.mode, e.name)
		b.Write(h)
	}
	return b.Bytes()
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	must(t, err)
	return b
}

// leb is a delta header size (little-endian base 128).
func leb(n uint64) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// packObjectHeader is a pack entry's type and (inflated) size.
func packObjectHeader(typ int, size uint64) []byte {
	c := byte(typ<<4) | byte(size&0x0f)
	size >>= 4
	var b []byte
	for size != 0 {
		b = append(b, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(b, c)
}

type packEntry struct {
	hash string
	raw  []byte // header and data as they sit in the pack
}

// writePack writes a version 2 pack and its index holding entries, in
// that order, under the names given (which need not match the content).
func writePack(t *testing.T, gitdir string, entries []packEntry) {
	t.Helper()
	var pack bytes.Buffer
	pack.WriteString("PACK")
	binary.Write(&pack, binary.BigEndian, uint32(2))
	binary.Write(&pack, binary.BigEndian, uint32(len(entries)))
	type ent struct {
		name []byte
		off  uint32
		crc  uint32
	}
	var es []ent
	for _, e := range entries {
		es = append(es, ent{mustHex(t, e.hash), uint32(pack.Len()), crc32.ChecksumIEEE(e.raw)})
		pack.Write(e.raw)
	}
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])
	sort.Slice(es, func(i, j int) bool { return bytes.Compare(es[i].name, es[j].name) < 0 })
	var idx bytes.Buffer
	idx.Write([]byte{0xff, 't', 'O', 'c'})
	binary.Write(&idx, binary.BigEndian, uint32(2))
	for b := 0; b < 256; b++ {
		n := 0
		for _, e := range es {
			if int(e.name[0]) <= b {
				n++
			}
		}
		binary.Write(&idx, binary.BigEndian, uint32(n))
	}
	for _, e := range es {
		idx.Write(e.name)
	}
	for _, e := range es {
		binary.Write(&idx, binary.BigEndian, e.crc)
	}
	for _, e := range es {
		binary.Write(&idx, binary.BigEndian, e.off)
	}
	idx.Write(sum[:])
	isum := sha1.Sum(idx.Bytes())
	idx.Write(isum[:])
	name := filepath.Join(gitdir, "objects/pack", "pack-"+hex.EncodeToString(sum[:]))
	must(t, os.MkdirAll(filepath.Dir(name), 0o755))
	must(t, os.WriteFile(name+".pack", pack.Bytes(), 0o444))
	must(t, os.WriteFile(name+".idx", idx.Bytes(), 0o444))
}
