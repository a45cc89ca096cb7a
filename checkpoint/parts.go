package checkpoint

import (
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
)

// A large directory's tree is stored in parts: its entries are cut into
// runs of partMin to partMax entries, each stored as a tree of its own,
// and the directory's tree lists the parts ({"e":null,"p":[{"n": first
// name, "d": digest, "c": entries}, ...]}). A run ends after a name whose
// hash says so (one name in partAvg, past partMin entries) or at
// partMax: the cuts follow the names, not their positions, so a file
// added or changed rewrites the part it falls in (a few hundred entries),
// not the 40 MB of a directory of 200,000 names, and whoever reads the
// directory (a Record comparing with it, a restore, a diff, GC) holds
// one part at a time. A directory of at most partMax entries is one tree
// as before (the same bytes, the same digest), and a tree without parts
// is read as it always was.
const (
	partMin = 256
	partAvg = 1024
	partMax = 4096
)

// part is one run of a large directory's entries.
type part struct {
	First  string `json:"n"`
	Digest string `json:"d"`
	Count  int    `json:"c"`
}

// cutAfter says whether a run of n entries ending with name ends there.
func cutAfter(name string, n int) bool {
	if n >= partMax {
		return true
	}
	if n < partMin {
		return false
	}
	h := fnv.New32a()
	io.WriteString(h, name)
	return h.Sum32()%partAvg == 0
}

// dirReader reads a directory's tree, one part at a time.
type dirReader struct {
	s    *Store
	top  *tree // nil: no tree (an empty reader)
	at   int   // the part loaded (parts only), -1 for none
	cur  *tree // its entries, or top itself
	next int   // the entry next returns, in cur
}

// openDir reads the tree digest ("": none).
func (s *Store) openDir(digest string) (*dirReader, error) {
	d := &dirReader{s: s, at: -1}
	if digest == "" {
		return d, nil
	}
	t, err := s.readTree(digest)
	if err != nil {
		return nil, err
	}
	d.top = t
	if t.Parts == nil {
		d.cur = t
	}
	return d, nil
}

// count is how many entries the directory holds.
func (d *dirReader) count() int {
	switch {
	case d.top == nil:
		return 0
	case d.top.Parts == nil:
		return len(d.top.Entries)
	}
	n := 0
	for _, p := range d.top.Parts {
		n += p.Count
	}
	return n
}

// load reads part i, checking it is what the list says.
func (d *dirReader) load(i int) error {
	if d.at == i {
		return nil
	}
	p := d.top.Parts[i]
	t, err := d.s.readTree(p.Digest)
	if err != nil {
		return err
	}
	if t.Parts != nil || len(t.Entries) != p.Count || t.Entries[0].Name != p.First ||
		i+1 < len(d.top.Parts) && t.Entries[len(t.Entries)-1].Name >= d.top.Parts[i+1].First {
		return fmt.Errorf("%w: tree %s is not the part its directory lists", ErrCorrupt, p.Digest)
	}
	d.at, d.cur, d.next = i, t, 0
	return nil
}

// entry returns the next entry in name order, or nil after the last.
func (d *dirReader) entry() (*Entry, error) {
	for {
		if d.cur != nil && d.next < len(d.cur.Entries) {
			d.next++
			return &d.cur.Entries[d.next-1], nil
		}
		if d.top == nil || d.top.Parts == nil || d.at+1 >= len(d.top.Parts) {
			return nil, nil
		}
		if err := d.load(d.at + 1); err != nil {
			return nil, err
		}
	}
}

// find returns the entry named name, or nil; the part it is in is kept
// loaded, so names looked up in order read each part once.
func (d *dirReader) find(name string) (*Entry, error) {
	if d == nil || d.top == nil {
		return nil, nil
	}
	if d.top.Parts == nil {
		return d.top.find(name), nil
	}
	i, ok := slices.BinarySearchFunc(d.top.Parts, name, func(p part, n string) int { return strings.Compare(p.First, n) })
	if !ok {
		i-- // the part before the first one past name
	}
	if i < 0 {
		return nil, nil
	}
	if err := d.load(i); err != nil {
		return nil, err
	}
	return d.cur.find(name), nil
}

// partsInOrder says whether t's parts are in name order and not empty.
func (t *tree) partsInOrder() bool {
	for i, p := range t.Parts {
		if p.Count <= 0 || i > 0 && t.Parts[i-1].First >= p.First {
			return false
		}
	}
	return true
}
