package gitrules

import (
	"bytes"
	"fmt"
	"github.com/airlock/airlock/testenv"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The differential tests build real trees with generated rules, ask git
// once per corpus (never once per path), and compare every path's answer.

// gitRun runs git in dir with a hermetic environment: no system config,
// a global config of the test's own, HOME in the test's temp dir.
func gitRun(t testing.TB, dir string, stdin []byte, args ...string) []byte {
	t.Helper()
	home := filepath.Join(dir, ".home")
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_ATTR_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + filepath.Join(home, "gitconfig"), "PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, stderr.Bytes())
	}
	return out
}

func needGit(t testing.TB) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git is not installed: the differential tests compare with it")
	}
}

// corpus is a generated project: its paths (directories end in /) and
// rule files.
type corpus struct {
	dir    string
	paths  []string
	files  map[string]string // rule files by path
	global string            // core.excludesFile
	gattr  string            // core.attributesFile
}

// names are the path elements a corpus is built from; patterns are built
// from the same, so they match often.
var names = []string{"a", "b", "ab", "abc", "ba", "x.log", "y.log", "a.txt", "B", "foo", "Foo", "foo.bar",
	"node_modules", "build", "dist", ".hidden", "a b", "t ", "#h", "!b", "[a]", "a*", "q?", "x\\y", "7", "_-", "ĉ"}

// genCorpus builds a corpus of about size paths.
func genCorpus(t testing.TB, seed uint64, size int, attrs bool) *corpus {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	c := &corpus{dir: t.TempDir(), files: map[string]string{}}
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		n := 4 + rng.IntN(12)
		for range n {
			name := names[rng.IntN(len(names))]
			if rng.IntN(2) == 0 {
				name += strconv.Itoa(rng.IntN(4))
			}
			p := name
			if dir != "" {
				p = dir + "/" + name
			}
			if slices.Contains(c.paths, p) || slices.Contains(c.paths, p+"/") {
				continue
			}
			if depth < 4 && len(c.paths) < size && rng.IntN(3) == 0 {
				c.paths = append(c.paths, p+"/")
				walk(p, depth+1)
			} else {
				c.paths = append(c.paths, p)
			}
		}
		if dir == "" || rng.IntN(3) == 0 {
			c.files[join(dir, ".gitignore")] = genRuleFile(rng, false)
		}
		if attrs && (dir == "" || rng.IntN(3) == 0) {
			c.files[join(dir, ".gitattributes")] = genRuleFile(rng, true)
		}
	}
	for len(c.paths) < size {
		walk("", 0)
	}
	c.files[".git/info/exclude"] = genRuleFile(rng, false)
	c.global = genRuleFile(rng, false)
	if attrs {
		c.files[".git/info/attributes"] = genRuleFile(rng, true)
		c.gattr = genRuleFile(rng, true)
	}

	// Parents come before their children in paths.
	for _, p := range c.paths {
		var err error
		if strings.HasSuffix(p, "/") {
			err = os.Mkdir(filepath.Join(c.dir, p), 0o755)
		} else {
			err = os.WriteFile(filepath.Join(c.dir, p), nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, c.dir, nil, "init", "-q", ".")
	for p, s := range c.files {
		if !strings.HasPrefix(p, ".git/") {
			c.paths = append(c.paths, p)
		}
		write(t, filepath.Join(c.dir, p), s)
	}
	home := filepath.Join(c.dir, ".home")
	write(t, filepath.Join(home, "ignore"), c.global)
	write(t, filepath.Join(home, "attributes"), c.gattr)
	write(t, filepath.Join(home, "gitconfig"), fmt.Sprintf("[core]\n\texcludesFile = %s\n\tattributesFile = %s\n", filepath.Join(home, "ignore"), filepath.Join(home, "attributes")))
	c.paths = append(c.paths, ".home/")
	write(t, filepath.Join(c.dir, ".gitignore"), c.files[".gitignore"]+"\n/.home/\n")
	c.files[".gitignore"] += "\n/.home/\n"
	return c
}

func write(t testing.TB, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rules are the corpus's rules as the package reads them.
func (c *corpus) rules() *Rules {
	return New(Options{
		Read:             func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(c.dir, p)) },
		Git:              true,
		Global:           []byte(c.global),
		GlobalAttributes: []byte(c.gattr),
	})
}

// genRuleFile writes 2-12 lines of the grammar: comments, blanks, and
// patterns of every form (attributes: with assignments, no negation).
func genRuleFile(rng *rand.Rand, attrs bool) string {
	var b strings.Builder
	if rng.IntN(10) == 0 {
		b.WriteString("\xef\xbb\xbf") // a byte-order mark
	}
	for range 2 + rng.IntN(11) {
		switch rng.IntN(20) {
		case 0:
			b.WriteString("# a comment\n")
			continue
		case 1:
			b.WriteString("\n")
			continue
		case 2:
			if attrs {
				b.WriteString("[attr]mac" + strconv.Itoa(rng.IntN(2)) + " " + genAssigns(rng) + "\n")
				continue
			}
		}
		p := genPattern(rng, attrs)
		switch {
		case attrs && rng.IntN(8) == 0:
			// Quoted, with what only quotes hold: spaces, escapes.
			q := []string{"a b", "t ", "a b1", "x\\y", "**/a b", "foo"}[rng.IntN(6)]
			p = strconv.Quote(q)
			if rng.IntN(2) == 0 {
				p = strings.ReplaceAll(p, " ", `\040`)
			}
			p += " " + genAssigns(rng)
		case attrs && rng.IntN(30) == 0:
			p += " " + strings.Repeat("long ", attrMaxLine/5) // git skips the line
		case attrs:
			p += " " + genAssigns(rng)
		case rng.IntN(30) == 0:
			p += "\x00tail" // git reads up to the NUL
		}
		b.WriteString(p)
		if rng.IntN(10) == 0 {
			b.WriteString("\r")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func genPattern(rng *rand.Rand, attrs bool) string {
	var b strings.Builder
	if !attrs && rng.IntN(5) == 0 {
		b.WriteString("!")
	} else if rng.IntN(15) == 0 {
		b.WriteString([]string{"\\#", "\\!"}[rng.IntN(2)])
	}
	if rng.IntN(5) == 0 {
		b.WriteString("/")
	}
	segs := 1 + rng.IntN(3)
	if rng.IntN(3) == 0 {
		segs = 1
	}
	for i := range segs {
		if i > 0 {
			b.WriteString("/")
		}
		b.WriteString(genSegment(rng, segs))
	}
	if rng.IntN(4) == 0 {
		b.WriteString("/")
	}
	if !attrs {
		switch rng.IntN(12) {
		case 0:
			b.WriteString("  ")
		case 1:
			b.WriteString("\\ ")
		}
	}
	return b.String()
}

// genSegment is one path element of a pattern: mostly a name or a part of
// one with a wildcard in it, sometimes a bare * or **.
func genSegment(rng *rand.Rand, segs int) string {
	switch rng.IntN(20) {
	case 0, 1:
		if segs > 1 {
			return "**"
		}
	case 2:
		return "*"
	}
	n := names[rng.IntN(len(names))]
	if rng.IntN(3) == 0 {
		n += strconv.Itoa(rng.IntN(4))
	}
	if rng.IntN(3) == 0 && len(n) > 1 {
		i := rng.IntN(len(n))
		n = n[:i] + n[i+1:] // a fragment
	}
	n = strings.ReplaceAll(n, " ", "?")
	for range rng.IntN(3) {
		i := rng.IntN(len(n) + 1)
		n = n[:i] + genWildcard(rng) + n[i:]
	}
	return n
}

func genWildcard(rng *rand.Rand) string {
	switch rng.IntN(6) {
	case 0, 1:
		return "*"
	case 2:
		return "?"
	case 3:
		return genClass(rng)
	case 4:
		return "**"
	default:
		return "\\" + string("*?[ab#!\\ "[rng.IntN(9)])
	}
}

func genClass(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("[")
	switch rng.IntN(6) {
	case 0:
		b.WriteString("!")
	case 1:
		b.WriteString("^")
	}
	for range 1 + rng.IntN(3) {
		b.WriteString([]string{"a", "b", "x", "a-c", "A-Z", "]", "\\]", "-", "[:alpha:]", "[:digit:]", "[:punct:]",
			"[:upper:]", "[:space:]", "[:xdigit:]", "[:lower:]", "[:alnum:]", "[", "/", ".", "z-a"}[rng.IntN(20)])
	}
	switch rng.IntN(25) {
	case 0: // left open
	case 1:
		b.WriteString("[:nope:]]")
	default:
		b.WriteString("]")
	}
	return b.String()
}

func genAssigns(rng *rand.Rand) string {
	var out []string
	for range 1 + rng.IntN(3) {
		out = append(out, []string{"text", "-text", "!text", "diff", "-diff", "binary", "linguist-generated",
			"linguist-generated=true", "foo=bar", "foo=baz", "eol=lf", "mac0", "mac1", "-mac1", "!diff", "-bad=x", "a.b_c-d"}[rng.IntN(17)])
	}
	return strings.Join(out, " ")
}

// splitZ splits git's -z output.
func splitZ(out []byte) []string {
	s := strings.Split(string(out), "\x00")
	if len(s) > 0 && s[len(s)-1] == "" {
		s = s[:len(s)-1]
	}
	return s
}

// TestMatchesGit compares every path of several generated corpora with
// git. Ignoring: files with `git ls-files` (what git status shows as
// ignored or untracked), every path and the deciding rule with one
// `git check-ignore -v -n --no-index --stdin` call. Attributes: every
// file with one `git check-attr -a --stdin` call.
func TestMatchesGit(t *testing.T) {
	needGit(t)
	total := 0
	for seed := range uint64(5) {
		c := genCorpus(t, seed+1, 1000, true)
		r := c.rules()
		compareIgnored(t, c, r, seed+1)
		compareAttrs(t, c, r, seed+1)
		if errs := r.Errors(); len(errs) != 0 {
			t.Errorf("seed %d: errors %v", seed+1, errs)
		}
		total += len(c.paths)
	}
	t.Logf("%d paths compared", total)
}

func compareIgnored(t *testing.T, c *corpus, r *Rules, seed uint64) {
	ignored := splitZ(gitRun(t, c.dir, nil, "ls-files", "-z", "--others", "--ignored", "--exclude-standard"))
	shown := splitZ(gitRun(t, c.dir, nil, "ls-files", "-z", "--others", "--exclude-standard"))
	for _, p := range ignored {
		if got, rule := r.Ignored(p, false); !got {
			t.Errorf("seed %d: %q: git ignores it, we do not (rule %+v)\n%s", seed, p, rule, c.rulesFor(p))
		}
	}
	for _, p := range shown {
		if got, rule := r.Ignored(p, false); got {
			t.Errorf("seed %d: %q: git does not ignore it, we do (rule %+v)\n%s", seed, p, rule, c.rulesFor(p))
		}
	}
	t.Logf("seed %d: %d paths, git ignores %d of %d files", seed, len(c.paths), len(ignored), len(ignored)+len(shown))

	var in bytes.Buffer
	for _, p := range c.paths {
		in.WriteString(strings.TrimSuffix(p, "/") + "\x00")
	}
	out := splitZ(gitRun(t, c.dir, in.Bytes(), "check-ignore", "-z", "-v", "-n", "--no-index", "--stdin"))
	if len(out) != 4*len(c.paths) {
		t.Fatalf("check-ignore gave %d fields for %d paths", len(out), len(c.paths))
	}
	for i, p := range c.paths {
		f := out[4*i : 4*i+4]
		isDir := strings.HasSuffix(p, "/")
		p = strings.TrimSuffix(p, "/")
		if f[3] != p {
			t.Fatalf("check-ignore answered %q for %q", f[3], p)
		}
		want := Rule{}
		if f[0] != "" {
			want.Source = f[0]
			if f[0] == filepath.Join(c.dir, ".home", "ignore") {
				want.Source = "core.excludesFile"
			}
			want.Line, _ = strconv.Atoi(f[1])
			want.Pattern = f[2]
			want.Negated = strings.HasPrefix(f[2], "!")
		}
		got, rule := r.Ignored(p, isDir)
		if rule != want || got != (want.Source != "" && !want.Negated) {
			t.Errorf("seed %d: %q (dir %v): %v %+v, git %+v\n%s", seed, p, isDir, got, rule, want, c.rulesFor(p))
		}
		// A walker's handles answer the same.
		d := r.Root()
		elems := strings.Split(p, "/")
		for _, e := range elems[:len(elems)-1] {
			d = d.Child(e)
		}
		if got2, rule2 := d.Ignored(elems[len(elems)-1], isDir); got2 != got || rule2 != rule {
			t.Errorf("seed %d: %q by Dir: %v %+v, by path %v %+v", seed, p, got2, rule2, got, rule)
		}
	}
}

func compareAttrs(t *testing.T, c *corpus, r *Rules, seed uint64) {
	var in bytes.Buffer
	var files []string
	for _, p := range c.paths {
		if !strings.HasSuffix(p, "/") {
			files = append(files, p)
			in.WriteString(p + "\x00")
		}
	}
	out := splitZ(gitRun(t, c.dir, in.Bytes(), "check-attr", "-z", "-a", "--stdin"))
	want := map[string]map[string]string{}
	for i := 0; i+2 < len(out); i += 3 {
		if want[out[i]] == nil {
			want[out[i]] = map[string]string{}
		}
		want[out[i]][out[i+1]] = out[i+2]
	}
	set := 0
	for _, p := range files {
		got := map[string]string{}
		for name, a := range r.Attrs(p) {
			got[name] = map[AttrState]string{Set: "set", Unset: "unset", Value: a.Value}[a.State]
		}
		if w := want[p]; len(got) != len(w) || !maps.Equal(got, w) {
			t.Errorf("seed %d: %q: attributes %v, git %v\n%s", seed, p, got, w, c.attrsFor(p))
		}
		if len(got) > 0 {
			set++
		}
		if reason, ok := r.Generated(p); ok != (got["linguist-generated"] == "set" || got["linguist-generated"] == "true" || got["diff"] == "unset") {
			t.Errorf("seed %d: %q: Generated %q %v with attributes %v", seed, p, reason, ok, got)
		}
	}
	t.Logf("seed %d: %d of %d files have attributes", seed, set, len(files))
}

func parents(p string) []string {
	var dirs []string
	for i := range p {
		if p[i] == '/' {
			dirs = append(dirs, p[:i])
		}
	}
	return dirs
}

// rulesFor and attrsFor show the rule files on p's way, for a failure's
// message.
func (c *corpus) rulesFor(p string) string {
	return c.filesFor(p, ".gitignore", ".git/info/exclude", c.global)
}

func (c *corpus) attrsFor(p string) string {
	return c.filesFor(p, ".gitattributes", ".git/info/attributes", c.gattr)
}

func (c *corpus) filesFor(p, name, info, global string) string {
	var b strings.Builder
	for _, d := range append([]string{""}, parents(p)...) {
		if s, ok := c.files[join(d, name)]; ok {
			fmt.Fprintf(&b, "%s:\n%q\n", join(d, name), s)
		}
	}
	fmt.Fprintf(&b, "%s: %q\nglobal: %q\n", info, c.files[info], global)
	return b.String()
}
