package review

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// edit replaces old lines [Start, End) (0-based) with New.
type edit struct {
	Start, End int
	New        []string
}

// edits is the line-level edit script from a to b as replacements in a's
// coordinates.
func edits(a, b string) []edit {
	var out []edit
	i := 0
	var cur *edit
	for _, o := range lineOps(a, b) {
		switch o.kind {
		case ' ':
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
			i++
		case '-':
			if cur == nil {
				cur = &edit{Start: i, End: i}
			}
			i++
			cur.End = i
		case '+':
			if cur == nil {
				cur = &edit{Start: i, End: i}
			}
			cur.New = append(cur.New, o.line)
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// applyEdits applies sorted, non-overlapping edits to lines.
func applyEdits(lines []string, es []edit) (string, error) {
	var b strings.Builder
	next := 0
	for _, e := range es {
		if e.Start < next || e.End > len(lines) || e.End < e.Start {
			return "", fmt.Errorf("edits overlap or exceed the file (lines %d-%d)", e.Start+1, e.End)
		}
		for _, l := range lines[next:e.Start] {
			b.WriteString(l)
		}
		for _, l := range e.New {
			b.WriteString(l)
		}
		next = e.End
	}
	for _, l := range lines[next:] {
		b.WriteString(l)
	}
	return b.String(), nil
}

// hunkEdits converts a hunk, with pick choosing its changed lines, into
// edits without context.
func hunkEdits(h *Hunk, pick func(h *Hunk, line int) bool) []edit {
	start := h.OldStart - 1
	if h.OldLines == 0 {
		start = h.OldStart
	}
	var out []edit
	i := start
	var cur *edit
	flush := func() {
		if cur != nil && (cur.End > cur.Start || len(cur.New) > 0) {
			out = append(out, *cur)
		}
		cur = nil
	}
	for li, l := range h.Lines {
		switch l[0] {
		case ' ':
			flush()
			i++
		case '-':
			if cur == nil {
				cur = &edit{Start: i, End: i}
			}
			if pick(h, li) {
				// removed: the old line is dropped
				cur.End = i + 1
			} else {
				// kept: close the edit before it, keep the line as is
				flush()
			}
			i++
			if cur != nil {
				cur.End = i
			}
		case '+':
			if cur == nil {
				cur = &edit{Start: i, End: i}
			}
			if pick(h, li) {
				cur.New = append(cur.New, l[1:])
			}
		}
	}
	flush()
	return out
}

// Conflict is a region both the host and the session changed since the
// session started, differently.
type Conflict struct {
	ID string `json:"id"`
	// HostStart is the region's first line in the current project file
	// (1-based); HostLines its length there.
	HostStart int      `json:"host_start"`
	HostLines int      `json:"host_lines"`
	Base      []string `json:"base"`
	Host      []string `json:"host"`
	Agent     []string `json:"agent"`
}

// chunk is a piece of a three-way merge: stable (both sides agree) or a
// conflict.
type chunk struct {
	lines    []string  // the agreed lines, when conflict is nil
	conflict *Conflict // otherwise
}

// merge3 merges the changes from base to host and from base to agent.
// Regions changed by one side take that side; regions changed by both
// take the change if it is the same, and are a conflict otherwise
// (adjacent changes conflict, as in git).
func merge3(path, base, host, agent string) []chunk {
	bl := splitLines(base)
	he, ae := edits(base, host), edits(base, agent)
	type tagged struct {
		edit
		side byte // 'h' or 'a'
	}
	var all []tagged
	for _, e := range he {
		all = append(all, tagged{e, 'h'})
	}
	for _, e := range ae {
		all = append(all, tagged{e, 'a'})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Start < all[j].Start })
	var out []chunk
	pos := 0
	hostPos := 0 // line index in host of base line pos
	emit := func(lines []string) {
		if len(lines) > 0 {
			out = append(out, chunk{lines: lines})
		}
	}
	for k := 0; k < len(all); {
		lo, hi := all[k].Start, all[k].End
		group := []tagged{all[k]}
		k++
		for k < len(all) && all[k].Start <= hi {
			if all[k].End > hi {
				hi = all[k].End
			}
			group = append(group, all[k])
			k++
		}
		emit(bl[pos:lo])
		hostPos += lo - pos
		side := func(s byte) ([]string, bool) {
			var es []edit
			for _, g := range group {
				if g.side == s {
					es = append(es, edit{g.Start - lo, g.End - lo, g.New})
				}
			}
			if len(es) == 0 {
				return append([]string(nil), bl[lo:hi]...), false
			}
			text, _ := applyEdits(bl[lo:hi], es)
			return splitLines(text), true
		}
		hs, hChanged := side('h')
		as, aChanged := side('a')
		switch {
		case !aChanged || strings.Join(hs, "") == strings.Join(as, ""):
			emit(hs)
		case !hChanged:
			emit(as)
		default:
			c := &Conflict{HostStart: hostPos + 1, HostLines: len(hs), Base: bl[lo:hi], Host: hs, Agent: as}
			out = append(out, chunk{conflict: c})
		}
		hostPos += len(hs)
		pos = hi
	}
	emit(bl[pos:])
	merge3IDs(path, out)
	return out
}

// merge3IDs names each conflict from the path and its three texts, so an
// id is stable while they are.
func merge3IDs(path string, out []chunk) {
	seen := map[string]int{}
	for _, c := range out {
		if c.conflict == nil {
			continue
		}
		h := sha256.New()
		h.Write([]byte("conflict\x00" + path))
		for _, part := range [][]string{c.conflict.Base, c.conflict.Host, c.conflict.Agent} {
			h.Write([]byte{1})
			h.Write([]byte(strings.Join(part, "")))
		}
		id := "c" + hex.EncodeToString(h.Sum(nil))[:9]
		if n := seen[id]; n > 0 {
			id = fmt.Sprintf("%s.%d", id, n)
		}
		seen[id]++
		c.conflict.ID = id
	}
}

// Resolution says how to settle a conflict: take the agent's side, the
// host's side, or write git-style conflict markers (only when asked).
type Resolution string

// The resolutions.
const (
	TakeAgent   Resolution = "agent"
	TakeHost    Resolution = "host"
	TakeMarkers Resolution = "markers"
)

// render writes a merge with each conflict settled by res (nil or ""
// keeps the host's side).
func render(chunks []chunk, res func(*Conflict) Resolution) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.conflict == nil {
			for _, l := range c.lines {
				b.WriteString(l)
			}
			continue
		}
		r := TakeHost
		if res != nil {
			if x := res(c.conflict); x != "" {
				r = x
			}
		}
		switch r {
		case TakeAgent:
			writeAll(&b, c.conflict.Agent)
		case TakeMarkers:
			b.WriteString("<<<<<<< host\n")
			writeAll(&b, c.conflict.Host)
			ensureNL(&b)
			b.WriteString("||||||| base\n")
			writeAll(&b, c.conflict.Base)
			ensureNL(&b)
			b.WriteString("=======\n")
			writeAll(&b, c.conflict.Agent)
			ensureNL(&b)
			b.WriteString(">>>>>>> session\n")
		default:
			writeAll(&b, c.conflict.Host)
		}
	}
	return b.String()
}

func writeAll(b *strings.Builder, lines []string) {
	for _, l := range lines {
		b.WriteString(l)
	}
}

func ensureNL(b *strings.Builder) {
	if s := b.String(); len(s) > 0 && !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

func conflictsOf(chunks []chunk) []Conflict {
	var out []Conflict
	for _, c := range chunks {
		if c.conflict != nil {
			out = append(out, *c.conflict)
		}
	}
	return out
}
