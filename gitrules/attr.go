package gitrules

import (
	"bytes"
	"strings"
	"sync"
)

// AttrState is how a path's attribute is set.
type AttrState uint8

const (
	Unspecified AttrState = iota // no rule says (or a rule said !name)
	Set                          // name
	Unset                        // -name
	Value                        // name=value
)

// Attr is one attribute of a path.
type Attr struct {
	State AttrState
	Value string // for Value
}

// attrBuiltin is git's own macro, below every file.
const attrBuiltin = "[attr]binary -diff -merge -text\n"

// git ignores longer lines of an attributes file.
const attrMaxLine = 2048

type attrFile struct {
	base  string // the directory it applies in, "" at the top
	lines []attrLine
}

// attrLine is a pattern (or, for a macro definition, a name) and what it
// assigns, in the order written.
type attrLine struct {
	pattern pattern
	macro   string
	assigns []attrAssign
}

type attrAssign struct {
	name string
	attr Attr // Unspecified for !name
}

// attrCache holds the attribute files: the top ones read once, each
// directory's as paths reach it.
type attrCache struct {
	once               sync.Once
	info, root, global *attrFile
	macros             map[string][]attrAssign
	mu                 sync.RWMutex
	dirs               map[string]*attrFile // nil value: no .gitattributes there
}

func (r *Rules) loadTopAttrs() {
	c := &r.attrs
	if r.opts.Git {
		c.info = parseAttrs(r.read(".git/info/attributes"), "", true)
	}
	c.root = parseAttrs(r.read(".gitattributes"), "", true)
	c.global = parseAttrs(r.bounded("core.attributesFile", r.opts.GlobalAttributes), "", true)
	builtin := parseAttrs([]byte(attrBuiltin), "", true)
	// The definition nearest the top of git's stack wins: info, the
	// root's, the global file's, git's own; in a file, the last.
	c.macros = map[string][]attrAssign{}
	for _, f := range []*attrFile{c.info, c.root, c.global, builtin} {
		if f == nil {
			continue
		}
		for i := len(f.lines) - 1; i >= 0; i-- {
			l := f.lines[i]
			if _, ok := c.macros[l.macro]; l.macro != "" && !ok {
				c.macros[l.macro] = l.assigns
			}
		}
	}
	c.dirs = map[string]*attrFile{}
}

// dir is the .gitattributes of directory path (not the root), read once.
func (r *Rules) attrDir(path string) *attrFile {
	c := &r.attrs
	c.mu.RLock()
	f, ok := c.dirs[path]
	c.mu.RUnlock()
	if ok {
		return f
	}
	path = strings.Clone(path)
	f = parseAttrs(r.read(path+"/.gitattributes"), path, false)
	c.mu.Lock()
	c.dirs[path] = f
	c.mu.Unlock()
	return f
}

// Attr is the attribute name of path (slash-separated, from the root; a
// trailing slash makes it a directory, which only then matches patterns
// ending in /).
func (r *Rules) Attr(path, name string) Attr {
	return r.attrsOf(path)[name]
}

// Attrs are every attribute path has that is not Unspecified, as
// `git check-attr -a` lists them.
func (r *Rules) Attrs(path string) map[string]Attr {
	all := r.attrsOf(path)
	for name, a := range all {
		if a.State == Unspecified {
			delete(all, name)
		}
	}
	return all
}

// Generated says whether path's attributes mark it generated: why
// ("linguist-generated" or "-diff", binary included) and true when so.
func (r *Rules) Generated(path string) (reason string, ok bool) {
	all := r.attrsOf(path)
	if a := all["linguist-generated"]; a.State == Set || a.State == Value && a.Value == "true" {
		return "linguist-generated", true
	}
	if all["diff"].State == Unset {
		return "-diff", true
	}
	return "", false
}

// attrsOf is every attribute a rule decided for path, Unspecified
// included, as git's fill does: files from the highest precedence down
// (info/attributes, the deepest .gitattributes, ... the root's, the global
// file), lines from the last, and the first to decide an attribute wins.
func (r *Rules) attrsOf(path string) map[string]Attr {
	r.attrs.once.Do(r.loadTopAttrs)
	c := &r.attrs
	isDir := strings.HasSuffix(path, "/")
	name := strings.TrimSuffix(path, "/")
	baseAt := strings.LastIndexByte(name, '/') + 1

	var got map[string]Attr
	var fill func([]attrAssign)
	fill = func(assigns []attrAssign) {
		for i := len(assigns) - 1; i >= 0; i-- {
			a := assigns[i]
			if _, done := got[a.name]; done {
				continue
			}
			got[a.name] = a.attr
			if m, ok := c.macros[a.name]; ok && a.attr.State == Set {
				fill(m)
			}
		}
	}
	apply := func(f *attrFile) {
		if f == nil {
			return
		}
		for i := len(f.lines) - 1; i >= 0; i-- {
			l := &f.lines[i]
			if l.macro == "" && l.pattern.matches(name, baseAt, isDir, f.base) {
				if got == nil {
					got = map[string]Attr{}
				}
				fill(l.assigns)
			}
		}
	}
	apply(c.info)
	for end := baseAt - 1; end > 0; end = strings.LastIndexByte(name[:end], '/') {
		apply(r.attrDir(name[:end]))
	}
	apply(c.root)
	apply(c.global)
	return got
}

// blank is what separates fields on an attributes line.
const blank = " \t\r\n"

// parseAttrs reads an attributes file as git's read_attr_from_file does;
// macros may be defined only in the top files. nil when it has no line.
func parseAttrs(data []byte, base string, macros bool) *attrFile {
	if len(data) == 0 {
		return nil
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	f := &attrFile{base: base}
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if i := bytes.IndexByte(line, 0); i >= 0 {
			line = line[:i]
		}
		if l, ok := parseAttrLine(string(line), macros); ok {
			f.lines = append(f.lines, l)
		}
	}
	if len(f.lines) == 0 {
		return nil
	}
	return f
}

// parseAttrLine parses one line as git's parse_attr_line does; false when
// git ignores it (a comment, a bad name, a negative pattern, a macro
// where none may be defined, an overlong line).
func parseAttrLine(line string, macroOK bool) (attrLine, bool) {
	var l attrLine
	cp := strings.TrimLeft(line, blank)
	if cp == "" || cp[0] == '#' || len(line) >= attrMaxLine {
		return l, false
	}
	var name, states string
	if unq, rest, ok := unquoteC(cp); ok {
		name, states = unq, rest
	} else {
		n := cspn(cp, blank)
		name, states = cp[:n], cp[n:]
	}
	const macroPrefix = "[attr]"
	if len(name) > len(macroPrefix) && strings.HasPrefix(name, macroPrefix) {
		if !macroOK {
			return l, false
		}
		m := strings.TrimLeft(name[len(macroPrefix):], blank)
		m = m[:cspn(m, blank)]
		if !validAttrName(m) {
			return l, false
		}
		l.macro = m
	} else {
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		l.pattern = parsePattern(name)
		if l.pattern.negated {
			return l, false
		}
	}
	for cp := strings.TrimLeft(states, blank); cp != ""; {
		a, rest, ok := parseAttrAssign(cp)
		if !ok {
			return l, false
		}
		l.assigns = append(l.assigns, a)
		cp = rest
	}
	return l, true
}

// parseAttrAssign reads one name, -name, !name or name=value.
func parseAttrAssign(cp string) (attrAssign, string, bool) {
	ep := cspn(cp, blank)
	tok, rest := cp[:ep], strings.TrimLeft(cp[ep:], blank)
	var a attrAssign
	name, value, hasValue := strings.Cut(tok, "=")
	switch {
	case name != "" && name[0] == '-':
		name, a.attr = name[1:], Attr{State: Unset}
	case name != "" && name[0] == '!':
		name, a.attr = name[1:], Attr{State: Unspecified}
	case hasValue:
		a.attr = Attr{State: Value, Value: value}
	default:
		a.attr = Attr{State: Set}
	}
	if !validAttrName(name) {
		return a, "", false
	}
	a.name = name
	return a, rest, true
}

// validAttrName: [-A-Za-z0-9_.]+, not starting with -.
func validAttrName(s string) bool {
	if s == "" || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || c == '.' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// cspn is the length of s's leading part with no byte of set.
func cspn(s, set string) int {
	if i := strings.IndexAny(s, set); i >= 0 {
		return i
	}
	return len(s)
}

// unquoteC reads a C-quoted string at the start of s as git's
// unquote_c_style does: the string and what follows the closing quote.
func unquoteC(s string) (string, string, bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		i++
		switch c {
		case '"':
			return b.String(), s[i:], true
		case '\\':
		default:
			b.WriteByte(c)
			continue
		}
		if i >= len(s) {
			return "", "", false
		}
		c = s[i]
		i++
		switch c {
		case 'a':
			c = '\a'
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'v':
			c = '\v'
		case '\\', '"':
		case '0', '1', '2', '3':
			if i+2 > len(s) || s[i] < '0' || s[i] > '7' || s[i+1] < '0' || s[i+1] > '7' {
				return "", "", false
			}
			c = (c-'0')<<6 | (s[i]-'0')<<3 | (s[i+1] - '0')
			i += 2
		default:
			return "", "", false
		}
		b.WriteByte(c)
	}
	return "", "", false
}
