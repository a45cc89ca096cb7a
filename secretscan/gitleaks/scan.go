package gitleaks

import (
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"

	"github.com/airlock/airlock/secretscan"
)

// scanner runs gitleaks' rules only where they can match. One pass of
// a multi-pattern automaton over the lowered text finds every rule's
// keywords (does the rule run on this text at all: gitleaks' own gate)
// and its anchors: strings, taken from the rule's regular expression,
// one of which every match of it holds. The rule is then run on the
// windows around its anchors' hits that a match holding them can reach
// (reach: a bound of bytes, and the bytes its unbounded repetitions
// consume, one more byte of context each side), merged where they
// touch, rather than over every byte of the text: on a megabyte of
// minified JavaScript that is the difference. What it reports is what gitleaks'
// detector reports on the same text (FuzzWindows holds it to that): the
// same matches in the same order, filtered the same way (gitleaks:allow,
// secret groups, entropy, allowlists, generic findings that a specific
// one covers).
type scanner struct {
	det      *detect.Detector // gitleaks' own, for what windows do not serve
	rules    []*plan          // by rule id
	trie     *ahocorasick.Trie
	patterns []pattern // the trie's, by index
	global   []*config.Allowlist
	whole    bool // the rules use what windows do not serve: gitleaks' detector runs
	// regexes are the allowlists' regular expressions, by allowlist, as
	// alternatives tried one by one (alternativesOf).
	regexes map[*config.Allowlist][]alternative
}

// plan is one rule, prepared.
type plan struct {
	rule     *config.Rule
	gated    bool // runs only on a text holding one of its keywords
	windowed bool // runs on windows around its anchors; else on the whole text
	reach    reach
	// follows, when not nil, is what must follow an anchor's hit (from
	// its last byte on) for a match to hold it: anchors.then.
	follows *regexp.Regexp
	longest int // the longest anchor's length
	// attempts: the rule is tried at each place a match may start rather
	// than searched for over its windows. It holds when follows does: a
	// match holding a hit starts where only bytes of prefix (what the
	// parts before the anchors can match) lie between it and the hit.
	// at0 and at1 are the rule anchored at the text's start, and after
	// one byte of context.
	attempts bool
	prefix   [256]bool
	at0, at1 *regexp.Regexp
}

// pattern is a string the trie finds, and what it means to which rules.
type pattern struct {
	s       string
	gates   []int // rules it is a keyword of
	anchors []int // rules it is an anchor of
}

func newScanner(det *detect.Detector) *scanner {
	s := &scanner{det: det, global: det.Config.Allowlists, regexes: map[*config.Allowlist][]alternative{}}
	for _, a := range det.Config.Allowlists {
		s.regexes[a] = alternativesOf(a.Regexes)
	}
	index := map[string]int{}
	add := func(str string) *pattern {
		i, ok := index[str]
		if !ok {
			i = len(s.patterns)
			index[str] = i
			s.patterns = append(s.patterns, pattern{s: str})
		}
		return &s.patterns[i]
	}
	ids := make([]string, 0, len(det.Config.Rules))
	for id := range det.Config.Rules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := det.Config.Rules[id]
		if len(r.RequiredRules) > 0 || r.SkipReport {
			s.whole = true // composite rules: gitleaks' detector does them
		}
		if r.Regex == nil || (r.Path != nil && !r.Path.MatchString("")) {
			continue // a path rule: never on a text without a path
		}
		for _, a := range r.Allowlists {
			s.regexes[a] = alternativesOf(a.Regexes)
		}
		p := &plan{rule: &r, gated: len(r.Keywords) > 0}
		n := len(s.rules)
		s.rules = append(s.rules, p)
		for _, k := range r.Keywords {
			k = strings.ToLower(k)
			pat := add(k)
			pat.gates = append(pat.gates, n)
		}
		re, err := syntax.Parse(r.Regex.String(), syntax.Perl)
		if err != nil {
			continue // whole text
		}
		p.reach = reachOf(re)
		anchors, ok := anchorsOf(re)
		if !ok || p.reach.bound > maxWindow {
			continue
		}
		if anchors.then != nil {
			if p.follows, err = regexp.Compile(`\A(?s:.)(?:` + anchors.then.String() + `)`); err != nil {
				continue
			}
			bytesOf(anchors.before, &p.prefix)
			// A prefix of ASCII only: a place after prefix bytes is where
			// a rune starts, as the search over the text sees it.
			ascii := !slices.Contains(p.prefix[utf8.RuneSelf:], true)
			p.at0, err = regexp.Compile(`\A(?:` + r.Regex.String() + `)`)
			if err == nil {
				p.at1, err = regexp.Compile(`\A(?s:.)(?:` + r.Regex.String() + `)`)
			}
			p.attempts = err == nil && ascii
		}
		p.windowed = true
		for _, a := range anchors.strs {
			p.longest = max(p.longest, len(a))
			pat := add(a)
			if !slices.Contains(pat.anchors, n) {
				pat.anchors = append(pat.anchors, n)
			}
		}
	}
	strs := make([]string, len(s.patterns))
	for i, p := range s.patterns {
		strs[i] = p.s
	}
	s.trie = ahocorasick.NewTrieBuilder().AddStrings(strs).Build()
	return s
}

// span is a window of the text: [start, end).
type span struct{ start, end int }

// find returns what gitleaks' rules find in text.
func (s *scanner) find(text string) []secretscan.Match {
	if s.whole {
		return s.detector(text)
	}
	low := make([]byte, len(text))
	ascii := true
	for i := 0; i < len(text); i++ {
		c := text[i]
		ascii = ascii && c < utf8.RuneSelf
		low[i] = lowerASCII(c)
	}
	// The runes are looked for as bytes: their first bytes are never a
	// rune's later ones, so where those bytes are, so is the rune.
	if !ascii && (strings.Contains(text, foldsIntoASCII[:2]) || strings.Contains(text, foldsIntoASCII[2:])) {
		return s.detector(text)
	}
	gated := make([]bool, len(s.rules))
	windows := make([]cursor, len(s.rules))
	// A gated rule's hits wait until its keyword is seen (in most texts
	// it never is: a rule whose anchors are a few common letters has hits
	// all over a megabyte of minified code), at most maxWaiting of them:
	// a rule that had more runs over the whole text if its keyword comes.
	waiting := make([][]span, len(s.rules))
	whole := make([]bool, len(s.rules))
	s.trie.Walk(low, func(end, n, pat int64) bool {
		p := &s.patterns[pat]
		if ascii {
			for _, r := range p.gates {
				if gated[r] {
					continue
				}
				gated[r] = true
				for _, h := range waiting[r] {
					s.rules[r].widen(&windows[r], text, h.start, h.end)
				}
				waiting[r] = nil
			}
		}
		for _, r := range p.anchors {
			start, end := int(end)+1-int(n), int(end)+1
			switch {
			case whole[r]:
			case ascii && s.rules[r].gated && !gated[r]:
				if len(waiting[r]) == maxWaiting {
					whole[r], waiting[r] = true, nil
					break
				}
				waiting[r] = append(waiting[r], span{start, end})
			default:
				s.rules[r].widen(&windows[r], text, start, end)
			}
		}
		return true
	})
	if !ascii {
		// gitleaks' gate lowers the text with strings.ToLower, which
		// lowers more than ASCII: its keywords are looked for there.
		s.trie.Walk([]byte(strings.ToLower(text)), func(_, _, pat int64) bool {
			for _, r := range s.patterns[pat].gates {
				gated[r] = true
			}
			return true
		})
	}
	t := &text1{text: text, allowed: map[lineAllow]bool{}, regexes: s.regexes}
	var found []finding
	for i, p := range s.rules {
		if p.gated && !gated[i] {
			continue
		}
		if !p.windowed || whole[i] {
			for _, m := range p.rule.Regex.FindAllStringIndex(text, -1) {
				found = s.check(t, p.rule, m[0], m[1], found)
			}
			continue
		}
		if c := &windows[i]; p.attempts && !c.tooLong {
			if spans, ok := p.attempt(text, c.starts); ok {
				for _, m := range spans {
					found = s.check(t, p.rule, m.start, m.end, found)
				}
				continue
			}
		}
		var spans []span
	windows:
		for _, w := range windows[i].ws {
			for _, m := range p.rule.Regex.FindAllStringIndex(text[w.start:w.end], -1) {
				if (m[0] == 0 && w.start > 0) || (m[1] == w.end-w.start && w.end < len(text)) {
					// At a window's edge: what is beyond it was not seen, so
					// this may be no match of the text's (no match of the
					// text's reaches an edge). Rare: the whole text.
					spans = spans[:0]
					for _, m := range p.rule.Regex.FindAllStringIndex(text, -1) {
						spans = append(spans, span{m[0], m[1]})
					}
					break windows
				}
				spans = append(spans, span{w.start + m[0], w.start + m[1]})
			}
		}
		for _, m := range spans {
			found = s.check(t, p.rule, m.start, m.end, found)
		}
	}
	return dropCovered(found)
}

// detector is gitleaks' own detector on text.
func (s *scanner) detector(text string) []secretscan.Match {
	var found []secretscan.Match
	for _, f := range s.det.DetectString(text) {
		found = append(found, secretscan.Match{Rule: f.RuleID, Description: f.Description, Line: f.StartLine + 1})
	}
	return found
}

// maxWaiting bounds the hits of a rule kept until its keyword is seen.
const maxWaiting = 1 << 10

// maxFollow bounds the text a hit's follows check reads: past it the
// hit is kept unchecked (its window is scanned all the same), so that
// no text makes the checks cost its length once per hit.
const maxFollow = 64 << 10

// cursor is a rule's state while the hits of its anchors come: two
// pointers that only move forward, so that finding every hit's window
// costs the text's length once, not once per hit.
type cursor struct {
	ws          []span // merged windows, in order
	starts      []starts
	tooLong     bool // a hit's prefix ran past maxPrefix: windows, not attempts
	end         int  // the last hit's end
	left, right int  // the window bounds for the hit ending at end
	nl, nr      int  // bytes not in the tail in [left, end) and [end, right)
}

// widen adds to c.ws the window that matches holding the hit
// text[start:end] can reach: each side, up to and with the bound+1'th
// byte not in the tail (on the left counted from the hit's end, so
// bound plus the longest anchor), or the text's end; none when what
// follows the hit cannot be a match's. Hits come in order of their end,
// so both bounds only move forward, and a window is merged with the
// last or follows it.
func (p *plan) widen(c *cursor, text string, start, end int) {
	r := &p.reach
	// Right: the last position whose [end, right) holds at most bound
	// bytes not in the tail; right is then the bound+1'th such byte.
	if c.right < end {
		c.right, c.nr = end, 0
	} else {
		for i := c.end; i < end; i++ {
			if !r.tail[text[i]] {
				c.nr--
			}
		}
	}
	for c.right < len(text) && (c.nr < r.bound || r.tail[text[c.right]]) {
		if !r.tail[text[c.right]] {
			c.nr++
		}
		c.right++
	}
	// Left: the first position whose [left, end) holds at most
	// bound+longest bytes not in the tail.
	for i := c.end; i < end; i++ {
		if !r.tail[text[i]] {
			c.nl++
		}
	}
	for c.nl > r.bound+p.longest {
		if !r.tail[text[c.left]] {
			c.nl--
		}
		c.left++
	}
	c.end = end
	w := span{max(0, c.left-1), min(len(text), c.right+1)}
	if p.follows != nil && w.end-end <= maxFollow && !p.follows.MatchString(text[end-1:w.end]) {
		return
	}
	if p.attempts && !c.tooLong {
		lo := start
		for lo > c.left && p.prefix[text[lo-1]] {
			if start-lo >= maxPrefix {
				c.tooLong = true
				break
			}
			lo--
		}
		c.starts = append(c.starts, starts{lo, start, w.end})
	}
	if k := len(c.ws) - 1; k >= 0 && w.start <= c.ws[k].end {
		c.ws[k].end = max(c.ws[k].end, w.end)
		return
	}
	c.ws = append(c.ws, w)
}

// maxPrefix bounds how far back from a hit a match's start is looked
// for: past it the rule is searched for over its windows instead.
const maxPrefix = 4 << 10

// starts are the places [lo, hi] a match may start at, and the end of
// the text it may reach (the byte before limit is context).
type starts struct{ lo, hi, limit int }

// attempt finds the rule's matches by trying it at each place one may
// start, in order, as a search over the whole text would find them:
// the leftmost start, the match its rule prefers there, the next search
// from its end. ok is false when a match reached the end of what it
// was given (what lies beyond was not seen): the caller searches then.
func (p *plan) attempt(text string, all []starts) (found []span, ok bool) {
	slices.SortFunc(all, func(a, b starts) int { return a.lo - b.lo })
	var merged []starts
	for _, s := range all {
		if k := len(merged) - 1; k >= 0 && s.lo <= merged[k].hi+1 {
			merged[k].hi, merged[k].limit = max(merged[k].hi, s.hi), max(merged[k].limit, s.limit)
			continue
		}
		merged = append(merged, s)
	}
	pos := 0
	for _, s := range merged {
		for at := max(s.lo, pos); at <= s.hi; at++ {
			var m []int
			if at == 0 {
				m = p.at0.FindStringIndex(text[:s.limit])
			} else if m = p.at1.FindStringIndex(text[at-1 : s.limit]); m != nil {
				m[1]--
			}
			if m == nil {
				continue
			}
			end := at + m[1]
			if end >= s.limit && s.limit < len(text) {
				return nil, false
			}
			found = append(found, span{at, end})
			pos, at = end, end-1
		}
	}
	return found, true
}

// text1 is a text being scanned, with what its findings need of it.
type text1 struct {
	text     string
	newlines []int // where its '\n' are; nil until a match needs them
	allowed  map[lineAllow]bool
	regexes  map[*config.Allowlist][]alternative
}

// lineAllow is an allowlist's answer about one line, kept: a minified
// line of a megabyte may hold many matches.
type lineAllow struct {
	a          *config.Allowlist
	start, end int
}

// finding is a match that passed its rule's checks.
type finding struct {
	rule   *config.Rule
	line   int // 0-based
	match  string
	secret string
}

// check applies gitleaks' checks to the match text[start:end] of r and
// appends it to found if it passes them.
func (s *scanner) check(t *text1, r *config.Rule, start, end int, found []finding) []finding {
	// gitleaks' checks each drop the finding: they are taken cheapest
	// first, the line's (a minified line is a megabyte) last.
	match := strings.Trim(t.text[start:end], "\n")
	end = start + len(match) // as gitleaks does, even when the trim was at the start
	secret := match
	if groups := r.Regex.FindStringSubmatch(match); len(groups) >= 2 {
		if r.SecretGroup > 0 {
			if len(groups) <= r.SecretGroup {
				return found
			}
			secret = groups[r.SecretGroup]
		} else if i := slices.IndexFunc(groups[1:], func(g string) bool { return g != "" }); i >= 0 {
			secret = groups[1+i]
		}
	}
	if r.Entropy != 0 && entropy(secret) <= r.Entropy {
		return found
	}
	line, ls, le := t.locate(start, end)
	if t.allows(allowComment, secret, match, ls, le) {
		return found
	}
	for _, lists := range [][]*config.Allowlist{s.global, r.Allowlists} {
		for _, a := range lists {
			if t.allows(a, secret, match, ls, le) {
				return found
			}
		}
	}
	return append(found, finding{rule: r, line: line, match: match, secret: secret})
}

// allowComment stands for the comment gitleaks:allow on a finding's
// line, which drops it (an allowlist of its own, so that a line's
// answer is kept with the others').
var allowComment = &config.Allowlist{RegexTarget: "line", Regexes: []*regexp.Regexp{regexp.MustCompile(regexp.QuoteMeta("gitleaks:allow"))}}

// allows reports whether allowlist a lets a finding go (a text has no
// path and no commit: their conditions never hold).
func (t *text1) allows(a *config.Allowlist, secret, match string, ls, le int) bool {
	regex := func() bool {
		switch a.RegexTarget {
		case "match":
			return t.regexAllowed(a, match)
		case "line":
			k := lineAllow{a, ls, le}
			ok, seen := t.allowed[k]
			if !seen {
				ok = t.regexAllowed(a, t.text[ls:le])
				t.allowed[k] = ok
			}
			return ok
		}
		return t.regexAllowed(a, secret)
	}
	stop := func() bool { ok, _ := a.ContainsStopWord(secret); return ok }
	if a.MatchCondition != config.AllowlistMatchAnd {
		return stop() || regex()
	}
	if len(a.Commits) > 0 || len(a.Paths) > 0 {
		return false
	}
	return (len(a.Regexes) == 0 || regex()) && (len(a.StopWords) == 0 || stop())
}

// regexAllowed is a.RegexAllowed(target), its alternatives tried one by
// one where target holds what they need.
func (t *text1) regexAllowed(a *config.Allowlist, target string) bool {
	alts, ok := t.regexes[a]
	if !ok || alts == nil || target == "" {
		return a.RegexAllowed(target)
	}
	low := lowered(target)
	for _, alt := range alts {
		if (alt.need == nil || alt.need.heldBy(low)) && alt.re.MatchString(target) {
			return true
		}
	}
	return false
}

// lowered is s ASCII-lowered.
func lowered(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerASCII(c)
	}
	return string(b)
}

// locate returns the 0-based line of a match at [start, end) and the
// span of text gitleaks reports as its line: from the newline before it
// (or the text's start) to the newline after its end; for a match that
// starts after the text's last newline, from the text's start to the end
// of the line it ends on.
func (t *text1) locate(start, end int) (line, ls, le int) {
	if t.newlines == nil {
		t.newlines = []int{}
		for i := 0; ; {
			j := strings.IndexByte(t.text[i:], '\n')
			if j < 0 {
				break
			}
			t.newlines = append(t.newlines, i+j)
			i += j + 1
		}
	}
	nl := t.newlines
	if len(nl) == 0 {
		nl = []int{len(t.text)}
	}
	line = sort.SearchInts(nl, start+1) // newlines at or before start
	if line < len(nl) {
		if line > 0 {
			ls = nl[line-1]
		}
		le = nl[line]
		if j := sort.SearchInts(nl, end); j < len(nl) && end > 0 && (j == 0 || nl[j-1] < end) {
			le = nl[j]
		}
	} else {
		le = end
		for le < len(t.text) && t.text[le] != '\n' && t.text[le] != '\r' {
			le++
		}
	}
	if end > le {
		le = end
	}
	return line, ls, le
}

// dropCovered drops a generic rule's finding where another rule found,
// on the same line, a secret holding it; and returns the rest as matches.
func dropCovered(found []finding) []secretscan.Match {
	generic := func(f finding) bool { return strings.Contains(strings.ToLower(f.rule.RuleID), "generic") }
	var out []secretscan.Match
	for _, f := range found {
		covered := generic(f) && slices.ContainsFunc(found, func(g finding) bool {
			return g.line == f.line && g.rule.RuleID != f.rule.RuleID && strings.Contains(g.secret, f.secret) && !generic(g)
		})
		if !covered {
			out = append(out, secretscan.Match{Rule: f.rule.RuleID, Description: f.rule.Description, Line: f.line + 1})
		}
	}
	return out
}

// entropy is the Shannon entropy of s's runes, over its length in bytes
// (as gitleaks counts it).
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	counts := map[rune]int{}
	for _, r := range s {
		counts[r]++
	}
	e, inv := 0.0, 1/float64(len(s))
	for _, c := range counts {
		f := float64(c) * inv
		e -= f * math.Log2(f)
	}
	return e
}
