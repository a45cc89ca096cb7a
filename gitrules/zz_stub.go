// Package gitrules: TEMPORARY stub of the API the gitrules branch
// delivers, so the review's integration compiles before it is merged.
// Deleted by the merge.
package gitrules

import (
	"path"
	"strings"
)

type Options struct {
	Read             func(path string) ([]byte, error)
	Git              bool
	Global           []byte
	GlobalAttributes []byte
	MaxFile          int64
}

type Rule struct {
	Source  string
	Line    int
	Pattern string
	Negated bool
}

type Rules struct{ opts Options }

func New(opts Options) *Rules { return &Rules{opts: opts} }

type Dir struct {
	r     *Rules
	rel   string
	rules []Rule
}

func (r *Rules) Root() *Dir { return r.load("") }

func (r *Rules) load(rel string) *Dir {
	d := &Dir{r: r, rel: rel}
	src := ".gitignore"
	if rel != "" {
		src = rel + "/.gitignore"
	}
	if r.opts.Read == nil {
		return d
	}
	b, err := r.opts.Read(src)
	if err != nil {
		return d
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		d.rules = append(d.rules, Rule{Source: src, Line: i + 1, Pattern: line})
	}
	return d
}

func (d *Dir) Child(name string) *Dir {
	rel := name
	if d.rel != "" {
		rel = d.rel + "/" + name
	}
	c := d.r.load(rel)
	c.rules = append(append([]Rule{}, d.rules...), c.rules...)
	return c
}

func (d *Dir) Ignored(name string, isDir bool) (bool, Rule) {
	ign, by := false, Rule{}
	for _, r := range d.rules {
		p, neg := r.Pattern, false
		if strings.HasPrefix(p, "!") {
			p, neg = p[1:], true
		}
		dirOnly := strings.HasSuffix(p, "/")
		p = strings.Trim(p, "/")
		if dirOnly && !isDir {
			continue
		}
		if ok, _ := path.Match(p, name); ok {
			ign, by = !neg, r
		}
	}
	return ign, by
}

func (r *Rules) Ignored(p string, isDir bool) (bool, Rule) {
	d := r.Root()
	parts := strings.Split(p, "/")
	for i, part := range parts {
		last := i == len(parts)-1
		if ig, rule := d.Ignored(part, isDir || !last); ig {
			return true, rule
		}
		if !last {
			d = d.Child(part)
		}
	}
	return false, Rule{}
}

type AttrState int

const (
	Unspecified AttrState = iota
	Set
	Unset
	Value
)

type Attr struct {
	State AttrState
	Value string
}

func (r *Rules) Attr(p, name string) Attr { return Attr{} }

func (r *Rules) Generated(p string) (string, bool) { return "", false }

func OwnerGlobals(projectDir string) (ignore, attributes []byte, err error) { return nil, nil, nil }
