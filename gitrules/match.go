package gitrules

import (
	"math/bits"
	"strings"
)

// pattern is one pattern of an ignore or attributes line, parsed as git's
// parse_path_pattern does.
type pattern struct {
	negated  bool
	dirOnly  bool   // a trailing slash: matches directories only
	baseOnly bool   // no slash: matched against the last element, at any depth
	text     string // without the leading ! and the trailing /

	// literal: the text has no glob character (it is compared as is).
	// Otherwise a basename pattern is the whole text as glob; a path
	// pattern is prefix (compared as is) then glob, exactly as git cuts
	// it, which decides what a ** right after the prefix means.
	literal bool
	suffix  string // a basename pattern "*" + suffix, suffix with no glob character
	prefix  string
	glob    *glob
}

// parsePattern parses a pattern as written (spaces already trimmed).
func parsePattern(s string) pattern {
	var p pattern
	if strings.HasPrefix(s, "!") {
		p.negated = true
		s = s[1:]
	}
	n := len(s)
	if n > 0 && s[n-1] == '/' {
		p.dirOnly = true
		n--
	}
	p.baseOnly = !strings.Contains(s[:n], "/")
	// The literal part is measured on s with its trailing slash, then
	// capped, as git does.
	lit := min(simpleLength(s), n)
	p.text = s[:n]
	p.literal = lit == n
	switch {
	case p.literal:
	case p.baseOnly:
		if p.text[0] == '*' && simpleLength(p.text[1:]) == len(p.text)-1 {
			p.suffix = p.text[1:]
		}
		p.glob = compileGlob(p.text, false)
	default:
		text := p.text
		if text[0] == '/' {
			text, lit = text[1:], lit-1
		}
		p.prefix = text[:lit]
		p.glob = compileGlob(text[lit:], true)
	}
	return p
}

// simpleLength is the length of s's leading part with no *, ?, [ or \.
func simpleLength(s string) int {
	if i := strings.IndexAny(s, "*?[\\"); i >= 0 {
		return i
	}
	return len(s)
}

// matchBasename matches a pattern with no slash against a path's last
// element.
func (p *pattern) matchBasename(name string) bool {
	if p.literal {
		return name == p.text
	}
	if p.suffix != "" {
		return strings.HasSuffix(name, p.suffix)
	}
	return p.glob.match(name)
}

// matchPath matches a pattern with a slash against path, relative to base
// (the directory of the file the pattern came from, "" at the top).
func (p *pattern) matchPath(path, base string) bool {
	if base != "" {
		if len(path) < len(base)+1 || path[len(base)] != '/' || path[:len(base)] != base {
			return false
		}
		path = path[len(base)+1:]
	} else if path == "" {
		return false
	}
	if p.literal {
		return path == strings.TrimPrefix(p.text, "/")
	}
	rest, ok := strings.CutPrefix(path, p.prefix)
	if !ok {
		return false
	}
	return p.glob.match(rest)
}

// matches says whether p matches path (slash-separated, from the top),
// whose last element starts at path[baseAt:], for a rule file in base.
func (p *pattern) matches(path string, baseAt int, isDir bool, base string) bool {
	if p.dirOnly && !isDir {
		return false
	}
	if p.baseOnly {
		return p.matchBasename(path[baseAt:])
	}
	return p.matchPath(path, base)
}

// A glob is a compiled wildmatch pattern: a list of tokens run as a set
// of states (a Thompson simulation), so matching costs at most
// len(tokens) * len(text) steps whatever the pattern.
type glob struct {
	toks  []token
	never bool // malformed (an open class, a trailing \): git matches nothing

	need string // the longest run of plain bytes: a text without it cannot match
	// eps[s] is state s with the states it reaches without reading,
	// when the states fit one word (len(toks) < 64).
	eps []uint64
}

type tokenKind uint8

const (
	tokByte    tokenKind = iota // one byte, as is
	tokAny                      // ?: any byte (not / when matching paths)
	tokClass                    // [...]
	tokStar                     // *: any run of bytes without /
	tokStarAll                  // ** at the end or before \/: any run of bytes
	tokDirs                     // **/ at a segment start is tokDirs, tokStarAll, '/': tokDirs skips all three (no directory) or enters them
)

type token struct {
	kind  tokenKind
	b     byte       // tokByte: the byte; tokAny: the byte it refuses (/ for paths, 0: none)
	class *[4]uint64 // bytes a class matches, its negation and the / rule applied
}

// compileGlob compiles a wildmatch pattern as git's dowild reads it; path
// is WM_PATHNAME (wildcards other than ** do not match /).
func compileGlob(p string, path bool) *glob {
	g := &glob{}
	for i := 0; i < len(p); {
		switch c := p[i]; c {
		case '\\':
			if i+1 == len(p) {
				g.never = true
				return g
			}
			g.toks = append(g.toks, token{kind: tokByte, b: p[i+1]})
			i += 2
		case '?':
			if path {
				g.toks = append(g.toks, token{kind: tokAny, b: '/'})
			} else {
				g.toks = append(g.toks, token{kind: tokAny})
			}
			i++
		case '[':
			set, next, ok := compileClass(p, i, path)
			if !ok {
				g.never = true
				return g
			}
			g.toks = append(g.toks, token{kind: tokClass, class: set})
			i = next
		case '*':
			j := i
			for j < len(p) && p[j] == '*' {
				j++
			}
			kind := tokStar
			if !path {
				kind = tokStarAll
			}
			if j-i >= 2 {
				// git decides on the bytes around the run, flags aside.
				kind = tokStar
				if i == 0 || p[i-1] == '/' {
					switch rest := p[j:]; {
					case rest == "" || strings.HasPrefix(rest, "\\/"):
						kind = tokStarAll
					case rest[0] == '/':
						g.toks = append(g.toks, token{kind: tokDirs}, token{kind: tokStarAll}, token{kind: tokByte, b: '/'})
						i = j + 1
						continue
					}
				}
			}
			g.toks = append(g.toks, token{kind: kind})
			i = j
		default:
			g.toks = append(g.toks, token{kind: tokByte, b: c})
			i++
		}
	}
	g.prepare()
	return g
}

// prepare computes need and, for a short pattern, eps.
func (g *glob) prepare() {
	var run []byte
	for i := 0; i <= len(g.toks); i++ {
		if i < len(g.toks) && g.toks[i].kind == tokByte {
			run = append(run, g.toks[i].b)
			continue
		}
		if len(run) > len(g.need) {
			g.need = string(run)
		}
		run = run[:0]
		if i < len(g.toks) && g.toks[i].kind == tokDirs {
			i += 2 // its / is optional: not needed
		}
	}
	n := len(g.toks)
	if n >= 64 {
		return
	}
	g.eps = make([]uint64, n+1)
	for s := n; s >= 0; s-- {
		g.eps[s] = 1 << s
		if s == n {
			continue
		}
		switch g.toks[s].kind {
		case tokStar, tokStarAll:
			g.eps[s] |= g.eps[s+1]
		case tokDirs:
			g.eps[s] |= g.eps[s+1] | g.eps[s+3]
		}
	}
}

// step says what token t does with byte c: stay in its state (a star
// reads on) and advance to the next.
func (t *token) step(c byte) (stay, advance bool) {
	switch t.kind {
	case tokByte:
		return false, c == t.b
	case tokAny:
		return false, t.b == 0 || c != t.b
	case tokClass:
		return false, t.class[c>>6]&(1<<(c&63)) != 0
	case tokStar:
		return c != '/', false
	case tokStarAll:
		return true, false
	}
	return false, false // tokDirs reads nothing
}

// compileClass reads the class opening at p[i] as dowild does, returning
// the set, the index after the closing ], and false when it is malformed.
func compileClass(p string, i int, path bool) (*[4]uint64, int, bool) {
	var set [4]uint64
	add := func(c byte) { set[c>>6] |= 1 << (c & 63) }
	j := i + 1
	if j >= len(p) {
		return nil, 0, false
	}
	negated := false
	if p[j] == '!' || p[j] == '^' {
		negated = true
		j++
	}
	var prev byte // 0 after a range or a named class: no range starts there
	for {
		if j >= len(p) {
			return nil, 0, false
		}
		c := p[j]
		switch {
		case c == '\\':
			j++
			if j >= len(p) {
				return nil, 0, false
			}
			c = p[j]
			add(c)
		case c == '-' && prev != 0 && j+1 < len(p) && p[j+1] != ']':
			j++
			c = p[j]
			if c == '\\' {
				j++
				if j >= len(p) {
					return nil, 0, false
				}
				c = p[j]
			}
			for x := int(prev); x <= int(c); x++ {
				add(byte(x))
			}
			c = 0
		case c == '[' && j+1 < len(p) && p[j+1] == ':':
			s := j + 2
			k := s
			for k < len(p) && p[k] != ']' {
				k++
			}
			if k >= len(p) {
				return nil, 0, false
			}
			if k-s-1 < 0 || p[k-1] != ':' {
				// No ":]": the [ is an ordinary member.
				add('[')
				j = s - 2
				break
			}
			in, ok := namedClass(p[s : k-1])
			if !ok {
				return nil, 0, false
			}
			for x := 0; x < 256; x++ {
				if in(byte(x)) {
					add(byte(x))
				}
			}
			j = k
			c = 0
		default:
			add(c)
		}
		prev = c
		j++
		if j < len(p) && p[j] == ']' {
			break
		}
	}
	if negated {
		for w := range set {
			set[w] = ^set[w]
		}
	}
	if path {
		set['/'>>6] &^= 1 << ('/' & 63)
	}
	return &set, j + 1, true
}

// namedClass is a [:name:] class as git's own ctype (ASCII only) has it.
func namedClass(name string) (func(byte) bool, bool) {
	isUpper := func(c byte) bool { return 'A' <= c && c <= 'Z' }
	isLower := func(c byte) bool { return 'a' <= c && c <= 'z' }
	isDigit := func(c byte) bool { return '0' <= c && c <= '9' }
	isAlpha := func(c byte) bool { return isUpper(c) || isLower(c) }
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	isPrint := func(c byte) bool { return 0x20 <= c && c <= 0x7e }
	switch name {
	case "alnum":
		return func(c byte) bool { return isAlpha(c) || isDigit(c) }, true
	case "alpha":
		return isAlpha, true
	case "blank":
		return func(c byte) bool { return c == ' ' || c == '\t' }, true
	case "cntrl":
		return func(c byte) bool { return c < 0x20 || c == 0x7f }, true
	case "digit":
		return isDigit, true
	case "graph":
		return func(c byte) bool { return isPrint(c) && c != ' ' }, true
	case "lower":
		return isLower, true
	case "print":
		return isPrint, true
	case "punct":
		return func(c byte) bool { return isPrint(c) && c != ' ' && !isAlpha(c) && !isDigit(c) }, true
	case "space":
		return isSpace, true
	case "upper":
		return isUpper, true
	case "xdigit":
		return func(c byte) bool { return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F') }, true
	}
	return nil, false
}

// match runs the tokens over text as a set of states: state i means the
// first i tokens matched the bytes read so far.
func (g *glob) match(text string) bool {
	if g.never || !strings.Contains(text, g.need) {
		return false
	}
	n := len(g.toks)
	if g.eps != nil {
		cur := g.eps[0]
		for i := 0; i < len(text) && cur != 0; i++ {
			var next uint64
			for live := cur &^ (1 << n); live != 0; live &= live - 1 {
				s := bits.TrailingZeros64(live)
				stay, advance := g.toks[s].step(text[i])
				if stay {
					next |= g.eps[s]
				}
				if advance {
					next |= g.eps[s+1]
				}
			}
			cur = next
		}
		return cur&(1<<n) != 0
	}
	words := (n + 1 + 63) / 64
	var buf [8]uint64
	var cur, next []uint64
	if 2*words <= len(buf) {
		cur, next = buf[:words], buf[words:2*words]
	} else {
		s := make([]uint64, 2*words)
		cur, next = s[:words], s[words:]
	}
	cur[0] = 1
	g.close(cur)
	for i := 0; i < len(text); i++ {
		c := text[i]
		clear(next)
		live := false
		for s := range states(cur, n) {
			stay, advance := g.toks[s].step(c)
			if stay {
				next[s>>6] |= 1 << (s & 63)
				live = true
			}
			if advance {
				next[(s+1)>>6] |= 1 << ((s + 1) & 63)
				live = true
			}
		}
		if !live {
			return false
		}
		g.close(next)
		cur, next = next, cur
	}
	return cur[n>>6]&(1<<(n&63)) != 0
}

// states yields the states in set below n, in order.
func states(set []uint64, n int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for w, bitsLeft := range set {
			for bitsLeft != 0 {
				s := w*64 + bits.TrailingZeros64(bitsLeft)
				if s >= n || !yield(s) {
					return
				}
				bitsLeft &= bitsLeft - 1
			}
		}
	}
}

// close adds the states reachable without reading: past any star (each
// matches nothing too). Those moves go forward only, so one pass suffices.
func (g *glob) close(set []uint64) {
	for s := 0; s < len(g.toks); s++ {
		if set[s>>6] == 0 {
			s |= 63 // nothing in this word
			continue
		}
		if set[s>>6]&(1<<(s&63)) == 0 {
			continue
		}
		switch g.toks[s].kind {
		case tokStar, tokStarAll:
			set[(s+1)>>6] |= 1 << ((s + 1) & 63)
		case tokDirs:
			set[(s+1)>>6] |= 1 << ((s + 1) & 63)
			set[(s+3)>>6] |= 1 << ((s + 3) & 63)
		}
	}
}
