package review

import (
	"math/rand"
	"strings"
	"testing"
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
