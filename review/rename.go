package review

import (
	"bytes"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Rename detection limits: only files up to renameMaxSize are compared,
// and at most renameMaxPairs content comparisons are made per review.
const (
	renameMaxSize  = 1 << 20
	renameMaxPairs = 10000
	// renameMinSimilarity is git's default: half the lines in common.
	renameMinSimilarity = 50
)

type renameSide struct {
	path string
	mode fs.FileMode
	size int64
	data []byte
	idx  int // index in changes; -1 for a file inside a deleted directory
}

// detectRenames pairs deletions with additions of the same or nearly the
// same content and turns each pair into one Renamed change. A file inside
// a deleted directory can be a rename's source too (a moved directory).
// Paths the host changed since the session started are never paired: a
// rename must not carry the host's edits away silently.
func detectRenames(l Layers, changes []Change) ([]Change, error) {
	var gone, added []renameSide
	for i, c := range changes {
		switch {
		case c.Kind == Deleted && c.OldType == File && c.OldSize <= renameMaxSize:
			gone = append(gone, renameSide{path: c.Path, mode: c.OldMode, size: c.OldSize, idx: i})
		case c.Kind == Deleted && c.OldType == Dir:
			root := filepath.Join(l.Project, filepath.FromSlash(c.Path))
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() || len(gone) > 5000 {
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
		case c.Kind == Added && c.Type == File && c.Size <= renameMaxSize:
			added = append(added, renameSide{path: c.Path, mode: c.Mode, size: c.Size, idx: i})
		}
	}
	if len(gone) == 0 || len(added) == 0 {
		return changes, nil
	}
	load := func(root string, s *renameSide) bool {
		if s.data == nil {
			b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(s.path)))
			if err != nil {
				return false
			}
			s.data = b
		}
		return true
	}
	usable := gone[:0]
	for _, g := range gone {
		if changed, err := l.Base.HostChanged(g.path, statOrNil(filepath.Join(l.Project, filepath.FromSlash(g.path)))); err == nil && !changed {
			usable = append(usable, g)
		}
	}
	gone = usable
	type pair struct {
		g, a int
		sim  int
	}
	var pairs []pair
	// Exact matches first, by size and hash.
	bySum := map[[32]byte][]int{}
	for gi := range gone {
		if load(l.Project, &gone[gi]) {
			bySum[sha256.Sum256(gone[gi].data)] = append(bySum[sha256.Sum256(gone[gi].data)], gi)
		}
	}
	usedG, usedA := map[int]bool{}, map[int]bool{}
	for ai := range added {
		if !load(l.Upper, &added[ai]) {
			continue
		}
		for _, gi := range bySum[sha256.Sum256(added[ai].data)] {
			if !usedG[gi] {
				pairs = append(pairs, pair{gi, ai, 100})
				usedG[gi], usedA[ai] = true, true
				break
			}
		}
	}
	// Then similar content, best first.
	var cands []pair
	budget := renameMaxPairs
	for ai := range added {
		if usedA[ai] || added[ai].data == nil || isBinary(added[ai].data) {
			continue
		}
		for gi := range gone {
			if usedG[gi] || gone[gi].data == nil || isBinary(gone[gi].data) {
				continue
			}
			if budget--; budget < 0 {
				break
			}
			// Sizes too far apart cannot reach the threshold.
			small, big := min(gone[gi].size, added[ai].size), max(gone[gi].size, added[ai].size)
			if big > 0 && small*100/big < renameMinSimilarity {
				continue
			}
			if sim := similarity(gone[gi].data, added[ai].data); sim >= renameMinSimilarity {
				cands = append(cands, pair{gi, ai, sim})
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].sim > cands[j].sim })
	for _, p := range cands {
		if !usedG[p.g] && !usedA[p.a] {
			pairs = append(pairs, p)
			usedG[p.g], usedA[p.a] = true, true
		}
	}
	if len(pairs) == 0 {
		return changes, nil
	}
	drop := map[int]bool{}
	var renames []Change
	for _, p := range pairs {
		g, a := gone[p.g], added[p.a]
		c := changes[a.idx]
		c.Kind, c.From, c.Similarity = Renamed, g.path, p.sim
		c.OldType, c.OldMode, c.OldSize = File, g.mode, g.size
		c.Binary = c.Binary || isBinary(g.data)
		c.setID()
		renames = append(renames, c)
		drop[a.idx] = true
		if g.idx >= 0 {
			drop[g.idx] = true
		}
	}
	out := make([]Change, 0, len(changes))
	for i, c := range changes {
		if !drop[i] {
			out = append(out, c)
		}
	}
	out = append(out, renames...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func statOrNil(p string) fs.FileInfo {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil
	}
	return fi
}

// similarity is the percentage of lines two texts share, as git counts it
// roughly: twice the common lines over the lines of both.
func similarity(a, b []byte) int {
	if bytes.Equal(a, b) {
		return 100
	}
	la, lb := splitLines(string(a)), splitLines(string(b))
	if len(la)+len(lb) == 0 {
		return 100
	}
	common := 0
	for _, o := range lineOps(string(a), string(b)) {
		if o.kind == ' ' {
			common++
		}
	}
	return 200 * common / (len(la) + len(lb))
}
