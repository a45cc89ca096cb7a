package gitrules

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"
)

// files is a project's rule files for a test: Read over a map.
type files map[string]string

func (f files) read(path string) ([]byte, error) {
	s, ok := f[path]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(s), nil
}

// TestPatternForms: each form of a .gitignore line, one line per case,
// answered as git answers (cases checked against git 2.39).
func TestPatternForms(t *testing.T) {
	cases := []struct {
		pattern string
		path    string
		dir     bool
		want    bool
	}{
		{"*.log", "a.log", false, true},
		{"*.log", "d/e/a.log", false, true},
		{"*.log", "a.log.txt", false, false},
		{"/a.log", "a.log", false, true},
		{"/a.log", "d/a.log", false, false},
		{"d/a.log", "d/a.log", false, true},
		{"d/a.log", "x/d/a.log", false, false}, // a middle slash anchors
		{"build/", "build", true, true},
		{"build/", "build", false, false},
		{"build/", "x/build/y", false, true}, // under an ignored directory
		{"a?c", "abc", false, true},
		{"a?c", "a/c", false, false},
		{"x/a?c", "x/a/c", false, false},
		{"[!a]b", "cb", false, true},
		{"[!a]b", "ab", false, false},
		{"[^a]b", "ab", false, false},
		{"[a-c]z", "bz", false, true},
		{"[a-c]z", "dz", false, false},
		{"[[:digit:]]x", "7x", false, true},
		{"[[:digit:]]x", "ax", false, false},
		{"[[:alpha:]]", "Q", false, true},
		{"[]]", "]", false, true},
		{"[a", "[a", false, false},        // an open class matches nothing
		{"[[:nope:]]", "n", false, false}, // nor does an unknown name
		{"\\#a", "#a", false, true},
		{"#a", "#a", false, false}, // a comment
		{"\\!a", "!a", false, true},
		{"a\\ ", "a ", false, true},
		{"a  ", "a", false, true}, // trailing spaces go
		{"a\\", "a", false, false},
		{"**/foo", "foo", false, true},
		{"**/foo", "x/y/foo", false, true},
		{"a/**", "a/b/c", false, true},
		{"a/**", "a", true, false},
		{"a/**/b", "a/b", false, true},
		{"a/**/b", "a/x/y/b", false, true},
		{"a**/b", "ax/y/b", false, true}, // git cuts the literal prefix first: ** then spans /
		{"x/a**b", "x/ay/zb", false, false},
		{"x/*", "x/y/z", false, true}, // x/y is ignored
		{"x/*/z", "x/y/w/z", false, false},
		{"A", "a", false, false}, // case-sensitive
	}
	for _, c := range cases {
		r := New(Options{Read: files{".gitignore": c.pattern + "\n"}.read})
		got, rule := r.Ignored(c.path, c.dir)
		if got != c.want {
			t.Errorf("pattern %q, path %q (dir %v): ignored %v, want %v (rule %+v)", c.pattern, c.path, c.dir, got, c.want, rule)
		}
	}
}

// TestPrecedence: later lines win, deeper files win, .gitignore beats
// info/exclude beats core.excludesFile, and nothing re-includes below an
// ignored directory.
func TestPrecedence(t *testing.T) {
	fs := files{
		".gitignore":        "*.tmp\n!keep.tmp\nlogs/\n",
		"sub/.gitignore":    "!*.tmp\n",
		"logs/.gitignore":   "!*\n",
		".git/info/exclude": "secret\n!*.bak\n",
	}
	r := New(Options{Read: fs.read, Git: true, Global: []byte("*.bak\n*.swp\nsecret\n")})
	cases := []struct {
		path string
		want bool
		rule Rule
	}{
		{"a.tmp", true, Rule{".gitignore", 1, "*.tmp", false}},
		{"keep.tmp", false, Rule{".gitignore", 2, "!keep.tmp", true}},
		{"sub/a.tmp", false, Rule{"sub/.gitignore", 1, "!*.tmp", true}},
		{"logs/x", true, Rule{".gitignore", 3, "logs/", false}},
		{"x.bak", false, Rule{".git/info/exclude", 2, "!*.bak", true}},
		{"x.swp", true, Rule{"core.excludesFile", 2, "*.swp", false}},
		{"secret", true, Rule{".git/info/exclude", 1, "secret", false}},
		{"plain", false, Rule{}},
	}
	for _, c := range cases {
		got, rule := r.Ignored(c.path, false)
		if got != c.want || rule != c.rule {
			t.Errorf("%s: %v %+v, want %v %+v", c.path, got, rule, c.want, c.rule)
		}
		// A walker's handles answer the same.
		d := r.Root()
		elems := strings.Split(c.path, "/")
		for _, e := range elems[:len(elems)-1] {
			d = d.Child(e)
		}
		if got2, rule2 := d.Ignored(elems[len(elems)-1], false); got2 != got || rule2 != rule {
			t.Errorf("%s by Dir: %v %+v, by path %v %+v", c.path, got2, rule2, got, rule)
		}
	}
	if errs := r.Errors(); len(errs) != 0 {
		t.Errorf("errors: %v", errs)
	}
}

// TestBadRuleFiles: a file over MaxFile is skipped with an error; junk,
// NUL bytes and invalid UTF-8 are patterns like others, never a panic.
func TestBadRuleFiles(t *testing.T) {
	r := New(Options{MaxFile: 10, Read: files{".gitignore": "a\nb\nc\nd\ne\nf\n"}.read})
	if got, _ := r.Ignored("a", false); got {
		t.Error("a file over MaxFile was read")
	}
	if len(r.Errors()) != 1 {
		t.Errorf("errors %v, want one", r.Errors())
	}
	r = New(Options{Read: func(string) ([]byte, error) { return nil, errors.New("boom") }})
	if len(r.Errors()) != 1 {
		t.Errorf("a read error: errors %v, want one", r.Errors())
	}
	junk := "\xff\xfe[\x00x\n\x00\n[[:\n\\\n!\n/\n**\x00\n\xc3(\n"
	r = New(Options{Read: files{".gitignore": junk, ".gitattributes": junk + " diff\n"}.read})
	if got, _ := r.Ignored("\xc3(", false); !got {
		t.Error("an invalid UTF-8 pattern does not match its own bytes")
	}
	r.Ignored("x/\x00/y", true)
	r.Attrs("\xff")
}

// TestNoBacktracking: matching costs the pattern's length times the
// path's, so a line of stars cannot stall a review (backtracking would
// take longer than the test's life here).
func TestNoBacktracking(t *testing.T) {
	name := strings.Repeat("a", 4000)
	for _, pat := range []string{strings.Repeat("*", 30) + "b", strings.Repeat("a*", 30) + "b", "x/" + strings.Repeat("*a", 30) + "b", strings.Repeat("**/a", 15) + "b"} {
		r := New(Options{Read: files{".gitignore": pat + "\n"}.read})
		start := time.Now()
		for _, p := range []string{name, "x/" + name, strings.Repeat("a/", 100) + name[:3000]} {
			if got, _ := r.Ignored(p, false); got {
				t.Errorf("%.20s… matched %.20s…", pat, p)
			}
		}
		t.Logf("%.20s…: %v", pat, time.Since(start))
	}
}

// TestConcurrent: one Rules answers many goroutines at once (run with
// -race), each directory's files read once however many ask.
func TestConcurrent(t *testing.T) {
	var mu sync.Mutex
	reads := map[string]int{}
	fs := files{".gitignore": "*.log\n", "a/.gitignore": "!x.log\n", "a/b/.gitattributes": "* -diff\n"}
	r := New(Options{Read: func(p string) ([]byte, error) {
		mu.Lock()
		reads[p]++
		mu.Unlock()
		return fs.read(p)
	}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 200 {
				p := fmt.Sprintf("a/b/c%d/x.log", i%10)
				if got, _ := r.Ignored(p, false); got {
					t.Errorf("%s ignored", p)
				}
				if _, ok := r.Generated(p); !ok {
					t.Errorf("%s not generated", p)
				}
			}
		})
	}
	wg.Wait()
	for p, n := range reads {
		if n > 8 {
			t.Errorf("%s read %d times", p, n)
		}
	}
}
