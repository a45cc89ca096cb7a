package gitrules

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FuzzIgnore: any rules and any path never panic; a walk's handles answer
// as Rules.Ignored does; and, when git is installed, git agrees on the
// answer and the deciding rule. Each input's rules go to a fresh
// directory of one repository that one long-lived `git check-ignore
// --stdin` reads paths from (git reads a directory's .gitignore when a
// path first reaches it), so no input starts a git of its own.
func FuzzIgnore(f *testing.F) {
	seeds := []struct {
		rules, path string
		dir         bool
	}{
		{"*.log\n!keep.log\n", "a/keep.log", false},
		{"node_modules/\n", "node_modules/x/y.js", false},
		{"/build\n", "build", true},
		{"a/**/b\n", "a/x/y/b", false},
		{"**/foo\n", "foo", true},
		{"foo**/bar\n", "foox/y/bar", false},
		{"[!a-c]?[[:digit:]]x\n", "d07x", false},
		{"\\#x\\ \\!\n", "#x !", false},
		{"x\\\n", "x", false},
		{"[[:nope:]]\n[a\n", "[a", false},
		{strings.Repeat("*", 40) + "b\n", strings.Repeat("a", 300), false},
		{"\xef\xbb\xbfa\r\n \n#c\n", "a", false},
	}
	for _, s := range seeds {
		f.Add(s.rules, s.path, s.dir)
	}
	f.Fuzz(func(t *testing.T, rules, path string, isDir bool) {
		r := New(Options{Read: files{".gitignore": rules, "a/.gitignore": rules, ".gitattributes": rules, "a/.gitattributes": rules}.read, Git: true, Global: []byte(rules)})
		got, rule := r.Ignored(path, isDir)
		r.Attrs(path)
		r.Generated(path)
		if path != "" && !strings.HasSuffix(path, "/") {
			d := r.Root()
			elems := strings.Split(path, "/")
			for _, e := range elems[:len(elems)-1] {
				d = d.Child(e)
			}
			if got2, rule2 := d.Ignored(elems[len(elems)-1], isDir); got2 != got || rule2 != rule {
				t.Fatalf("by Dir %v %+v, by path %v %+v", got2, rule2, got, rule)
			}
		}
		if !gitPath(path) || len(rules) > 4096 {
			return
		}
		o := startOracle(t)
		if o == nil {
			return
		}
		got, rule, want := o.check(t, rules, path, isDir)
		if rule != want || got != (want.Source != "" && !want.Negated) {
			t.Fatalf("rules %q, path %q (dir %v): %v %+v, git %+v", rules, path, isDir, got, rule, want)
		}
	})
}

// gitPath: a path git takes as is (and this test can create).
func gitPath(p string) bool {
	if p == "" || len(p) > 1000 || strings.ContainsRune(p, 0) {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." || strings.EqualFold(e, ".git") || e == ".gitignore" || len(e) > 200 {
			return false
		}
	}
	return true
}

// oracle is a git check-ignore reading paths, over a repository that
// grows one directory per input, and our rules over the same files.
type oracle struct {
	dir   string
	in    io.Writer
	out   *bufio.Reader
	n     int
	rules *Rules
}

var fuzzOracle struct {
	once sync.Once
	o    *oracle
}

// startOracle returns the process's oracle, nil without git.
func startOracle(t *testing.T) *oracle {
	fuzzOracle.once.Do(func() {
		if _, err := exec.LookPath("git"); err != nil {
			return
		}
		dir, err := os.MkdirTemp(os.Getenv(fuzzRootEnv), "oracle-")
		if err != nil {
			return
		}
		gitRun(t, dir, nil, "init", "-q", ".")
		home := filepath.Join(dir, ".home")
		cmd := exec.Command("git", "check-ignore", "-z", "-v", "-n", "--no-index", "--stdin")
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + filepath.Join(home, "gitconfig"), "PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
		in, err := cmd.StdinPipe()
		if err != nil {
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil || cmd.Start() != nil {
			return
		}
		fuzzOracle.o = &oracle{dir: dir, in: in, out: bufio.NewReader(out),
			rules: New(Options{Git: true, Read: func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, p)) }})}
	})
	return fuzzOracle.o
}

// check writes rules to a fresh directory, creates path there, asks
// both, and removes the directory.
func (o *oracle) check(t *testing.T, rules, path string, isDir bool) (bool, Rule, Rule) {
	o.n++
	base := "c" + strconv.Itoa(o.n)
	full := base + "/" + path
	write(t, filepath.Join(o.dir, base, ".gitignore"), rules)
	if isDir {
		if err := os.MkdirAll(filepath.Join(o.dir, full), 0o755); err != nil {
			t.Fatal(err)
		}
	} else {
		write(t, filepath.Join(o.dir, full), "")
	}
	if _, err := io.WriteString(o.in, full+"\x00"); err != nil {
		t.Fatal(err)
	}
	var f [4]string
	for i := range f {
		s, err := o.out.ReadString(0)
		if err != nil {
			t.Fatalf("git check-ignore: %v", err)
		}
		f[i] = strings.TrimSuffix(s, "\x00")
	}
	if f[3] != full {
		t.Fatalf("git answered for %q, asked %q", f[3], full)
	}
	var want Rule
	if f[0] != "" {
		line, _ := strconv.Atoi(f[1])
		want = Rule{Source: f[0], Line: line, Pattern: f[2], Negated: strings.HasPrefix(f[2], "!")}
	}
	got, rule := o.rules.Ignored(full, isDir)
	// git has left the directory (it asks for the next path elsewhere).
	if err := os.RemoveAll(filepath.Join(o.dir, base)); err != nil {
		t.Fatal(err)
	}
	return got, rule, want
}

// TestMain makes the directory fuzz oracles work in and removes it at the
// end. Fuzz workers are this binary's children, killed when the time is
// up: they inherit the directory (through the environment) and leave the
// removal to the parent.
func TestMain(m *testing.M) {
	if os.Getenv(fuzzRootEnv) != "" {
		os.Exit(m.Run())
	}
	root, err := os.MkdirTemp("", "gitrules-fuzz-")
	if err != nil {
		panic(err)
	}
	os.Setenv(fuzzRootEnv, root)
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}

const fuzzRootEnv = "GITRULES_FUZZ_ROOT"
