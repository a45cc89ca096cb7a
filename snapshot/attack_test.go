package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock/airlock/testenv"
	"golang.org/x/sys/unix"
)

// ent is one entry of a crafted layer.
type ent struct {
	name, link string
	typ        byte
	mode       int64
	data       string
	pax        map[string]string
	major      int64
}

func craft(t testing.TB, entries ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.data)), PAXRecords: e.pax, Devmajor: e.major, Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.data)
	}
	tw.Close()
	return buf.Bytes()
}

// sandbox is a directory holding the target and, beside it, what a layer
// must never reach.
type sandbox struct {
	target, outside string
}

func newSandbox(t *testing.T) sandbox {
	base := t.TempDir()
	s := sandbox{filepath.Join(base, "target"), filepath.Join(base, "outside")}
	os.Mkdir(s.target, 0o755)
	os.Mkdir(s.outside, 0o755)
	os.WriteFile(filepath.Join(s.outside, "secret"), []byte("host secret"), 0o600)
	return s
}

// untouched fails the test when anything beside the target changed.
func (s sandbox) untouched(t *testing.T) {
	t.Helper()
	ents, _ := os.ReadDir(s.outside)
	if len(ents) != 1 {
		t.Errorf("the layer wrote outside its target: %v", ents)
	}
	if b, err := os.ReadFile(filepath.Join(s.outside, "secret")); string(b) != "host secret" {
		t.Errorf("the file outside was changed: %q %v", b, err)
	}
	if _, err := os.Stat(s.target); err != nil {
		t.Errorf("the target is gone: %v", err)
	}
}

// TestApplyRefusesAttacks feeds layers that try to reach outside their
// target, or to put there what a session must never hold.
func TestApplyRefusesAttacks(t *testing.T) {
	needRoot(t)
	cases := map[string]func(s sandbox) []ent{
		"a directory replaced by a symlink, then written through": func(s sandbox) []ent {
			return []ent{{name: "d/", typ: tar.TypeDir, mode: 0o755}, {name: "d/a", typ: tar.TypeReg, data: "a"},
				{name: "d", typ: tar.TypeSymlink, link: s.outside}, {name: "d/pwned", typ: tar.TypeReg, data: "x"}}
		},
		"a hard link through a symlink that replaced a directory": func(s sandbox) []ent {
			return []ent{{name: "d/", typ: tar.TypeDir, mode: 0o755}, {name: "d/a", typ: tar.TypeReg, data: "a"},
				{name: "d", typ: tar.TypeSymlink, link: s.outside}, {name: "h", typ: tar.TypeLink, link: "d/secret"}}
		},
		"a whiteout through a symlink that replaced a directory": func(s sandbox) []ent {
			return []ent{{name: "d/", typ: tar.TypeDir, mode: 0o755}, {name: "d/a", typ: tar.TypeReg, data: "a"},
				{name: "d", typ: tar.TypeSymlink, link: s.outside}, {name: "d/.wh.secret", typ: tar.TypeReg}}
		},
		"an opaque marker through a symlink": func(s sandbox) []ent {
			return []ent{{name: "d", typ: tar.TypeSymlink, link: s.outside}, {name: "d/.wh..wh..opq", typ: tar.TypeReg}}
		},
		"a whiteout of ..": func(sandbox) []ent {
			return []ent{{name: "a/", typ: tar.TypeDir, mode: 0o755}, {name: "a/.wh...", typ: tar.TypeReg}}
		},
		"a whiteout of .. at the root": func(sandbox) []ent { return []ent{{name: ".wh...", typ: tar.TypeReg}} },
		"a whiteout of .":              func(sandbox) []ent { return []ent{{name: ".wh..", typ: tar.TypeReg}} },
		"a whiteout directory":         func(sandbox) []ent { return []ent{{name: ".wh.a/b", typ: tar.TypeReg, data: "b"}} },
		"an AUFS link directory":       func(sandbox) []ent { return []ent{{name: ".wh..wh.plnk/1", typ: tar.TypeReg, data: "b"}} },
		"an absolute name":             func(s sandbox) []ent { return []ent{{name: "/etc/cron.d/x", typ: tar.TypeReg, data: "x"}} },
		"a dot-dot name":               func(s sandbox) []ent { return []ent{{name: "../outside/pwned", typ: tar.TypeReg, data: "x"}} },
		"a hard link outside":          func(s sandbox) []ent { return []ent{{name: "h", typ: tar.TypeLink, link: "../outside/secret"}} },
		"an absolute hard link": func(s sandbox) []ent {
			return []ent{{name: "h", typ: tar.TypeLink, link: filepath.Join(s.outside, "secret")}}
		},
		"a character device": func(sandbox) []ent { return []ent{{name: "null", typ: tar.TypeChar, major: 1}} },
		"a block device":     func(sandbox) []ent { return []ent{{name: "sda", typ: tar.TypeBlock, major: 8}} },
		"a security xattr": func(sandbox) []ent {
			return []ent{{name: "ping", typ: tar.TypeReg, data: "x", pax: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}}}
		},
		"a trusted xattr": func(sandbox) []ent {
			return []ent{{name: "f", typ: tar.TypeReg, data: "x", pax: map[string]string{"SCHILY.xattr.trusted.overlay.redirect": "/etc"}}}
		},
		"a trusted xattr of its own": func(sandbox) []ent {
			return []ent{{name: "f", typ: tar.TypeReg, data: "x", pax: map[string]string{"SCHILY.xattr.trusted.evil": "1"}}}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t)
			_, err := applyTo(t, craft(t, mk(s)...), s.target)
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("applied with %v; want ErrUnsafe", err)
			}
			s.untouched(t)
		})
	}
}

// TestApplyStripsSetID: set-id bits never reach a session (they would
// work for whoever can reach the file on the host).
func TestApplyStripsSetID(t *testing.T) {
	needRoot(t)
	s := newSandbox(t)
	data := craft(t, ent{name: "sh", typ: tar.TypeReg, mode: 0o4755, data: "#!"}, ent{name: "d/", typ: tar.TypeDir, mode: 0o2775},
		ent{name: "tmp/", typ: tar.TypeDir, mode: 0o1777})
	if _, err := applyTo(t, data, s.target); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"sh": 0o755, "d": os.ModeDir | 0o775, "tmp": os.ModeDir | os.ModeSticky | 0o777} {
		fi, err := os.Lstat(filepath.Join(s.target, name))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", name, fi.Mode(), err, want)
		}
	}
}

// TestWhiteoutNamedFilesRoundTrip: an agent's own files named .wh.* stay
// files through a snapshot; they must not become deletions.
func TestWhiteoutNamedFilesRoundTrip(t *testing.T) {
	needRoot(t)
	src, dst := t.TempDir(), t.TempDir()
	for _, n := range []string{".wh.keep", ".wh..wh..opq", ".airlock-wh.x", "ok", ".wh.q", ".airlock-wh..wh.q", ".airlock-wh..airlock-wh..wh.q"} {
		os.WriteFile(filepath.Join(src, n), []byte(n), 0o644)
	}
	os.Mkdir(filepath.Join(src, ".wh.dir"), 0o755)
	os.WriteFile(filepath.Join(src, ".wh.dir", "inner"), []byte("inner"), 0o644)
	os.Mkdir(filepath.Join(src, ".wh.dir", ".airlock-wh.sub"), 0o700)
	os.WriteFile(filepath.Join(src, ".wh.dir", ".airlock-wh.sub", ".wh.deep"), []byte("deep"), 0o600)
	unix.Mknod(filepath.Join(src, ".wh.gone"), unix.S_IFCHR, 0) // a deletion of a file named .wh.gone
	if _, err := applyTo(t, writeFrom(t, src), dst); err != nil {
		t.Fatal(err)
	}
	if want, got := describe(t, src), describe(t, dst); !equalLines(want, got) {
		t.Errorf("round trip differs\nwant:\n%q\ngot:\n%q", want, got)
	}
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestSparseFilesStaySparse: a large sparse file takes its data's room in
// the layer, and on disk once applied.
func TestSparseFilesStaySparse(t *testing.T) {
	needRoot(t)
	src := t.TempDir()
	f, _ := os.Create(filepath.Join(src, "disk.img"))
	f.WriteAt([]byte("head"), 0)
	f.WriteAt([]byte("middle"), 1<<30)
	f.Truncate(4 << 30)
	f.Close()
	var n countWriter
	if _, err := WriteLayer(&n, Source{Root: root(t, src)}); err != nil {
		t.Fatal(err)
	}
	if n.n > 1<<20 {
		t.Errorf("a 4 GiB sparse file with 10 bytes of data takes %d bytes in the layer", n.n)
	}
}

// TestEscapedNamesUnderOverlay: under a real overlay, an applied layer
// deletes exactly what the session deleted, files named .wh.* included,
// and shows the session's own .wh.* files.
func TestEscapedNamesUnderOverlay(t *testing.T) {
	needRoot(t)
	lower := t.TempDir()
	os.WriteFile(filepath.Join(lower, ".wh.lower"), []byte("lower"), 0o644)
	os.WriteFile(filepath.Join(lower, "kept"), []byte("kept"), 0o644)
	src, dst := t.TempDir(), t.TempDir()
	must(t, unix.Mknod(filepath.Join(src, ".wh.lower"), unix.S_IFCHR, 0))
	os.WriteFile(filepath.Join(src, ".wh.kept"), []byte("mine"), 0o644)
	if _, err := applyTo(t, writeFrom(t, src), dst); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	work, mnt := filepath.Join(base, "work"), filepath.Join(base, "mnt")
	os.Mkdir(work, 0o700)
	os.Mkdir(mnt, 0o700)
	if err := unix.Mount("overlay", mnt, "overlay", 0, "lowerdir="+lower+",upperdir="+dst+",workdir="+work); err != nil {
		testenv.Missing(t, "overlay mount: "+err.Error())
	}
	defer unix.Unmount(mnt, 0)
	ents, _ := os.ReadDir(mnt)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".wh.kept kept" {
		t.Errorf("merged view: %v, want .wh.kept and kept", names)
	}
}

// TestApplyLimitsAndRouting: entry counts are bounded; a hard link may not
// point into a part of the layer applied elsewhere; CheckLayer's visitor
// may refuse.
func TestApplyLimitsAndRouting(t *testing.T) {
	needRoot(t)
	var entries []ent
	for i := range 20 {
		entries = append(entries, ent{name: "f" + strconv.Itoa(i), typ: tar.TypeReg})
	}
	s := newSandbox(t)
	if _, err := ApplyLayer(opener(craft(t, entries...)), Target{Root: root(t, s.target)}, Limits{Entries: 10}); !errors.Is(err, ErrLimit) {
		t.Errorf("20 entries, 10 allowed: %v", err)
	}
	if _, err := CheckLayer(bytes.NewReader(craft(t, entries...)), Limits{Entries: 10}, nil); !errors.Is(err, ErrLimit) {
		t.Errorf("CheckLayer, 20 entries, 10 allowed: %v", err)
	}
	link := craft(t, ent{name: "home/airlock/", typ: tar.TypeDir, mode: 0o755}, ent{name: "home/airlock/key", typ: tar.TypeReg, data: "k"},
		ent{name: "etc/", typ: tar.TypeDir, mode: 0o755}, ent{name: "etc/key", typ: tar.TypeLink, link: "home/airlock/key"})
	homeOnly := func(rel string) bool { return rel == "home/airlock" || strings.HasPrefix(rel, "home/airlock/") }
	if _, err := ApplyLayer(opener(link), Target{Root: root(t, s.target), Skip: homeOnly}, Limits{}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("a hard link into a skipped part: %v", err)
	}
	if _, err := ApplyLayer(opener(link), Target{Root: root(t, t.TempDir()), Prefix: "etc/"}, Limits{}); !errors.Is(err, ErrUnsafe) {
		t.Errorf("a hard link out of its prefix: %v", err)
	}
	no := errors.New("not here")
	if _, err := CheckLayer(bytes.NewReader(link), Limits{}, func(name string, typ byte) error {
		if name == "etc/key" {
			return no
		}
		return nil
	}); !errors.Is(err, no) {
		t.Errorf("visit: %v", err)
	}
	s.untouched(t)
}
