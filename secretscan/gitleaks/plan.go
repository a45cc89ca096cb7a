package gitleaks

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxWindow is the longest match a rule may have and still be run on
// windows: a rule whose matches may be longer runs over the whole text.
const maxWindow = 16 << 10

// foldsIntoASCII are the two runes that case-insensitive matching folds
// into ASCII letters (U+017F into s, U+212A into k). A text holding one
// is scanned whole: the anchors are found in the text lowered byte by
// byte, which does not see them as the letters they match.
const foldsIntoASCII = "\u017f\u212a"

// maxSet bounds an exact set (exactSet): a cross product grows fast.
const maxSet = 64

// anchors is what a rule's regular expression says every match holds.
type anchors struct {
	// strs, lowered: every match holds one of them (ASCII-lowered, in a
	// text without foldsIntoASCII).
	strs []string
	// then, when not nil, is what follows them in every match: the
	// anchors are a run of the top level's parts, each matching a string
	// of a known set, and a match holding the hit at that run goes on
	// with then right after it. A hit then cannot match after is no
	// match's (rule.follows).
	then *syntax.Regexp
	// before is what precedes them in every match, when then is set.
	before *syntax.Regexp
}

// anchorsOf returns re's anchors, if it has any.
func anchorsOf(re *syntax.Regexp) (anchors, bool) {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if re.Op != syntax.OpConcat {
		s, ok := holds(re)
		return anchors{strs: s}, ok
	}
	best, from, after := bestOf(re.Sub)
	if best == nil {
		return anchors{}, false
	}
	a := anchors{strs: best}
	if after > 0 && after < len(re.Sub) {
		a.then = &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: re.Sub[after:]}
		a.before = &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: re.Sub[:from]}
	}
	return a, true
}

// bestOf picks, among the parts of a concatenation, the strings to
// anchor on: a run of parts each matching a string of a known set (the
// run matches one of their cross product), or what another part holds;
// the best is the one whose shortest string is longest (the fewest
// hits). from and after are where the run starts and ends, when the
// best is a run; else 0.
func bestOf(subs []*syntax.Regexp) (best []string, from, after int) {
	runFrom := 0
	consider := func(c []string, start, end int) {
		if len(c) > 0 && shortest(c) > 0 && (best == nil || shortest(c) > shortest(best)) {
			best, from, after = c, start, end
		}
	}
	var run []string // nil: no run open
	for i, sub := range subs {
		if set, ok := exactSet(sub); ok {
			if run == nil {
				run, runFrom = []string{""}, i
			}
			if run = cross(run, set); run != nil {
				consider(run, runFrom, i+1)
				continue
			}
		}
		run = nil
		if s, ok := holds(sub); ok {
			consider(s, 0, 0)
		}
	}
	return best, from, after
}

// inner is the expression of which every match of re holds a match,
// when re only groups or repeats it at least once; else nil.
func inner(re *syntax.Regexp) *syntax.Regexp {
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return re.Sub[0]
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return re.Sub[0]
		}
	}
	return nil
}

// holds returns strings one of which every match of re holds.
func holds(re *syntax.Regexp) ([]string, bool) {
	if set, ok := exactSet(re); ok {
		return set, shortest(set) > 0
	}
	if sub := inner(re); sub != nil {
		return holds(sub)
	}
	switch re.Op {
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			s, ok := holds(sub)
			if !ok {
				return nil, false
			}
			all = append(all, s...)
		}
		return all, true
	case syntax.OpConcat:
		best, _, _ := bestOf(re.Sub)
		return best, best != nil
	}
	return nil, false
}

func shortest(s []string) int {
	n := len(s[0])
	for _, x := range s[1:] {
		n = min(n, len(x))
	}
	return n
}

// cross is every a followed by every b, or nil past maxSet.
func cross(a, b []string) []string {
	if len(a)*len(b) > maxSet {
		return nil
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out
}

// exactSet returns the strings, ASCII-lowered, that every match of re
// lowers to one of, if they are few (at most maxSet). Empty-width
// assertions match "": they consume nothing, so what they stand between
// is contiguous in a match.
func exactSet(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []string{""}, true
	case syntax.OpLiteral:
		var b strings.Builder
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf {
				return nil, false
			}
			b.WriteByte(lowerASCII(byte(r)))
		}
		return []string{b.String()}, true
	case syntax.OpCharClass:
		var set []string
		for i := 0; i < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if strings.ContainsRune(foldsIntoASCII, r) {
					continue
				}
				if r >= utf8.RuneSelf || len(set) > maxSet {
					return nil, false
				}
				if l := string(rune(lowerASCII(byte(r)))); !slices.Contains(set, l) {
					set = append(set, l)
				}
			}
		}
		return set, len(set) > 0
	case syntax.OpCapture:
		return exactSet(re.Sub[0])
	case syntax.OpQuest:
		set, ok := exactSet(re.Sub[0])
		if !ok || slices.Contains(set, "") {
			return set, ok
		}
		return append([]string{""}, set...), true
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			set, ok := exactSet(sub)
			if !ok || len(all)+len(set) > maxSet {
				return nil, false
			}
			for _, x := range set {
				if !slices.Contains(all, x) {
					all = append(all, x)
				}
			}
		}
		return all, true
	case syntax.OpConcat:
		all := []string{""}
		for _, sub := range re.Sub {
			set, ok := exactSet(sub)
			if !ok {
				return nil, false
			}
			if all = cross(all, set); all == nil {
				return nil, false
			}
		}
		return all, true
	case syntax.OpRepeat:
		if re.Min == re.Max && re.Min <= 8 {
			set, ok := exactSet(re.Sub[0])
			all := []string{""}
			for range re.Min {
				if all = cross(all, set); all == nil {
					return nil, false
				}
			}
			return all, ok
		}
	}
	return nil, false
}

// reach bounds where a match of re can lie around a string it holds:
// it holds at most bound bytes that its unbounded repetitions do not
// consume, and those consume only bytes of tail. So a match holding an
// anchor's hit extends, each side, at most until the bound+1'th byte
// not in tail (in a text without foldsIntoASCII). A rule without
// unbounded repetitions has an empty tail: its matches are at most
// bound bytes long.
type reach struct {
	bound int
	tail  [256]bool
}

func reachOf(re *syntax.Regexp) reach {
	var r reach
	r.bound = r.add(re)
	return r
}

// add returns the bytes re's bounded parts may span, adding what its
// unbounded repetitions may consume to r.tail.
func (r *reach) add(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, c := range re.Rune {
			n += runeLen(c, re.Flags&syntax.FoldCase != 0)
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		return utf8.RuneLen(re.Rune[len(re.Rune)-1])
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return r.add(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		bytesOf(re.Sub[0], &r.tail)
		return 0
	case syntax.OpRepeat:
		if re.Max < 0 {
			bytesOf(re.Sub[0], &r.tail)
			return 0
		}
		return re.Max * r.add(re.Sub[0])
	case syntax.OpConcat:
		total := 0
		for _, sub := range re.Sub {
			total += r.add(sub)
		}
		return total
	case syntax.OpAlternate:
		most := 0
		for _, sub := range re.Sub {
			most = max(most, r.add(sub))
		}
		return most
	}
	return 0 // empty-width
}

// bytesOf marks in set every byte a match of re may hold, in a text
// without foldsIntoASCII: of any other rune beyond ASCII, every byte
// from 0x80 (a rune's bytes, or an invalid byte read as U+FFFD).
func bytesOf(re *syntax.Regexp, set *[256]bool) {
	mark := func(c rune) {
		switch {
		case c < utf8.RuneSelf:
			set[c] = true
		case !strings.ContainsRune(foldsIntoASCII, c):
			for b := utf8.RuneSelf; b < 256; b++ {
				set[b] = true
			}
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, c := range re.Rune {
			mark(c)
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
					mark(f)
				}
			}
		}
	case syntax.OpCharClass:
		for i := 0; i < len(re.Rune); i += 2 {
			for c := re.Rune[i]; c <= re.Rune[i+1]; c++ {
				mark(c)
				if c >= utf8.RuneSelf && !strings.ContainsRune(foldsIntoASCII, c) {
					break // every high byte is marked
				}
			}
		}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		for b := range set {
			set[b] = b != '\n' || re.Op == syntax.OpAnyChar
		}
	default:
		for _, sub := range re.Sub {
			bytesOf(sub, set)
		}
	}
}

// runeLen is the most bytes r can match: with fold, any rune of its
// case orbit but the two a scanned-in-windows text never holds.
func runeLen(r rune, fold bool) int {
	n := utf8.RuneLen(r)
	if !fold {
		return n
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if !strings.ContainsRune(foldsIntoASCII, f) {
			n = max(n, utf8.RuneLen(f))
		}
	}
	return n
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// need is what a string holds wherever a regular expression matches in
// it (in a text without foldsIntoASCII, ASCII-lowered): one of strs, or
// each of all, or one of any. An allowlist's regular expressions, tried
// on every candidate a rule finds, are run only on a string that holds
// what they need: most hold none of their words.
type need struct {
	strs []string
	all  []*need
	any  []*need
}

// needOf returns what every string re matches in holds; nil when it
// says nothing.
func needOf(re *syntax.Regexp) *need {
	if set, ok := exactSet(re); ok {
		if shortest(set) == 0 {
			return nil
		}
		return &need{strs: set}
	}
	if sub := inner(re); sub != nil {
		return needOf(sub)
	}
	switch re.Op {
	case syntax.OpConcat:
		var all []*need
		for _, sub := range re.Sub {
			if n := needOf(sub); n != nil {
				all = append(all, n)
			}
		}
		if len(all) == 1 {
			return all[0]
		}
		if len(all) > 0 {
			return &need{all: all}
		}
	case syntax.OpAlternate:
		n := &need{}
		for _, sub := range re.Sub {
			s := needOf(sub)
			if s == nil {
				return nil
			}
			n.any = append(n.any, s)
		}
		return n
	}
	return nil
}

// heldBy reports whether low, an ASCII-lowered string, holds what n
// needs.
func (n *need) heldBy(low string) bool {
	switch {
	case n.strs != nil:
		return slices.ContainsFunc(n.strs, func(s string) bool { return strings.Contains(low, s) })
	case n.all != nil:
		return !slices.ContainsFunc(n.all, func(m *need) bool { return !m.heldBy(low) })
	}
	return slices.ContainsFunc(n.any, func(m *need) bool { return m.heldBy(low) })
}

// alternative is one of the alternatives an allowlist's regular
// expressions make, and what a string holds where it matches.
type alternative struct {
	re   *regexp.Regexp
	need *need // nil: nothing known
}

// alternativesOf splits the regular expression gitleaks makes of an
// allowlist's (all of them as alternatives of one group, so that a flag
// one sets holds in those after it) at its top level, each alternative
// compiled alone: one matches where one of them does. Most are anchored
// or need a word, and are skipped or fail at once where the whole would
// be run at every position of the string. Nil: not split.
func alternativesOf(res []*regexp.Regexp) []alternative {
	if len(res) == 0 {
		return nil
	}
	strs := make([]string, len(res))
	for i, re := range res {
		strs[i] = re.String()
	}
	joined, err := syntax.Parse("(?:"+strings.Join(strs, "|")+")", syntax.Perl)
	if err != nil {
		return nil
	}
	subs := []*syntax.Regexp{joined}
	if joined.Op == syntax.OpAlternate {
		subs = joined.Sub
	}
	alts := make([]alternative, len(subs))
	for i, sub := range subs {
		re, err := regexp.Compile(sub.String())
		if err != nil {
			return nil
		}
		alts[i] = alternative{re: re, need: needOf(sub)}
	}
	return alts
}
