package review

import (
	"context"
	"crypto/sha256"
	"hash/maphash"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"

	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
)

// Rename detection limits: only files up to renameMaxSize are compared,
// at most renameMaxGone deleted files are candidates, at most
// renameMaxPairs similarity comparisons are made, and they compare at most
// renameMaxWork lines in all, so that what a session deletes and adds
// bounds neither a review's time nor its memory. A candidate keeps its
// digest and one hash per line, never its content.
const (
	renameMaxSize  = 1 << 20
	renameMaxGone  = 5000
	renameMaxPairs = 10000
	renameMaxWork  = 1 << 26
	// renameMaxLines bounds the line hashes kept over all candidates.
	renameMaxLines = 1 << 22
	// renameMinSimilarity is git's default: half the lines in common.
	renameMinSimilarity = 50
)

type renameSide struct {
	path   string
	mode   fs.FileMode
	size   int64
	idx    int // index in changes; -1 for a file inside a deleted directory
	read   bool
	sum    [32]byte
	binary bool
	lines  []uint64 // sorted line hashes (nil: not compared by lines)
	nlines int
}

// detectRenames pairs deletions with additions of the same or nearly the
// same content and turns each pair into one Renamed change. A file inside
// a deleted directory can be a rename's source too (a moved directory).
// Paths the host changed since the session started are never paired: a
// rename must not carry the host's edits away silently.
func detectRenames(ctx context.Context, l Layers, r *roots, changes []listed) ([]listed, error) {
	if !slices.ContainsFunc(changes, func(it listed) bool { return it.kind() == Deleted }) {
		return changes, nil // nothing can have been renamed
	}
	gone, added := renameSides(l, r, changes)
	if len(gone) == 0 || len(added) == 0 {
		return changes, nil
	}
	m := &renameMatch{gone: gone, added: added, usedG: map[int]bool{}, usedA: map[int]bool{},
		seed: maphash.MakeSeed(), lineBudget: renameMaxLines, buf: make([]byte, renameMaxSize)}
	if err := m.exact(ctx, r); err != nil {
		return nil, err
	}
	m.similar()
	if len(m.pairs) == 0 {
		return changes, nil
	}
	return m.apply(changes), nil
}

// renameSides lists the deletions (and the files of deleted directories)
// that can be a rename's source, and the additions that can be its
// target, within the size and count bounds; a source the host changed
// since the session started is left out.
func renameSides(l Layers, r *roots, changes []listed) (gone, added []renameSide) {
	for i := range changes {
		it := &changes[i]
		switch kind := it.kind(); {
		case kind == Deleted && it.oldType() == File && it.oldSize() <= renameMaxSize && len(gone) < renameMaxGone:
			gone = append(gone, renameSide{path: it.path, mode: it.full.OldMode, size: it.oldSize(), idx: i})
		case kind == Deleted && it.oldType() == Dir && r.project != nil:
			root := filepath.Join(l.Project, filepath.FromSlash(it.full.Path))
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || len(gone) >= renameMaxGone {
					return filepath.SkipAll
				}
				if !d.Type().IsRegular() {
					return nil
				}
				fi, err := d.Info()
				if err != nil || fi.Size() > renameMaxSize {
					return nil
				}
				rel, _ := filepath.Rel(l.Project, p)
				gone = append(gone, renameSide{path: filepath.ToSlash(rel), mode: fi.Mode(), size: fi.Size(), idx: -1})
				return nil
			})
		case kind == Added && it.newType() == File && it.newSize() <= renameMaxSize:
			added = append(added, renameSide{path: it.path, mode: it.newMode(), size: it.newSize(), idx: i})
		}
	}
	usable := gone[:0]
	for _, g := range gone {
		hfi, _ := statAt(r.hostFd(), g.path)
		if changed, err := l.Base.HostChanged(g.path, hfi); err == nil && !changed {
			usable = append(usable, g)
		}
	}
	return usable, added
}

// renameMatch pairs sources with targets: exact matches first, then
// similar content, best first, within the line, pair and work budgets.
type renameMatch struct {
	gone, added  []renameSide
	pairs        []renamePair
	usedG, usedA map[int]bool
	seed         maphash.Seed
	lineBudget   int
	buf          []byte // one file's content at a time
}

type renamePair struct {
	g, a int
	sim  int
}

// load reads s beneath root once, keeping its digest and line hashes
// (never its content); it reports whether s can be compared.
func (m *renameMatch) load(root *confined.Root, s *renameSide) bool {
	if s.read {
		return s.nlines >= 0
	}
	s.read, s.nlines = true, -1
	if root == nil {
		return false
	}
	fd, st, err := root.OpenFd(s.path)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if st.Size > renameMaxSize {
		return false
	}
	n, err := preadFull(fd, m.buf[:st.Size], 0)
	if err != nil || int64(n) != st.Size {
		return false
	}
	data := m.buf[:n]
	s.sum, s.binary, s.size = sha256.Sum256(data), isBinary(data), int64(n)
	s.nlines = 0
	if !s.binary {
		s.lines = lineHashes(m.seed, data)
		s.nlines = len(s.lines)
		if m.lineBudget -= len(s.lines); m.lineBudget < 0 {
			s.lines = nil // kept for exact matches only
		}
	}
	return true
}

// exact pairs sources and targets of the same size and digest.
func (m *renameMatch) exact(ctx context.Context, r *roots) error {
	bySum := map[[32]byte][]int{}
	for gi := range m.gone {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if m.load(r.project, &m.gone[gi]) {
			bySum[m.gone[gi].sum] = append(bySum[m.gone[gi].sum], gi)
		}
	}
	for ai := range m.added {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !m.load(r.upper, &m.added[ai]) {
			continue
		}
		for _, gi := range bySum[m.added[ai].sum] {
			if !m.usedG[gi] && m.gone[gi].size == m.added[ai].size {
				m.pairs = append(m.pairs, renamePair{gi, ai, 100})
				m.usedG[gi], m.usedA[ai] = true, true
				break
			}
		}
	}
	return nil
}

// similar pairs what is left by line similarity, best first, until the
// pair or work budget runs out.
func (m *renameMatch) similar() {
	var cands []renamePair
	budget, work := renameMaxPairs, renameMaxWork
	for ai := range m.added {
		a := &m.added[ai]
		if m.usedA[ai] || a.lines == nil {
			continue
		}
		for gi := range m.gone {
			g := &m.gone[gi]
			if m.usedG[gi] || g.lines == nil {
				continue
			}
			// Sizes too far apart cannot reach the threshold.
			small, big := min(g.size, a.size), max(g.size, a.size)
			if big > 0 && small*100/big < renameMinSimilarity {
				continue
			}
			if budget--; budget < 0 {
				break
			}
			if work -= len(g.lines) + len(a.lines); work < 0 {
				break
			}
			if sim := similarity(g.lines, a.lines); sim >= renameMinSimilarity {
				cands = append(cands, renamePair{gi, ai, sim})
			}
		}
		if budget < 0 || work < 0 {
			break
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].sim > cands[j].sim })
	for _, p := range cands {
		if !m.usedG[p.g] && !m.usedA[p.a] {
			m.pairs = append(m.pairs, p)
			m.usedG[p.g], m.usedA[p.a] = true, true
		}
	}
}

// apply turns each pair into one Renamed change in place of its addition
// and deletion, and returns the changes in path order.
func (m *renameMatch) apply(changes []listed) []listed {
	drop := map[int]bool{}
	var renames []listed
	for _, p := range m.pairs {
		g, a := m.gone[p.g], m.added[p.a]
		c := changes[a.idx].change()
		c.Kind, c.From, c.Similarity = Renamed, g.path, p.sim
		c.OldType, c.OldMode, c.OldSize = File, g.mode, g.size
		c.Binary = c.Binary || g.binary
		renames = append(renames, listed{path: c.Path, full: &c})
		drop[a.idx] = true
		if g.idx >= 0 {
			drop[g.idx] = true
		}
	}
	out := make([]listed, 0, len(changes))
	for i := range changes {
		if !drop[i] {
			out = append(out, changes[i])
		}
	}
	out = append(out, renames...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// lineHashes is a text's lines as sorted hashes.
func lineHashes(seed maphash.Seed, data []byte) []uint64 {
	var out []uint64
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] != '\n' {
			i++
		}
		if i < len(data) {
			i++
		}
		out = append(out, maphash.Bytes(seed, data[:i]))
		data = data[i:]
	}
	slices.Sort(out)
	return out
}

// similarity is the percentage of lines two texts share, as git estimates
// it: twice the lines in common (as multisets, order aside) over the lines
// of both. Different contents are never 100% similar: a 100% rename is a
// pure move.
func similarity(a, b []uint64) int {
	if len(a)+len(b) == 0 {
		return 99
	}
	common := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			common++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return min(99, 200*common/(len(a)+len(b)))
}
