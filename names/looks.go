package names

import (
	"hash/maphash"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Display is roughly what name looks like where it is shown as it is:
// invisible and bidirectional characters vanish, and what follows a
// right-to-left override reads backwards up to the end of the override
// (uni\u202egnp.exe displays as uniexe.png). Controls and invalid bytes
// are left: what they do depends on the terminal.
func Display(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		k := classify(name, i, r, size)
		i += size
		switch {
		case r == 0x202e:
			end := len(name)
			if j := strings.IndexAny(name[i:], "\u202c\u2069"); j >= 0 {
				end = i + j
			}
			run := []rune(Display(name[i:end]))
			slices.Reverse(run)
			b.WriteString(string(run))
			i = end
		case k == Invisible && unicode.Is(unicode.Zs, r):
			b.WriteByte(' ')
		case k == Bidi || k == Invisible:
		default:
			b.WriteString(name[i-size : i])
		}
	}
	return b.String()
}

// How is the way two different names look alike.
type How string

const (
	Normalisation How = "normalisation" // the same text, composed differently (NFC and NFD)
	Hidden        How = "invisible"     // the same once invisible characters are dropped
	Case          How = "case"          // the same but for case
	Confusable    How = "confusable"    // look-alike letters of another script, or fullwidth forms
)

// key is what a name looks like, for finding look-alikes: invisible
// characters dropped, compatibility forms (fullwidth, mathematical
// letters) folded, look-alike letters mapped to the Latin one, case folded.
func key(name string) string {
	s := norm.NFKC.String(strip(name))
	s = strings.Map(func(r rune) rune {
		if l, ok := lookalike[r]; ok {
			return l
		}
		return r
	}, s)
	return norm.NFC.String(cases.Fold().String(s))
}

// strip drops the characters Display drops (a look-alike space becomes
// a space), without reordering.
func strip(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		switch k := classify(name, i, r, size); {
		case k == Invisible && unicode.Is(unicode.Zs, r):
			b.WriteByte(' ')
		case k != Bidi && k != Invisible:
			b.WriteString(name[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Explain says why a and b (different names that look alike) do.
func Explain(a, b string) How {
	switch {
	case norm.NFC.String(a) == norm.NFC.String(b):
		return Normalisation
	case norm.NFC.String(strip(a)) == norm.NFC.String(strip(b)):
		return Hidden
	case cases.Fold().String(norm.NFC.String(strip(a))) == cases.Fold().String(norm.NFC.String(strip(b))):
		return Case
	}
	return Confusable
}

// Index finds, among the names added to it, those that look like a given
// name. It keeps the names and a hash of what each looks like, not the
// look itself: a directory of 200,000 names costs about 6 MB. Not
// safe for concurrent use.
type Index struct {
	seed  maphash.Seed
	first map[uint64]string   // the first name added with a hash
	more  map[uint64][]string // the others, rare
}

// NewIndex returns an empty index with room for about n names.
func NewIndex(n int) *Index {
	return &Index{seed: maphash.MakeSeed(), first: make(map[uint64]string, n), more: map[uint64][]string{}}
}

// hashKey hashes key(name), without making it for a plain ASCII name.
func (x *Index) hashKey(name string) uint64 {
	if !ascii(name) {
		return maphash.String(x.seed, key(name))
	}
	upper := false
	for i := 0; i < len(name) && !upper; i++ {
		upper = 'A' <= name[i] && name[i] <= 'Z'
	}
	if !upper {
		return maphash.String(x.seed, name)
	}
	var buf [256]byte
	lower := append(buf[:0], name...)
	for i, c := range lower {
		if 'A' <= c && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	return maphash.Bytes(x.seed, lower)
}

// ascii reports whether name is printable ASCII, which key only lowercases.
func ascii(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] >= 0x7f {
			return false
		}
	}
	return true
}

// Add adds name (adding one twice keeps one).
func (x *Index) Add(name string) {
	h := x.hashKey(name)
	switch f, ok := x.first[h]; {
	case !ok:
		x.first[h] = name
	case f != name && !slices.Contains(x.more[h], name):
		x.more[h] = append(x.more[h], name)
	}
}

// All returns the names of the index other than name that look like it,
// in byte order.
func (x *Index) All(name string) []string {
	h := x.hashKey(name)
	f, ok := x.first[h]
	more := x.more[h]
	if !ok || f == name && len(more) == 0 {
		return nil
	}
	k := key(name)
	var out []string
	for i := -1; i < len(more); i++ {
		n := f
		if i >= 0 {
			n = more[i]
		}
		if n != name && key(n) == k {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Like returns the least name of the index other than name that looks
// like it, and how.
func (x *Index) Like(name string) (other string, h How, ok bool) {
	all := x.All(name)
	if len(all) == 0 {
		return "", "", false
	}
	return all[0], Explain(name, all[0]), true
}

// Collision is a name that looks like another of the same set.
type Collision struct {
	Name  string `json:"name"`
	Other string `json:"other"`
	How   How    `json:"how"`
}

// Collisions lists, in byte order, every name of the set that looks like
// another one, each with the least such other.
func Collisions(set []string) []Collision {
	x := NewIndex(len(set))
	for _, n := range set {
		x.Add(n)
	}
	var out []Collision
	for _, n := range set {
		if o, h, ok := x.Like(n); ok {
			out = append(out, Collision{Name: n, Other: o, How: h})
		}
	}
	slices.SortFunc(out, func(a, b Collision) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b Collision) bool { return a.Name == b.Name })
}
