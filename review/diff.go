package review

import (
	"slices"
	"strconv"
	"strings"
)

// Context is the number of unchanged lines around each hunk.
const Context = 3

// Hunk is one contiguous region of a text diff.
type Hunk struct {
	// ID names the hunk for per-hunk accept and discard; see hunkIDs.
	ID       string `json:"id"`
	OldStart int    `json:"old_start"`
	OldLines int    `json:"old_lines"`
	NewStart int    `json:"new_start"`
	NewLines int    `json:"new_lines"`
	// Lines are prefixed with ' ', '-' or '+' and keep their newline; a line
	// without one is the file's last and has no newline at end of file.
	Lines []string `json:"lines"`
	// Digest pins the hunk for an accept: its path, its place in the
	// project's file and its lines, in full (ID is a short name for people,
	// not a digest); see hunkIDs.
	Digest string `json:"digest,omitempty"`
}

type op struct {
	kind byte // ' ', '-', '+'
	line string
}

// splitLines splits s after each '\n'; the last line may lack one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineOps is a line-level edit script from a to b: a shortest one (Myers'
// algorithm, the one git and go-diff use) unless finding it costs too much,
// then a longer but always correct one. Lines are compared as integer ids,
// so the number of distinct lines is not limited (encoding lines as runes,
// as go-diff's line mode does, breaks past 1.1 million distinct lines).
func lineOps(a, b string) []op {
	la, lb := splitLines(a), splitLines(b)
	if len(la) == 0 || len(lb) == 0 || a == b {
		// All added, all deleted or none changed: nothing to search.
		ops := make([]op, 0, len(la)+len(lb))
		k := byte('-')
		if a == b {
			k = ' '
		}
		for _, l := range la {
			ops = append(ops, op{k, l})
		}
		if a != b {
			for _, l := range lb {
				ops = append(ops, op{'+', l})
			}
		}
		return ops
	}
	ids := make(map[string]int32, len(la)/2)
	idsOf := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	ia, ib := idsOf(la), idsOf(lb)
	ids = nil
	script := diffIDs(ia, ib, diffBudget(len(ia)+len(ib)))
	ops := make([]op, 0, len(script))
	for _, s := range script {
		switch s.kind {
		case '+':
			ops = append(ops, op{'+', lb[s.b]})
		default:
			ops = append(ops, op{s.kind, la[s.a]})
		}
	}
	return ops
}

// diffBudget is how many steps the search for a shortest script may take
// for n lines: enough for any ordinary change, and bounded, so that a file
// made to be slow to diff (every line moved) costs a fraction of a second.
func diffBudget(n int) int { return min(1<<26, 1<<20+64*n) }

// step is one line of an edit script: kind ' ' (a[a] equals b[b]), '-'
// (a[a] deleted) or '+' (b[b] inserted).
type step struct {
	kind byte
	a, b int
}

// diffIDs is the edit script from a to b. Lines that occur only on one side
// are always edits, so they are set aside first (as git's xdiff does): the
// search then runs over the lines the two sides share, which for most
// changes is a search over nothing.
func diffIDs(a, b []int32, budget int) []step {
	inA := make(map[int32]bool, len(a))
	for _, id := range a {
		inA[id] = true
	}
	inB := make(map[int32]bool, len(b))
	for _, id := range b {
		inB[id] = true
	}
	var ka, kb []int // kept lines' indexes in a and b
	var ra, rb []int32
	for i, id := range a {
		if inB[id] {
			ka, ra = append(ka, i), append(ra, id)
		}
	}
	for i, id := range b {
		if inA[id] {
			kb, rb = append(kb, i), append(rb, id)
		}
	}
	d := &myers{a: ra, b: rb, budget: budget}
	d.compare(0, len(ra), 0, len(rb))
	// Put the set-aside lines back where they were.
	out := make([]step, 0, len(a)+len(b))
	i, j := 0, 0
	for _, s := range d.script {
		switch s.kind {
		case ' ':
			oa, ob := ka[s.a], kb[s.b]
			for ; i < oa; i++ {
				out = append(out, step{'-', i, j})
			}
			for ; j < ob; j++ {
				out = append(out, step{'+', i, j})
			}
			out = append(out, step{' ', i, j})
			i, j = i+1, j+1
		case '-':
			for oa := ka[s.a]; i <= oa; i++ {
				out = append(out, step{'-', i, j})
			}
		case '+':
			for ob := kb[s.b]; j <= ob; j++ {
				out = append(out, step{'+', i, j})
			}
		}
	}
	for ; i < len(a); i++ {
		out = append(out, step{'-', i, j})
	}
	for ; j < len(b); j++ {
		out = append(out, step{'+', i, j})
	}
	// Deletions before insertions between two unchanged lines, as diff
	// tools print them.
	for s := 0; s < len(out); {
		if out[s].kind == ' ' {
			s++
			continue
		}
		e := s
		for e < len(out) && out[e].kind != ' ' {
			e++
		}
		slices.SortStableFunc(out[s:e], func(x, y step) int { return int(y.kind) - int(x.kind) }) // '-' (45) before '+' (43)
		s = e
	}
	return out
}

// myers finds a shortest edit script by Myers' linear-space algorithm: find
// the middle snake of the path, recurse on both halves. Its cost is bounded
// twice: a search that goes beyond maxD edits splits at the furthest point
// it reached (a good path, not always the shortest), and once the budget is
// spent, what is left is deleted and inserted whole. Both are
// deterministic: the same texts always give the same script.
type myers struct {
	a, b   []int32
	budget int
	script []step
	v1, v2 []int
}

func (d *myers) emit(kind byte, a, b int) { d.script = append(d.script, step{kind, a, b}) }

func (d *myers) compare(alo, ahi, blo, bhi int) {
	for alo < ahi && blo < bhi && d.a[alo] == d.b[blo] {
		d.emit(' ', alo, blo)
		alo, blo = alo+1, blo+1
	}
	ea, eb := ahi, bhi
	for ea > alo && eb > blo && d.a[ea-1] == d.b[eb-1] {
		ea, eb = ea-1, eb-1
	}
	switch {
	case alo == ea:
		for j := blo; j < eb; j++ {
			d.emit('+', alo, j)
		}
	case blo == eb:
		for i := alo; i < ea; i++ {
			d.emit('-', i, blo)
		}
	default:
		x, y, ok := d.split(alo, ea, blo, eb)
		if !ok {
			for i := alo; i < ea; i++ {
				d.emit('-', i, blo)
			}
			for j := blo; j < eb; j++ {
				d.emit('+', ea, j)
			}
		} else {
			d.compare(alo, x, blo, y)
			d.compare(x, ea, y, eb)
		}
	}
	for i, j := ea, eb; i < ahi; i, j = i+1, j+1 {
		d.emit(' ', i, j)
	}
}

// maxD is the furthest a single search goes before it settles for the
// furthest point it reached.
const maxD = 1 << 11

// split returns a point (x, y) on an edit path through a[alo:ahi] and
// b[blo:bhi], strictly inside it; ok is false when the budget is spent.
// The ranges differ at both ends.
func (d *myers) split(alo, ahi, blo, bhi int) (x, y int, ok bool) {
	a, b := d.a[alo:ahi], d.b[blo:bhi]
	n, m := len(a), len(b)
	dmax := min((n+m+1)/2, maxD)
	off := dmax + 1
	size := 2*dmax + 3
	if cap(d.v1) < size {
		d.v1, d.v2 = make([]int, size), make([]int, size)
	}
	v1, v2 := d.v1[:size], d.v2[:size]
	for i := range v1 {
		v1[i], v2[i] = -1, -1
	}
	v1[off+1], v2[off+1] = 0, 0
	delta := n - m
	front := delta%2 != 0
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	for D := 0; D < dmax; D++ {
		if d.budget -= 2*D + 2; d.budget < 0 {
			return 0, 0, false
		}
		for k1 := -D + k1start; k1 <= D-k1end; k1 += 2 {
			k1o := off + k1
			var x1 int
			if k1 == -D || k1 != D && v1[k1o-1] < v1[k1o+1] {
				x1 = v1[k1o+1]
			} else {
				x1 = v1[k1o-1] + 1
			}
			y1 := x1 - k1
			s := x1
			for x1 < n && y1 < m && a[x1] == b[y1] {
				x1, y1 = x1+1, y1+1
			}
			d.budget -= x1 - s
			v1[k1o] = x1
			switch {
			case x1 > n:
				k1end += 2
			case y1 > m:
				k1start += 2
			case front:
				if k2o := off + delta - k1; k2o >= 0 && k2o < size && v2[k2o] != -1 && x1 >= n-v2[k2o] {
					return alo + x1, blo + y1, true
				}
			}
		}
		for k2 := -D + k2start; k2 <= D-k2end; k2 += 2 {
			k2o := off + k2
			var x2 int
			if k2 == -D || k2 != D && v2[k2o-1] < v2[k2o+1] {
				x2 = v2[k2o+1]
			} else {
				x2 = v2[k2o-1] + 1
			}
			y2 := x2 - k2
			s := x2
			for x2 < n && y2 < m && a[n-x2-1] == b[m-y2-1] {
				x2, y2 = x2+1, y2+1
			}
			d.budget -= x2 - s
			v2[k2o] = x2
			switch {
			case x2 > n:
				k2end += 2
			case y2 > m:
				k2start += 2
			case !front:
				if k1o := off + delta - k2; k1o >= 0 && k1o < size && v1[k1o] != -1 {
					x1 := v1[k1o]
					y1 := x1 - (k1o - off)
					if x1 >= n-x2 {
						return alo + x1, blo + y1, true
					}
				}
			}
		}
	}
	// Too many edits for an exact search: split at the furthest point the
	// forward search reached (xdiff does much the same).
	best, bx, by := -1, 0, 0
	for k := -dmax; k <= dmax; k++ {
		x := v1[off+k]
		y := x - k
		if x < 0 || x > n || y < 0 || y > m || x+y <= best || x == n && y == m {
			continue
		}
		best, bx, by = x+y, x, y
	}
	if best <= 0 {
		return 0, 0, false
	}
	return alo + bx, blo + by, true
}

// Hunks is the unified diff of a to b with Context lines of context.
func Hunks(a, b string) []Hunk {
	if a == b {
		return nil
	}
	ops := lineOps(a, b)
	var hunks []Hunk
	oldLine, newLine := 1, 1 // line numbers of ops[i] in a and b
	i := 0
	for i < len(ops) {
		if ops[i].kind == ' ' {
			oldLine++
			newLine++
			i++
			continue
		}
		// A change at i: open a hunk with up to Context lines before it.
		start := i
		for start > 0 && i-start < Context && ops[start-1].kind == ' ' {
			start--
		}
		h := Hunk{OldStart: oldLine - (i - start), NewStart: newLine - (i - start)}
		j := start
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// Count the run of context; a run longer than 2*Context closes the hunk.
			run := 0
			for end+run < len(ops) && ops[end+run].kind == ' ' {
				run++
			}
			if end+run == len(ops) || run > 2*Context {
				end += min(run, Context)
				break
			}
			end += run
		}
		for ; j < end; j++ {
			o := ops[j]
			h.Lines = append(h.Lines, string(o.kind)+o.line)
			if o.kind != '+' {
				h.OldLines++
			}
			if o.kind != '-' {
				h.NewLines++
			}
		}
		// Advance the counters over the ops consumed after i.
		for k := i; k < end; k++ {
			if ops[k].kind != '+' {
				oldLine++
			}
			if ops[k].kind != '-' {
				newLine++
			}
		}
		i = end
		hunks = append(hunks, h)
	}
	for k := range hunks {
		// Unified diff convention: an empty side names the line before it.
		if hunks[k].OldLines == 0 {
			hunks[k].OldStart--
		}
		if hunks[k].NewLines == 0 {
			hunks[k].NewStart--
		}
	}
	return hunks
}

// Header is the hunk's "@@ -a,b +c,d @@" line without a newline.
func (h Hunk) Header() string {
	return "@@ -" + rangeStr(h.OldStart, h.OldLines) + " +" + rangeStr(h.NewStart, h.NewLines) + " @@"
}

func rangeStr(start, n int) string {
	if n == 1 {
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(n)
}
