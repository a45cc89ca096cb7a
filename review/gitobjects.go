package review

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// The largest object of each kind read from a session's repository. The
// size is what the object's header declares, checked before anything is
// inflated; an object that inflates past its header is refused there.
const (
	gitMaxCommit = 1 << 20   // a commit (or tag): headers and a message
	gitMaxTree   = 16 << 20  // about 400,000 entries in one directory
	gitMaxBlob   = 100 << 20 // GitHub refuses larger files
	// Deltas in a pack chain at most this deep (git's own limit).
	gitMaxDeltaDepth = 4095
	// Packs read from one objects/pack directory.
	gitMaxPacks = 128
	// Resolved delta bases kept while reading a pack.
	gitBaseCache = 32 << 20
)

func gitMaxObject(t plumbing.ObjectType) int64 {
	switch t {
	case plumbing.BlobObject:
		return gitMaxBlob
	case plumbing.TreeObject:
		return gitMaxTree
	}
	return gitMaxCommit
}

// errNoObject is an object the session's repository does not have.
var errNoObject = fmt.Errorf("not in the session's repository (alternates are never followed): %w", fs.ErrNotExist)

// gitObjects reads objects from a session's object store, loose or
// packed, through a gitFS, and never trusts it:
//
//   - go-git's own readers inflate a loose object until its zlib stream
//     ends, whatever its header says (a few MiB on disk become GiBs in
//     memory), load delta bases whole, and recurse without a bound on
//     delta chains (a REF delta whose base is itself overflows the stack,
//     which kills the process); so objects are read here instead;
//   - an object's declared size is checked against the limit for the
//     kind the caller expects, and against what is left of the read's
//     budget, before anything is inflated; exactly that many bytes are
//     inflated and the stream must end there;
//   - a delta chain is followed by its headers first (at most
//     gitMaxDeltaDepth, never in a loop), then applied from its base;
//     every result is checked against its declared size;
//   - the content must hash (SHA-1 with collision detection, as git) to
//     the name it was asked by: an object is what it says it is, so
//     commits cannot form a cycle and nothing can pass for a host object;
//   - objects/info/alternates is never read.
type gitObjects struct {
	fs     billy.Filesystem
	budget int64 // bytes that may still be inflated
	total  int64
	packs  []*gitPack
	listed bool
	cache  baseCache
}

func newGitObjects(fsys billy.Filesystem, budget int64) *gitObjects {
	return &gitObjects{fs: fsys, budget: budget, total: budget, cache: baseCache{max: gitBaseCache}}
}

func (o *gitObjects) close() {
	for _, p := range o.packs {
		p.idx.Close()
		p.pack.Close()
	}
	o.packs = nil
}

// read returns the content of object h, which must be of type want.
func (o *gitObjects) read(h plumbing.Hash, want plumbing.ObjectType) ([]byte, error) {
	b, err := o.readLoose(h, want)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = o.readPacked(h, want)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", h, err)
	}
	hs := plumbing.NewHasher(want, int64(len(b)))
	hs.Write(b)
	sum, collision := hs.Sum(), false
	if cr, ok := hs.Hash.(interface {
		CollisionResistantSum([]byte) ([]byte, bool)
	}); ok {
		var s []byte
		s, collision = cr.CollisionResistantSum(nil)
		copy(sum[:], s)
	}
	if collision {
		return nil, fmt.Errorf("object %s: its content is a SHA-1 collision attack", h)
	}
	if sum != h {
		return nil, fmt.Errorf("object %s: its content is object %s, not what its name says", h, sum)
	}
	return b, nil
}

func errObjectSize(t plumbing.ObjectType, n uint64) error {
	size := byteSize(int64(min(n, 1<<62)))
	return fmt.Errorf("a %s of %s is larger than the %s the engine reads", t, size, byteSize(gitMaxObject(t)))
}

// take charges n inflated bytes of an object of type want to the read.
func (o *gitObjects) take(want plumbing.ObjectType, n int64) error {
	if n < 0 || n > gitMaxObject(want) {
		return errObjectSize(want, uint64(n))
	}
	if n > o.budget {
		return fmt.Errorf("reading it would pass the %s the engine inflates from a session's repository at a time", byteSize(o.total))
	}
	o.budget -= n
	return nil
}

func (o *gitObjects) readLoose(h plumbing.Hash, want plumbing.ObjectType) ([]byte, error) {
	name := h.String()
	f, err := o.fs.Open("objects/" + name[:2] + "/" + name[2:])
	if err != nil {
		if os.IsNotExist(err) {
			return nil, errNoObject
		}
		return nil, err
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReaderSize(f, 32<<10))
	if err != nil {
		return nil, fmt.Errorf("loose object: %w", err)
	}
	typ, size, err := looseHeader(zr)
	if err != nil {
		return nil, err
	}
	if typ != want {
		return nil, fmt.Errorf("is a %s, not a %s", typ, want)
	}
	if err := o.take(want, size); err != nil {
		return nil, err
	}
	return inflateExactly(zr, size)
}

// looseHeader reads "<type> <size>\x00" from a loose object's stream.
func looseHeader(r io.Reader) (plumbing.ObjectType, int64, error) {
	var hdr []byte
	var one [1]byte
	for {
		if _, err := io.ReadFull(r, one[:]); err != nil {
			return 0, 0, fmt.Errorf("loose object header: %w", err)
		}
		if one[0] == 0 {
			break
		}
		if len(hdr) == 32 {
			return 0, 0, errors.New("loose object header too long")
		}
		hdr = append(hdr, one[0])
	}
	ts, ss, ok := strings.Cut(string(hdr), " ")
	typ, err := objectType(ts)
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("loose object header %q", hdr)
	}
	size, err := strconv.ParseInt(ss, 10, 64)
	if err != nil || size < 0 || ss != strconv.FormatInt(size, 10) {
		return 0, 0, fmt.Errorf("loose object header %q", hdr)
	}
	return typ, size, nil
}

func objectType(s string) (plumbing.ObjectType, error) {
	switch s {
	case "commit":
		return plumbing.CommitObject, nil
	case "tree":
		return plumbing.TreeObject, nil
	case "blob":
		return plumbing.BlobObject, nil
	case "tag":
		return plumbing.TagObject, nil
	}
	return 0, fmt.Errorf("unknown object type %q", s)
}

// inflateExactly reads size bytes from zr, whose stream must end there.
func inflateExactly(zr io.Reader, size int64) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(zr, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("inflates to less than the %d bytes its header declares", size)
		}
		return nil, fmt.Errorf("inflate: %w", err)
	}
	var one [1]byte
	n, err := zr.Read(one[:])
	if n > 0 {
		return nil, fmt.Errorf("inflates past the %d bytes its header declares", size)
	}
	if err != io.EOF {
		if err == nil {
			err = io.ErrNoProgress
		}
		return nil, fmt.Errorf("inflate: %w", err)
	}
	return b, nil
}

// readPacked finds h in the repository's packs.
func (o *gitObjects) readPacked(h plumbing.Hash, want plumbing.ObjectType) ([]byte, error) {
	if err := o.listPacks(); err != nil {
		return nil, err
	}
	for _, p := range o.packs {
		off, ok, err := p.find(h)
		if err != nil {
			return nil, err
		}
		if ok {
			return o.resolve(p, off, want)
		}
	}
	return nil, errNoObject
}

func (o *gitObjects) listPacks() error {
	if o.listed {
		return nil
	}
	o.listed = true
	fis, err := o.fs.ReadDir("objects/pack")
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, fi := range fis {
		name, ok := strings.CutSuffix(fi.Name(), ".idx")
		if !ok || !fi.Mode().IsRegular() || !strings.HasPrefix(name, "pack-") {
			continue
		}
		if len(o.packs) == gitMaxPacks {
			return fmt.Errorf("objects/pack: more than %d packs", gitMaxPacks)
		}
		p, err := openPack(o.fs, "objects/pack/"+name)
		if err != nil {
			return err
		}
		o.packs = append(o.packs, p)
	}
	return nil
}

// gitPack is a version 2 pack index and its pack, read at offsets.
type gitPack struct {
	name      string
	idx, pack billy.File
	packSize  int64
	n         int64 // objects
	big       int64 // 64-bit offsets in the index
	fanout    [256]uint32
}

const idxHeader = 8 + 256*4

func openPack(fsys billy.Filesystem, name string) (_ *gitPack, err error) {
	p := &gitPack{name: name}
	if p.idx, err = fsys.Open(name + ".idx"); err != nil {
		return nil, err
	}
	if p.pack, err = fsys.Open(name + ".pack"); err != nil {
		p.idx.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			p.idx.Close()
			p.pack.Close()
			err = fmt.Errorf("%s: %w", name, err)
		}
	}()
	var hdr [idxHeader]byte
	if _, err := p.idx.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if !bytes.Equal(hdr[:4], []byte{0xff, 't', 'O', 'c'}) || binary.BigEndian.Uint32(hdr[4:8]) != 2 {
		return nil, errors.New("not a version 2 pack index")
	}
	for i := range p.fanout {
		p.fanout[i] = binary.BigEndian.Uint32(hdr[8+4*i:])
		if i > 0 && p.fanout[i] < p.fanout[i-1] {
			return nil, errors.New("pack index: fanout table out of order")
		}
	}
	p.n = int64(p.fanout[255])
	size, err := fileSize(p.idx)
	if err != nil {
		return nil, err
	}
	// header, names, CRCs, 32-bit offsets, 64-bit offsets, two checksums
	small := idxHeader + p.n*(20+4+4) + 2*20
	extra := size - small
	if extra < 0 || extra%8 != 0 || extra/8 > max(p.n-1, 0) {
		return nil, fmt.Errorf("pack index of %d bytes for %d objects", size, p.n)
	}
	p.big = extra / 8
	if p.packSize, err = fileSize(p.pack); err != nil {
		return nil, err
	}
	var ph [12]byte
	if _, err := p.pack.ReadAt(ph[:], 0); err != nil || p.packSize < 12+20 {
		return nil, errors.New("pack too short")
	}
	if v := binary.BigEndian.Uint32(ph[4:8]); string(ph[:4]) != "PACK" || v != 2 && v != 3 {
		return nil, errors.New("not a version 2 or 3 pack")
	}
	if int64(binary.BigEndian.Uint32(ph[8:12])) != p.n {
		return nil, errors.New("the pack and its index disagree on the number of objects")
	}
	return p, nil
}

func fileSize(f billy.File) (int64, error) {
	if s, ok := f.(interface{ Stat() (os.FileInfo, error) }); ok {
		fi, err := s.Stat()
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	return f.Seek(0, io.SeekEnd)
}

// find returns the offset of h in the pack.
func (p *gitPack) find(h plumbing.Hash) (int64, bool, error) {
	lo := int64(0)
	if h[0] > 0 {
		lo = int64(p.fanout[h[0]-1])
	}
	hi := int64(p.fanout[h[0]])
	var name [20]byte
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, err := p.idx.ReadAt(name[:], idxHeader+mid*20); err != nil {
			return 0, false, fmt.Errorf("%s.idx: %w", p.name, err)
		}
		switch c := bytes.Compare(name[:], h[:]); {
		case c < 0:
			lo = mid + 1
		case c > 0:
			hi = mid
		default:
			off, err := p.offset(mid)
			return off, err == nil, err
		}
	}
	return 0, false, nil
}

func (p *gitPack) offset(i int64) (int64, error) {
	var b [8]byte
	if _, err := p.idx.ReadAt(b[:4], idxHeader+p.n*24+i*4); err != nil {
		return 0, fmt.Errorf("%s.idx: %w", p.name, err)
	}
	off := int64(binary.BigEndian.Uint32(b[:4]))
	if off&0x80000000 != 0 {
		j := off & 0x7fffffff
		if j >= p.big {
			return 0, fmt.Errorf("%s.idx: bad 64-bit offset", p.name)
		}
		if _, err := p.idx.ReadAt(b[:], idxHeader+p.n*28+j*8); err != nil {
			return 0, fmt.Errorf("%s.idx: %w", p.name, err)
		}
		off = int64(binary.BigEndian.Uint64(b[:]))
	}
	if off < 12 || off >= p.packSize-20 {
		return 0, fmt.Errorf("%s.idx: offset %d outside the pack", p.name, off)
	}
	return off, nil
}

// packEntry is an entry's header: an object (type 1-4), or a delta
// against the entry at base (type 6) or against the object ref (type 7).
type packEntry struct {
	off, data int64 // the entry, and its zlib stream
	typ       int
	size      int64 // inflated size of the object or the delta
	base      int64
	ref       plumbing.Hash
}

var packTypes = [...]plumbing.ObjectType{1: plumbing.CommitObject, 2: plumbing.TreeObject, 3: plumbing.BlobObject, 4: plumbing.TagObject}

func (p *gitPack) entry(off int64) (packEntry, error) {
	e := packEntry{off: off}
	var buf [32]byte
	n, err := p.pack.ReadAt(buf[:], off)
	if n == 0 {
		return e, fmt.Errorf("%s.pack at %d: %v", p.name, off, err)
	}
	b := buf[:n]
	i := 0
	next := func() (byte, error) {
		if i >= len(b) {
			return 0, fmt.Errorf("%s.pack at %d: truncated entry header", p.name, off)
		}
		i++
		return b[i-1], nil
	}
	c, _ := next()
	e.typ = int(c>>4) & 7
	e.size = int64(c & 0x0f)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if shift > 56 {
			return e, fmt.Errorf("%s.pack at %d: entry size overflows", p.name, off)
		}
		if c, err = next(); err != nil {
			return e, err
		}
		e.size |= int64(c&0x7f) << shift
	}
	switch e.typ {
	case 1, 2, 3, 4:
	case 6:
		if c, err = next(); err != nil {
			return e, err
		}
		rel := int64(c & 0x7f)
		for c&0x80 != 0 {
			if c, err = next(); err != nil {
				return e, err
			}
			if rel > (1<<55)-1 {
				return e, fmt.Errorf("%s.pack at %d: delta offset overflows", p.name, off)
			}
			rel = (rel+1)<<7 | int64(c&0x7f)
		}
		if rel <= 0 || rel > off-12 {
			return e, fmt.Errorf("%s.pack at %d: delta base outside the pack", p.name, off)
		}
		e.base = off - rel
	case 7:
		if len(b)-i < 20 {
			return e, fmt.Errorf("%s.pack at %d: truncated entry header", p.name, off)
		}
		copy(e.ref[:], b[i:i+20])
		i += 20
	default:
		return e, fmt.Errorf("%s.pack at %d: entry of unknown type %d", p.name, off, e.typ)
	}
	e.data = off + int64(i)
	return e, nil
}

// inflate reads entry e's data, exactly e.size bytes.
func (p *gitPack) inflate(e packEntry) ([]byte, error) {
	end := p.packSize - 20
	if e.data >= end {
		return nil, fmt.Errorf("%s.pack at %d: no data", p.name, e.off)
	}
	zr, err := zlib.NewReader(bufio.NewReaderSize(io.NewSectionReader(p.pack, e.data, end-e.data), 32<<10))
	if err != nil {
		return nil, fmt.Errorf("%s.pack at %d: %w", p.name, e.off, err)
	}
	b, err := inflateExactly(zr, e.size)
	if err != nil {
		return nil, fmt.Errorf("%s.pack at %d: %w", p.name, e.off, err)
	}
	return b, nil
}

// resolve reads the object at off: its delta chain by headers down to a
// base (or a cached result), then the deltas applied upwards.
func (o *gitObjects) resolve(p *gitPack, off int64, want plumbing.ObjectType) ([]byte, error) {
	var chain []packEntry
	seen := map[int64]bool{}
	var cur []byte
	for {
		if c, ok := o.cache.get(p, off); ok {
			if c.typ != want {
				return nil, fmt.Errorf("is a %s, not a %s", c.typ, want)
			}
			cur = c.data
			break
		}
		if seen[off] {
			return nil, fmt.Errorf("%s.pack: its delta chain loops", p.name)
		}
		if len(chain) == gitMaxDeltaDepth {
			return nil, fmt.Errorf("%s.pack: its delta chain is longer than %d", p.name, gitMaxDeltaDepth)
		}
		seen[off] = true
		e, err := p.entry(off)
		if err != nil {
			return nil, err
		}
		if e.typ <= 4 {
			if t := packTypes[e.typ]; t != want {
				return nil, fmt.Errorf("is a %s, not a %s", t, want)
			}
			if err := o.take(want, e.size); err != nil {
				return nil, err
			}
			if cur, err = p.inflate(e); err != nil {
				return nil, err
			}
			o.cache.put(p, off, want, cur)
			break
		}
		chain = append(chain, e)
		if e.typ == 6 {
			off = e.base
			continue
		}
		boff, ok, err := p.find(e.ref)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s.pack: delta base %s is not in the pack", p.name, e.ref)
		}
		off = boff
	}
	limit := gitMaxObject(want)
	for i := len(chain) - 1; i >= 0; i-- {
		e := chain[i]
		// A delta is its two sizes and its instructions: at most one
		// byte of instruction per 127 bytes of result, beyond the
		// result itself.
		if e.size > limit+limit/64+32 {
			return nil, fmt.Errorf("%s.pack at %d: a delta of %s", p.name, e.off, byteSize(e.size))
		}
		if err := o.take(want, min(e.size, limit)); err != nil {
			return nil, err
		}
		delta, err := p.inflate(e)
		if err != nil {
			return nil, err
		}
		if cur, err = o.applyDelta(cur, delta, want); err != nil {
			return nil, fmt.Errorf("%s.pack at %d: %w", p.name, e.off, err)
		}
		o.cache.put(p, e.off, want, cur)
	}
	return cur, nil
}

// applyDelta applies a git delta to base, refusing a result larger than
// the limit for want, or than the delta declares.
func (o *gitObjects) applyDelta(base, delta []byte, want plumbing.ObjectType) ([]byte, error) {
	src, n := binary.Uvarint(delta)
	if n <= 0 {
		return nil, errors.New("bad delta header")
	}
	delta = delta[n:]
	dst, n := binary.Uvarint(delta)
	if n <= 0 {
		return nil, errors.New("bad delta header")
	}
	delta = delta[n:]
	if src != uint64(len(base)) {
		return nil, fmt.Errorf("a delta for a base of %d bytes applied to %d", src, len(base))
	}
	if dst > uint64(gitMaxObject(want)) {
		return nil, errObjectSize(want, dst)
	}
	if err := o.take(want, int64(dst)); err != nil {
		return nil, err
	}
	out := make([]byte, 0, dst)
	for i := 0; i < len(delta); {
		cmd := delta[i]
		i++
		switch {
		case cmd&0x80 != 0:
			var off, size uint64
			for bit := 0; bit < 7; bit++ {
				if cmd&(1<<bit) == 0 {
					continue
				}
				if i >= len(delta) {
					return nil, errors.New("truncated delta")
				}
				if bit < 4 {
					off |= uint64(delta[i]) << (8 * bit)
				} else {
					size |= uint64(delta[i]) << (8 * (bit - 4))
				}
				i++
			}
			if size == 0 {
				size = 0x10000
			}
			if off > uint64(len(base)) || size > uint64(len(base))-off || size > dst-uint64(len(out)) {
				return nil, errors.New("delta copies outside its base or past its result")
			}
			out = append(out, base[off:off+size]...)
		case cmd != 0:
			size := uint64(cmd)
			if int(size) > len(delta)-i || size > dst-uint64(len(out)) {
				return nil, errors.New("delta inserts past its end or past its result")
			}
			out = append(out, delta[i:i+int(size)]...)
			i += int(size)
		default:
			return nil, errors.New("delta instruction 0")
		}
	}
	if uint64(len(out)) != dst {
		return nil, fmt.Errorf("delta makes %d bytes, not the %d it declares", len(out), dst)
	}
	return out, nil
}

// baseCache keeps recently resolved pack objects, for the deltas that
// share them, up to max bytes (oldest out first).
type baseCache struct {
	max, used int64
	m         map[baseKey]baseEntry
	order     []baseKey
}

type baseKey struct {
	p   *gitPack
	off int64
}

type baseEntry struct {
	typ  plumbing.ObjectType
	data []byte
}

func (c *baseCache) get(p *gitPack, off int64) (baseEntry, bool) {
	e, ok := c.m[baseKey{p, off}]
	return e, ok
}

func (c *baseCache) put(p *gitPack, off int64, typ plumbing.ObjectType, data []byte) {
	size := int64(len(data))
	if size > c.max/4 {
		return
	}
	if c.m == nil {
		c.m = map[baseKey]baseEntry{}
	}
	k := baseKey{p, off}
	if _, ok := c.m[k]; ok {
		return
	}
	for c.used+size > c.max && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.used -= int64(len(c.m[old].data))
		delete(c.m, old)
	}
	c.m[k] = baseEntry{typ, data}
	c.order = append(c.order, k)
	c.used += size
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// parseHex reads a 40-digit lower-case hex object name.
func parseHex(s string) (plumbing.Hash, bool) {
	var h plumbing.Hash
	if len(s) != 40 || strings.ToLower(s) != s {
		return h, false
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err == nil
}
