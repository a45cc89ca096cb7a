package gitrules

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
)

// Options say where rules come from.
type Options struct {
	// Read reads a file relative to the project root (a slash path like
	// "sub/.gitignore", ".git/info/exclude", ".gitattributes"); it returns
	// an error satisfying errors.Is(err, fs.ErrNotExist) when the file is
	// absent. It is the caller's confined reader; git reads no rule file
	// that is a symbolic link, so Read should refuse one (confined does).
	Read func(path string) ([]byte, error)
	// Git: the project is a git work tree, so .git/info/exclude and
	// .git/info/attributes are read too.
	Git bool
	// Global is the owner's core.excludesFile contents (nil: none).
	Global []byte
	// GlobalAttributes is the owner's core.attributesFile contents.
	GlobalAttributes []byte
	// MaxFile bounds a rule file: a larger one is ignored, with an error
	// recorded (Errors). 0 means 1 MiB.
	MaxFile int64
}

// Rule says which rule decided.
type Rule struct {
	// Source is the file: ".gitignore", "sub/.gitignore",
	// ".git/info/exclude" or "core.excludesFile".
	Source string
	// Line is 1-based.
	Line int
	// Pattern is as written (trailing spaces trimmed, as git reports it).
	Pattern string
	// Negated: the pattern starts with ! (it re-includes).
	Negated bool
}

// Rules answer for the paths of one project. They are safe for concurrent
// use; each directory's rule files are read once, when first needed.
type Rules struct {
	opts  Options
	outer []*ignoreFile // info/exclude then core.excludesFile: below every .gitignore
	root  *Dir
	attrs attrCache

	mu   sync.RWMutex // guards every Dir's children and errs
	errs []error
}

// A Dir is a directory on a walk: Child(name) enters one, Ignored(name)
// answers for an entry in it, with the rules on its way already read.
type Dir struct {
	r        *Rules
	path     string      // from the root, "" for the root
	file     *ignoreFile // its .gitignore, nil when none
	up       *Dir        // the nearest directory above with a .gitignore
	excluded bool        // the directory, or one above it, is ignored
	rule     Rule        // what excluded it
	children map[string]*Dir
}

type ignoreFile struct {
	source string
	base   string // the directory it applies in, "" at the top
	lines  []ignoreLine
}

type ignoreLine struct {
	pattern
	line    int
	written string
}

// New returns the rules of one project. It reads the top-level rule
// files now and the others as paths reach them.
func New(opts Options) *Rules {
	if opts.MaxFile <= 0 {
		opts.MaxFile = 1 << 20
	}
	r := &Rules{opts: opts}
	if opts.Git {
		if f := r.parseIgnore(r.read(".git/info/exclude"), ".git/info/exclude", ""); f != nil {
			r.outer = append(r.outer, f)
		}
	}
	if f := r.parseIgnore(r.bounded("core.excludesFile", opts.Global), "core.excludesFile", ""); f != nil {
		r.outer = append(r.outer, f)
	}
	r.root = &Dir{r: r}
	r.root.file = r.parseIgnore(r.read(".gitignore"), ".gitignore", "")
	return r
}

// Errors are the problems met reading rule files so far (a file too large
// or unreadable is skipped, as git skips it). A missing file is no problem.
func (r *Rules) Errors() []error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]error(nil), r.errs...)
}

func (r *Rules) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// read returns a rule file's contents, nil when it is absent or cannot be
// used.
func (r *Rules) read(path string) []byte {
	if r.opts.Read == nil {
		return nil
	}
	data, err := r.opts.Read(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.fail(fmt.Errorf("gitrules: reading %q: %w", path, err))
		}
		return nil
	}
	return r.bounded(path, data)
}

func (r *Rules) bounded(source string, data []byte) []byte {
	if int64(len(data)) > r.opts.MaxFile {
		r.fail(fmt.Errorf("gitrules: %q has %d bytes, more than the %d a rule file may have: it is ignored", source, len(data), r.opts.MaxFile))
		return nil
	}
	return data
}

// parseIgnore reads an ignore file as git's add_patterns_from_buffer does;
// nil when it has no pattern.
func (r *Rules) parseIgnore(data []byte, source, base string) *ignoreFile {
	if len(data) == 0 {
		return nil
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	f := &ignoreFile{source: source, base: base}
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if i := bytes.IndexByte(line, 0); i >= 0 {
			line = line[:i] // git reads the line as a C string
		}
		written := trimTrailingSpaces(string(line))
		p := parsePattern(written)
		if p.text == "" {
			continue // matches nothing
		}
		f.lines = append(f.lines, ignoreLine{pattern: p, line: n, written: written})
	}
	if len(f.lines) == 0 {
		return nil
	}
	return f
}

// trimTrailingSpaces drops trailing spaces not escaped by a backslash.
func trimTrailingSpaces(s string) string {
	end := -1 // where the trailing run of spaces starts
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if end < 0 {
				end = i
			}
		case '\\':
			i++
			if i == len(s) {
				return s
			}
			end = -1
		default:
			end = -1
		}
	}
	if end >= 0 {
		return s[:end]
	}
	return s
}

// last is the last line of f matching path (its last element at
// path[baseAt:]).
func (f *ignoreFile) last(path string, baseAt int, isDir bool) (Rule, bool) {
	for i := len(f.lines) - 1; i >= 0; i-- {
		l := &f.lines[i]
		if l.matches(path, baseAt, isDir, f.base) {
			return Rule{Source: f.source, Line: l.line, Pattern: l.written, Negated: l.negated}, true
		}
	}
	return Rule{}, false
}

// Ignored answers for one path (slash-separated, from the root; empty
// elements are dropped) as git status would: a path under an ignored
// directory is ignored. The Rule is the one that decided (a negated one
// when it re-included the path), zero when none matched. What git never
// lists (.git, a tracked file) is the caller's to set apart.
func (r *Rules) Ignored(path string, isDir bool) (bool, Rule) {
	if strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
		path = cleanPath(path)
	}
	d := r.root
	start := 0
	for {
		i := strings.IndexByte(path[start:], '/')
		if i < 0 {
			break
		}
		d = d.child(path[start:start+i], path[:start+i])
		if d.excluded {
			return true, d.rule
		}
		start += i + 1
	}
	if path == "" {
		return false, Rule{}
	}
	return d.decide(path, start, isDir)
}

// cleanPath drops empty elements: a leading, trailing or doubled slash.
func cleanPath(path string) string {
	var elems []string
	for _, e := range strings.Split(path, "/") {
		if e != "" {
			elems = append(elems, e)
		}
	}
	return strings.Join(elems, "/")
}

// Root is the handle of the project's top directory.
func (r *Rules) Root() *Dir { return r.root }

// Child enters the directory name (one path element) in d, reading its
// .gitignore the first time. Below an ignored directory, every Child is
// that directory's handle: git reads no rule there. An empty name is d.
func (d *Dir) Child(name string) *Dir {
	if d.excluded || name == "" {
		return d
	}
	return d.child(name, join(d.path, name))
}

// Ignored answers for the entry name directly in d, as Rules.Ignored does.
func (d *Dir) Ignored(name string, isDir bool) (bool, Rule) {
	if d.excluded {
		return true, d.rule
	}
	path := join(d.path, name)
	return d.decide(path, len(path)-len(name), isDir)
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// child is the handle of d's subdirectory name, whose path is path.
func (d *Dir) child(name, path string) *Dir {
	if d.excluded {
		return d
	}
	r := d.r
	r.mu.RLock()
	c := d.children[name]
	r.mu.RUnlock()
	if c != nil {
		return c
	}
	path = strings.Clone(path) // kept: not a slice of the caller's string
	c = &Dir{r: r, path: path, up: d}
	if d.file == nil {
		c.up = d.up
	}
	c.excluded, c.rule = d.decide(path, len(path)-len(name), true)
	if !c.excluded {
		source := path + "/.gitignore"
		c.file = r.parseIgnore(r.read(source), source, path)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev := d.children[name]; prev != nil {
		return prev
	}
	if d.children == nil {
		d.children = map[string]*Dir{}
	}
	d.children[name] = c
	return c
}

// decide checks path, an entry of d whose last element starts at
// path[baseAt:], against the rules in precedence order: d's .gitignore,
// its parents' up to the root's, then info/exclude, then the global file.
func (d *Dir) decide(path string, baseAt int, isDir bool) (bool, Rule) {
	dir := d
	if d.file == nil {
		dir = d.up
	}
	for ; dir != nil; dir = dir.up {
		if rule, ok := dir.file.last(path, baseAt, isDir); ok {
			return !rule.Negated, rule
		}
	}
	for _, f := range d.r.outer {
		if rule, ok := f.last(path, baseAt, isDir); ok {
			return !rule.Negated, rule
		}
	}
	return false, Rule{}
}
