package snapshot

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/testenv"
	"go.podman.io/storage/pkg/archive"
	"golang.org/x/sys/unix"
)

// FuzzApplyLayer applies arbitrary tars. Whatever the input, nothing
// beside the target changes, and the target holds no device but overlay
// whiteouts, no set-id bit and no extended attribute but user.* and the
// opaque marker. The library runs in-process here (its chrooted child
// would cost an exec per input): the rules are what is fuzzed, the chroot
// is a second line of defence.
func FuzzApplyLayer(f *testing.F) {
	testenv.Root(f, "whiteouts")
	src := f.TempDir()
	upperFixture(f, src)
	f.Add(writeFrom(f, src))
	for _, entries := range [][]ent{
		{{name: "d/", typ: tar.TypeDir}, {name: "d", typ: tar.TypeSymlink, link: "/outside"}, {name: "d/pwned", typ: tar.TypeReg, data: "x"}},
		{{name: "d", typ: tar.TypeSymlink, link: "../outside"}, {name: "h", typ: tar.TypeLink, link: "d/secret"}},
		{{name: "a/", typ: tar.TypeDir}, {name: "a/.wh...", typ: tar.TypeReg}},
		{{name: ".wh.a/b", typ: tar.TypeReg, data: "b"}, {name: ".airlock-wh..wh.x", typ: tar.TypeReg, data: "x"}},
		{{name: "null", typ: tar.TypeChar, major: 1}, {name: "sh", typ: tar.TypeReg, mode: 0o4755, data: "#!"}},
		{{name: "f", typ: tar.TypeReg, pax: map[string]string{"SCHILY.xattr.security.capability": "x", "SCHILY.xattr.user.a": "1"}}},
		{{name: "s", typ: tar.TypeReg, data: "data", pax: map[string]string{"GNU.sparse.map": "0,4", "GNU.sparse.numblocks": "1", "GNU.sparse.size": "100"}}},
	} {
		f.Add(craft(f, entries...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		s := sandbox{filepath.Join(base, "target"), filepath.Join(base, "outside")}
		os.Mkdir(s.target, 0o755)
		os.Mkdir(s.outside, 0o755)
		os.WriteFile(filepath.Join(s.outside, "secret"), []byte("host secret"), 0o600)
		a := &applier{t: Target{Root: root(t, s.target)}, lim: Limits{Entries: 1000, FileSize: 1 << 20, Holes: 1 << 20}, untar: func(r io.Reader, dest string) error {
			return archive.UntarUncompressed(r, dest, &archive.TarOptions{WhiteoutFormat: archive.OverlayWhiteoutFormat})
		}}
		a.apply(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		s.untouched(t)
		if ents, _ := os.ReadDir(base); len(ents) != 2 {
			t.Errorf("the layer wrote beside its target: %v", ents)
		}
		filepath.WalkDir(s.target, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil {
				return nil
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFBLK:
				t.Errorf("%s is a block device", p)
			case unix.S_IFCHR:
				if st.Rdev != 0 {
					t.Errorf("%s is a device %d", p, st.Rdev)
				}
			}
			if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 && st.Mode&unix.S_IFMT != unix.S_IFLNK {
				t.Errorf("%s has a set-id bit: %o", p, st.Mode)
			}
			for k := range lxattrs(t, p) {
				if !strings.HasPrefix(k, "user.") && k != opaqueXattr {
					t.Errorf("%s has xattr %s", p, k)
				}
			}
			return nil
		})
	})
}
