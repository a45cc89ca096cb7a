package checkpoint

import (
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strings"
)

// Kind is how a path changed between two checkpoints.
type Kind string

// The kinds of changes. Paths are those of the upper directory: a path
// that turned into a Whiteout entry is a deletion of the lower layer's
// file (Old is what the upper directory held there before, if anything).
const (
	Added    Kind = "added"
	Deleted  Kind = "deleted"
	Modified Kind = "modified" // content, type, mode, owner, time, target, xattrs or opacity
)

// Change is one path that differs between two checkpoints. Old and New
// are the entries (nil where the path is absent); their contents are read
// with OpenContent.
type Change struct {
	Path string
	Kind Kind
	Old  *Entry
	New  *Entry
}

// Diff lists what changed from checkpoint a to checkpoint b (a = 0: from
// an empty directory), in path order, from the stored trees alone: no
// live directory is read. Directories whose trees are equal are skipped
// whole, so the cost is that of the changes. A directory added or deleted
// lists everything beneath it too.
func (s *Store) Diff(a, b ID) ([]Change, error) {
	var out []Change
	return out, s.DiffEach(a, b, func(c Change) error {
		out = append(out, c)
		return nil
	})
}

// DiffEach is Diff handing each change to fn as the trees are compared,
// keeping none: a change's entries are those of the part being read, so
// a caller that keeps less than the change holds one part of each side
// at a time. fn runs under the store's lock: it must not call the Store.
// An error from fn ends the walk and is returned.
func (s *Store) DiffEach(a, b ID, fn func(Change) error) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	root := func(id ID) (string, error) {
		if id == 0 {
			return "", nil
		}
		c, err := s.readRecord(id)
		if err != nil {
			return "", err
		}
		return c.Root.Digest, nil
	}
	ra, err := root(a)
	if err != nil {
		return err
	}
	rb, err := root(b)
	if err != nil {
		return err
	}
	return s.diffTrees("", ra, rb, fn)
}

// diffTrees hands fn the changes between the trees a and b ("" for none)
// of the directory rel: one merge of their name-ordered lists, read a
// part at a time.
func (s *Store) diffTrees(rel, a, b string, fn func(Change) error) error {
	if a == b {
		return nil
	}
	ta, err := s.openDir(a)
	if err != nil {
		return err
	}
	tb, err := s.openDir(b)
	if err != nil {
		return err
	}
	x, err := ta.entry()
	if err != nil {
		return err
	}
	y, err := tb.entry()
	if err != nil {
		return err
	}
	for x != nil || y != nil {
		var ox, oy *Entry // this name's, in a and in b
		switch {
		case y == nil || x != nil && x.Name < y.Name:
			ox = x
		case x == nil || y.Name < x.Name:
			oy = y
		default:
			ox, oy = x, y
		}
		n := ox
		if n == nil {
			n = oy
		}
		p := path.Join(rel, n.Name)
		var err error
		switch {
		case oy == nil:
			err = fn(Change{Path: p, Kind: Deleted, Old: ox})
		case ox == nil:
			err = fn(Change{Path: p, Kind: Added, New: oy})
		case !ox.sameAs(oy) && !(ox.Type == Dir && oy.Type == Dir && sameDirMeta(ox, oy)):
			err = fn(Change{Path: p, Kind: Modified, Old: ox, New: oy})
		}
		if err != nil {
			return err
		}
		if err := s.diffTrees(p, dirDigest(ox), dirDigest(oy), fn); err != nil {
			return err
		}
		if ox != nil {
			if x, err = ta.entry(); err != nil {
				return err
			}
		}
		if oy != nil {
			if y, err = tb.entry(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Resolve finds the path p (slash-separated, relative to the recorded
// directory) in checkpoint id, read from its trees: e is the entry the
// checkpoint holds there (a Whiteout is a deletion), or nil when it holds
// none. lower says whether, with no entry, an overlay over a lower layer
// shows the lower layer's p: no directory on the way is opaque, a
// whiteout, or something other than a directory. (NewResolver keeps the
// trees for many paths.)
func (s *Store) Resolve(id ID, p string) (e *Entry, lower bool, err error) {
	r, err := s.NewResolver(id)
	if err != nil {
		return nil, false, err
	}
	return r.Resolve(p)
}

// Resolver finds paths in one checkpoint (see Store.Resolve), keeping
// the directories it read last (resolverDirs of them, a part of each):
// resolving the paths of a large change in order reads each tree about
// once, and holds the directories on the way, not the whole checkpoint.
type Resolver struct {
	s    *Store
	root Entry
	dirs map[string]*resolverDir // by digest
	tick uint64
}

type resolverDir struct {
	d    *dirReader
	used uint64
}

// resolverDirs bounds the directories a Resolver keeps.
const resolverDirs = 64

// NewResolver returns a Resolver of checkpoint id.
func (s *Store) NewResolver(id ID) (*Resolver, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := s.readRecord(id)
	if err != nil {
		return nil, err
	}
	return &Resolver{s: s, root: c.Root, dirs: map[string]*resolverDir{}}, nil
}

func (r *Resolver) dir(digest string) (*dirReader, error) {
	r.tick++
	if t, ok := r.dirs[digest]; ok {
		t.used = r.tick
		return t.d, nil
	}
	unlock, err := r.s.lock()
	if err != nil {
		return nil, err
	}
	t, err := r.s.openDir(digest)
	unlock()
	if err != nil {
		return nil, err
	}
	if len(r.dirs) >= resolverDirs {
		oldest := ""
		for k, v := range r.dirs {
			if oldest == "" || v.used < r.dirs[oldest].used {
				oldest = k
			}
		}
		delete(r.dirs, oldest)
	}
	r.dirs[digest] = &resolverDir{d: t, used: r.tick}
	return t, nil
}

// find is t.find, under the store's lock when it may read a part.
func (r *Resolver) find(t *dirReader, n string) (*Entry, error) {
	if t.top == nil || t.top.Parts == nil {
		return t.find(n)
	}
	unlock, err := r.s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return t.find(n)
}

// Resolve is Store.Resolve of the Resolver's checkpoint.
func (r *Resolver) Resolve(p string) (e *Entry, lower bool, err error) {
	hidden := r.root.Opaque // the lower layer shows nowhere beneath an opaque directory
	digest := r.root.Digest
	parts := strings.Split(p, "/")
	for i, n := range parts {
		t, err := r.dir(digest)
		if err != nil {
			return nil, false, err
		}
		x, err := r.find(t, n)
		if err != nil {
			return nil, false, err
		}
		if x == nil {
			return nil, !hidden, nil
		}
		if i == len(parts)-1 {
			return x, false, nil
		}
		if x.Type != Dir {
			return nil, false, nil
		}
		hidden = hidden || x.Opaque
		digest = x.Digest
	}
	return nil, !hidden, nil
}

// sameDirMeta says whether two directories differ only by their contents
// (their tree digests), which their entries report.
func sameDirMeta(x, y *Entry) bool {
	xx, yy := *x, *y
	xx.Digest, yy.Digest = "", ""
	return xx.sameAs(&yy)
}

// OpenContent reads a file entry's content (a sparse file's holes read as
// zeros), checked against its digest: the last Read fails with
// ErrCorrupt when the stored object does not match. A sparse file is
// checked (its data only) before the first byte is returned.
func (s *Store) OpenContent(e *Entry) (io.ReadCloser, error) {
	if e.Type != File || e.Digest == "" {
		return nil, fmt.Errorf("%s is a %s: only files have content", e.Name, e.Type)
	}
	p, err := s.objectPath(e.Digest)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: object %s is missing", ErrCorrupt, e.Digest)
	}
	if err != nil {
		return nil, err
	}
	if !e.Sparse {
		return &verifier{f: f, h: contentHash(e.Size, nil, false), want: e.Digest}, nil
	}
	h := contentHash(e.Size, e.Regions, true)
	_, err = copyRegions(int(f.Fd()), e.Regions, make([]byte, 1<<20), func(b []byte, _ int64) error {
		h.Write(b)
		return nil
	})
	if err == nil && digestOf(h) != e.Digest || errors.Is(err, errChanged) {
		err = fmt.Errorf("%w: object %s does not match its digest", ErrCorrupt, e.Digest)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

type verifier struct {
	f    *os.File
	h    hash.Hash
	want string
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := digestOf(v.h); got != v.want {
			return n, fmt.Errorf("%w: object %s holds content with digest %s", ErrCorrupt, v.want, got)
		}
	}
	return n, err
}

func (v *verifier) Close() error { return v.f.Close() }
