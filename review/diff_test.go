package review

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// apply rebuilds the new text from the old one and the hunks, as a patch
// tool would; it fails the test on any inconsistency.
func apply(t *testing.T, a string, hunks []Hunk) string {
	t.Helper()
	old := splitLines(a)
	var out []string
	next := 0 // index into old of the next line to copy
	for _, h := range hunks {
		start := h.OldStart - 1
		if h.OldLines == 0 {
			start = h.OldStart
		}
		if start < next {
			t.Fatalf("hunks overlap or go backwards: %+v", hunks)
		}
		out = append(out, old[next:start]...)
		i := start
		var nOld, nNew int
		for _, l := range h.Lines {
			switch l[0] {
			case ' ', '-':
				if i >= len(old) || old[i] != l[1:] {
					t.Fatalf("hunk %s expects %q at old line %d", h.Header(), l[1:], i+1)
				}
				i++
				nOld++
				if l[0] == ' ' {
					out = append(out, l[1:])
					nNew++
				}
			case '+':
				out = append(out, l[1:])
				nNew++
			}
		}
		if nOld != h.OldLines || nNew != h.NewLines {
			t.Fatalf("hunk %s counts %d/%d lines", h.Header(), nOld, nNew)
		}
		next = i
	}
	out = append(out, old[next:]...)
	return strings.Join(out, "")
}

func TestHunks(t *testing.T) {
	lines := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(f(i))
		}
		return b.String()
	}
	plain := lines(20, func(i int) string { return "line " + string(rune('a'+i)) + "\n" })
	for _, tc := range []struct {
		name    string
		a, b    string
		headers []string
	}{
		{"identical", plain, plain, nil},
		{"new file", "", "x\ny\n", []string{"@@ -0,0 +1,2 @@"}},
		{"deleted file", "x\ny\n", "", []string{"@@ -1,2 +0,0 @@"}},
		{"one change in the middle", plain, strings.Replace(plain, "line k\n", "line K\n", 1), []string{"@@ -7,7 +7,7 @@"}},
		{"two distant changes are two hunks", plain,
			strings.Replace(strings.Replace(plain, "line b\n", "B\n", 1), "line t\n", "T\n", 1),
			[]string{"@@ -1,4 +1,4 @@", "@@ -16,5 +16,5 @@"}},
		{"close changes merge", plain,
			strings.Replace(strings.Replace(plain, "line e\n", "E\n", 1), "line k\n", "K\n", 1),
			[]string{"@@ -1,13 +1,13 @@"}},
		{"missing final newline", "a\nb", "a\nb\n", []string{"@@ -1,2 +1,2 @@"}},
		{"append", "a\n", "a\nb\n", []string{"@@ -1 +1,2 @@"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := Hunks(tc.a, tc.b)
			var headers []string
			for _, h := range hs {
				headers = append(headers, h.Header())
			}
			if strings.Join(headers, "|") != strings.Join(tc.headers, "|") {
				t.Errorf("headers %v, want %v", headers, tc.headers)
			}
			if got := apply(t, tc.a, hs); got != tc.b {
				t.Errorf("applying the hunks gives %q, want %q", got, tc.b)
			}
		})
	}
}

// TestHunksRebuildRandomEdits checks on random edit scripts that the hunks
// always turn the old text into the new one.
func TestHunksRebuildRandomEdits(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	words := []string{"a\n", "b\n", "c\n", "d\n", "{\n", "}\n", "\n", "x"}
	gen := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			w := words[rng.Intn(len(words)-1)]
			b.WriteString(w)
		}
		if rng.Intn(4) == 0 {
			b.WriteString("tail") // no final newline
		}
		return b.String()
	}
	for i := 0; i < 500; i++ {
		a := gen(rng.Intn(40))
		b := a
		for k := rng.Intn(5); k >= 0; k-- {
			pos := 0
			if len(b) > 0 {
				pos = strings.LastIndex(b[:rng.Intn(len(b)+1)], "\n") + 1
			}
			b = b[:pos] + gen(rng.Intn(4)) + b[pos:]
			if rng.Intn(2) == 0 && len(b) > 0 {
				cut := strings.Index(b[pos:], "\n")
				if cut >= 0 {
					b = b[:pos] + b[pos+cut+1:]
				}
			}
		}
		if got := apply(t, a, Hunks(a, b)); got != b {
			t.Fatalf("case %d: %q -> %q rebuilt as %q", i, a, b, got)
		}
	}
}

// lcs is the length of a longest common subsequence of a and b, by the
// textbook table: the ground truth for the shortest edit script.
func lcs(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// The script is a shortest one (as many unchanged lines as the longest
// common subsequence) and turns a into b.
func TestLineOpsShortest(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 2000; i++ {
		n, m := rng.Intn(60), rng.Intn(60)
		alpha := 1 + rng.Intn(12)
		gen := func(n int) string {
			var b strings.Builder
			for k := 0; k < n; k++ {
				b.WriteString(string(rune('a'+rng.Intn(alpha))) + "\n")
			}
			return b.String()
		}
		a, b := gen(n), gen(m)
		ops := lineOps(a, b)
		same := 0
		var rebuilt strings.Builder
		for _, o := range ops {
			if o.kind == ' ' {
				same++
			}
			if o.kind != '-' {
				rebuilt.WriteString(o.line)
			}
		}
		if want := lcs(splitLines(a), splitLines(b)); same != want {
			t.Fatalf("case %d: %d unchanged lines, the longest common subsequence has %d\n%q\n%q", i, same, want, a, b)
		}
		if rebuilt.String() != b {
			t.Fatalf("case %d: the script does not rebuild b", i)
		}
	}
}

// More distinct lines than there are runes (go-diff's line mode mapped
// each line to a rune, and past about 1.1 million the diff came out
// wrong without a word).
func TestLineOpsManyDistinctLines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two 1.3-million-line texts")
	}
	const n = 1_300_000
	var a, b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&a, "%x\n", i)
		switch {
		case i == 5 || i == n-7 || i == 1_200_000:
			fmt.Fprintf(&b, "changed %x\n", i)
		case i == 700_000:
			// deleted
		default:
			fmt.Fprintf(&b, "%x\n", i)
		}
	}
	hs := Hunks(a.String(), b.String())
	if got := apply(t, a.String(), hs); got != b.String() {
		t.Fatalf("the hunks do not rebuild the new text")
	}
	var minus, plus int
	for _, h := range hs {
		for _, l := range h.Lines {
			switch l[0] {
			case '-':
				minus++
			case '+':
				plus++
			}
		}
	}
	if len(hs) != 4 || minus != 4 || plus != 3 {
		t.Errorf("%d hunks, -%d +%d; want 4 hunks, -4 +3", len(hs), minus, plus)
	}
}

// A text made to be slow to diff (every line moved) is diffed in bounded
// time, correctly if not minimally, and the same way every time.
func TestLineOpsBoundedWork(t *testing.T) {
	const n = 200_000
	var a, b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&a, "%d\n", i)
		fmt.Fprintf(&b, "%d\n", (i*7919)%n) // a permutation
	}
	t0 := time.Now()
	hs := Hunks(a.String(), b.String())
	took := time.Since(t0)
	if got := apply(t, a.String(), hs); got != b.String() {
		t.Fatalf("the hunks do not rebuild the new text")
	}
	if took > 20*time.Second {
		t.Errorf("a 200,000-line permutation took %v to diff", took)
	}
	again := Hunks(a.String(), b.String())
	if len(again) != len(hs) || len(hs) > 0 && again[0].Header() != hs[0].Header() {
		t.Errorf("two diffs of the same texts differ")
	}
	t.Logf("%v, %d hunks", took, len(hs))
}
