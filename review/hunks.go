package review

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// hunkIDs gives each hunk of a file an id derived from the file's path and
// the hunk's own lines, so it stays the same while those lines do, even as
// other hunks of the file come and go. Repeats get a suffix.
//
// An id is a name for people to type (40 bits), not a digest: an agent can
// make two different hunks with the same id in about 2^20 tries, show one
// and swap in the other. So each hunk also gets a Digest, the full SHA-256
// of what accepting it writes: the path, where it applies in the project's
// file (old start and length) and every line with its prefix (docs/API.md):
//
//	"sha256:" + hex(SHA-256("airlock-hunk-v1\n" +
//	    "path " + len(path) + " " + path + "\n" +
//	    "old " + old_start + "," + old_lines + "\n" +
//	    for each line: len(line) + " " + line))
//
// Its new start is left out: it moves when the session changes lines above
// the hunk, which does not change what the hunk does.
func hunkIDs(path string, hunks []Hunk) {
	seen := map[string]int{}
	for i := range hunks {
		hunks[i].Digest = hunkDigest(path, &hunks[i])
		h := sha256.New()
		h.Write([]byte(path))
		for _, l := range hunks[i].Lines {
			h.Write([]byte{0})
			h.Write([]byte(l))
		}
		id := hex.EncodeToString(h.Sum(nil))[:10]
		if n := seen[id]; n > 0 {
			seen[id]++
			id = fmt.Sprintf("%s.%d", id, n)
		} else {
			seen[id] = 1
		}
		hunks[i].ID = id
	}
}

func hunkDigest(path string, h *Hunk) string {
	s := sha256.New()
	fmt.Fprintf(s, "airlock-hunk-v1\npath %d %s\nold %d,%d\n", len(path), path, h.OldStart, h.OldLines)
	for _, l := range h.Lines {
		fmt.Fprintf(s, "%d %s", len(l), l)
	}
	return "sha256:" + hex.EncodeToString(s.Sum(nil))
}

// applyHunks rebuilds a text from old and hunks made against it. pick
// decides, per changed line (its index in Hunk.Lines), whether the change
// is taken: a taken '-' line is removed and a taken '+' line added; a
// '-' line not taken stays, a '+' line not taken is left out.
func applyHunks(old string, hunks []Hunk, pick func(h *Hunk, line int) bool) (string, error) {
	lines := splitLines(old)
	var b strings.Builder
	b.Grow(len(old))
	next := 0
	for hi := range hunks {
		h := &hunks[hi]
		start := h.OldStart - 1
		if h.OldLines == 0 {
			start = h.OldStart
		}
		if start < next || start > len(lines) {
			return "", fmt.Errorf("hunk %s does not fit the file", h.Header())
		}
		for _, l := range lines[next:start] {
			b.WriteString(l)
		}
		i := start
		for li, l := range h.Lines {
			if l == "" {
				return "", fmt.Errorf("hunk %s has an empty line", h.Header())
			}
			switch l[0] {
			case ' ', '-':
				if i >= len(lines) || lines[i] != l[1:] {
					return "", fmt.Errorf("hunk %s does not match the file at line %d", h.Header(), i+1)
				}
				i++
				if l[0] == ' ' || !pick(h, li) {
					b.WriteString(l[1:])
				}
			case '+':
				if pick(h, li) {
					b.WriteString(l[1:])
				}
			default:
				return "", fmt.Errorf("hunk %s has a line starting with %q", h.Header(), l[0])
			}
		}
		next = i
	}
	for _, l := range lines[next:] {
		b.WriteString(l)
	}
	return b.String(), nil
}

// LineRanges parses a line selection like "2-4,7" into 1-based indexes
// into a hunk's lines.
func LineRanges(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 1 {
			return nil, fmt.Errorf("line selection %q: %q is not a line number (lines count from 1 within the hunk)", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("line selection %q: bad range %q", s, part)
			}
		}
		if b-a > 1<<20 {
			return nil, fmt.Errorf("line selection %q: range too large", s)
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}
