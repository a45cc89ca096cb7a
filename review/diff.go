package review

import (
	"strconv"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
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

// lineOps is a line-level edit script from a to b, computed with
// go-diff's Myers implementation over lines encoded as runes.
func lineOps(a, b string) []op {
	la, lb := splitLines(a), splitLines(b)
	index := map[string]rune{}
	var table []string
	enc := func(lines []string) []rune {
		rs := make([]rune, len(lines))
		for i, l := range lines {
			r, ok := index[l]
			if !ok {
				// Skip the surrogate range, which cannot be a rune.
				n := len(table)
				if n >= 0xD800 {
					n += 0x800
				}
				r = rune(n)
				index[l] = r
				table = append(table, l)
			}
			rs[i] = r
		}
		return rs
	}
	ra, rb := enc(la), enc(lb)
	dec := func(r rune) string {
		n := int(r)
		if n >= 0xE000 {
			n -= 0x800
		}
		return table[n]
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0 // exact: a review must not show a sloppy diff
	var ops []op
	for _, d := range dmp.DiffMainRunes(ra, rb, false) {
		k := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			k = '-'
		case diffmatchpatch.DiffInsert:
			k = '+'
		}
		for _, r := range d.Text {
			ops = append(ops, op{k, dec(r)})
		}
	}
	return ops
}

// Hunks is the unified diff of a to b with Context lines of context.
func Hunks(a, b string) []Hunk {
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
