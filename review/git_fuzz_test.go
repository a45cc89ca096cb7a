package review

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"testing"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5/plumbing"
)

// FuzzGitObjects: whatever a session's repository holds — a tree, a
// commit, a loose object's header, a delta, a pack and its index — the
// readers return or refuse without panicking, within the read's budget,
// and what they accept keeps the rules they promise.
func FuzzGitObjects(f *testing.F) {
	blob := bytes.Repeat([]byte("seed line\n"), 20)
	bh := plumbing.ComputeHash(plumbing.BlobObject, blob)
	tree := append([]byte("100644 a.txt\x00"), bh[:]...)
	tree = append(tree, append([]byte("40000 dir\x00"), make([]byte, 20)...)...)
	commit := []byte("tree " + plumbing.ComputeHash(plumbing.TreeObject, tree).String() + "\nauthor A <a@b> 1 +0000\ncommitter A <a@b> 1 +0000\n\nmsg\n")
	// A delta: copy the first 100 bytes of blob, insert "new\n".
	delta := seedDelta(blob)
	pack, idx := fuzzPack(blob, delta)
	f.Add(tree, delta, pack, idx)
	f.Add(commit, delta, pack, idx)
	f.Add([]byte("blob 10\x00"), []byte{}, []byte("PACK"), []byte{0xff, 't', 'O', 'c'})
	f.Fuzz(func(t *testing.T, obj, delta, pack, idx []byte) {
		if es, err := parseTree(obj); err == nil {
			for i, e := range es {
				if checkTreeName(e.name) != nil || i > 0 && treeOrder(&es[i-1], &e) >= 0 {
					t.Fatalf("parseTree accepted %q", e.name)
				}
			}
		}
		parseCommit(obj)
		looseHeader(bytes.NewReader(obj))
		fsys := memfs.New()
		o := newGitObjects(fsys, 1<<20)
		if out, err := o.applyDelta(obj, delta, plumbing.BlobObject); err == nil && len(out) > 1<<20 {
			t.Fatalf("a delta made %d bytes past the budget", len(out))
		}
		util.WriteFile(fsys, "objects/pack/pack-x.pack", pack, 0o644)
		util.WriteFile(fsys, "objects/pack/pack-x.idx", idx, 0o644)
		p, err := openPack(fsys, "objects/pack/pack-x")
		if err != nil {
			return
		}
		defer o.close()
		o.packs = append(o.packs, p)
		for i := int64(0); i < min(p.n, 8); i++ {
			if off, err := p.offset(i); err == nil {
				o.resolve(p, off, plumbing.BlobObject)
			}
		}
		if o.budget < 0 {
			t.Fatalf("read past the budget: %d", o.budget)
		}
	})
}

func seedDelta(blob []byte) []byte {
	d := binary.AppendUvarint(nil, uint64(len(blob)))
	d = binary.AppendUvarint(d, 104)
	return append(d, 0x90, 100, 4, 'n', 'e', 'w', '\n')
}

// fuzzPack is a pack of a blob and an offset delta against it, and its
// index.
func fuzzPack(blob, delta []byte) (pack, idx []byte) {
	z := func(b []byte) []byte {
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	var p bytes.Buffer
	p.WriteString("PACK")
	binary.Write(&p, binary.BigEndian, uint32(2))
	binary.Write(&p, binary.BigEndian, uint32(2))
	off1 := p.Len()
	p.Write([]byte{0x30 | byte(len(blob)&0x0f) | 0x80, byte(len(blob) >> 4)})
	p.Write(z(blob))
	off2 := p.Len()
	p.Write([]byte{0x60 | byte(len(delta)), byte(off2 - off1)})
	p.Write(z(delta))
	sum := sha1.Sum(p.Bytes())
	p.Write(sum[:])
	h1 := plumbing.ComputeHash(plumbing.BlobObject, blob)
	h2 := plumbing.ComputeHash(plumbing.BlobObject, append(append([]byte{}, blob[:100]...), "new\n"...))
	names, offs := [][]byte{h1[:], h2[:]}, []int{off1, off2}
	if bytes.Compare(h2[:], h1[:]) < 0 {
		names, offs = [][]byte{h2[:], h1[:]}, []int{off2, off1}
	}
	var x bytes.Buffer
	x.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	for b := 0; b < 256; b++ {
		n := 0
		for _, nm := range names {
			if int(nm[0]) <= b {
				n++
			}
		}
		binary.Write(&x, binary.BigEndian, uint32(n))
	}
	for _, nm := range names {
		x.Write(nm)
	}
	x.Write(make([]byte, 8)) // CRCs
	for _, o := range offs {
		binary.Write(&x, binary.BigEndian, uint32(o))
	}
	x.Write(sum[:])
	isum := sha1.Sum(x.Bytes())
	x.Write(isum[:])
	return p.Bytes(), x.Bytes()
}

// TestFuzzSeedPack: the fuzz seed is a pack the reader resolves.
func TestFuzzSeedPack(t *testing.T) {
	blob := bytes.Repeat([]byte("seed line\n"), 20)
	pack, idx := fuzzPack(blob, seedDelta(blob))
	fsys := memfs.New()
	util.WriteFile(fsys, "objects/pack/pack-x.pack", pack, 0o644)
	util.WriteFile(fsys, "objects/pack/pack-x.idx", idx, 0o644)
	o := newGitObjects(fsys, 1<<20)
	defer o.close()
	want := append(append([]byte{}, blob[:100]...), "new\n"...)
	got, err := o.read(plumbing.ComputeHash(plumbing.BlobObject, want), plumbing.BlobObject)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("delta object: %q, %v", got, err)
	}
}
