package gitrules

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOwnerGlobals: the owner's home comes from the passwd file by the
// project's uid; their config files name the global files (the XDG one
// first, ~/.gitconfig over it, includes where they stand, ~ expanded);
// unset, the XDG defaults; missing files are no error.
func TestOwnerGlobals(t *testing.T) {
	project := t.TempDir()
	fi, err := os.Stat(project)
	if err != nil {
		t.Fatal(err)
	}
	uid := fi.Sys().(*syscall.Stat_t).Uid

	cases := []struct {
		name      string
		files     map[string]string // under home
		ignore    string
		attrs     string
		wantError bool
	}{
		{name: "nothing at all"},
		{
			name:   "the XDG defaults",
			files:  map[string]string{".config/git/ignore": "*.swp\n", ".config/git/attributes": "*.bin binary\n"},
			ignore: "*.swp\n", attrs: "*.bin binary\n",
		},
		{
			name: "~/.gitconfig wins over the XDG config",
			files: map[string]string{
				".config/git/config": "[core]\n\texcludesFile = ~/xdg-ignore\n\tattributesFile = ~/xdg-attrs\n",
				".gitconfig":         "[Core]\n\tEXCLUDESFILE = \"~/my ignore\" ; a comment\n",
				"xdg-ignore":         "xdg\n", "xdg-attrs": "xdg attrs\n", "my ignore": "mine\n",
			},
			ignore: "mine\n", attrs: "xdg attrs\n",
		},
		{
			name: "an include, where it stands",
			files: map[string]string{
				".gitconfig": "[core]\n\texcludesfile = ~/before\n[include]\n\tpath = inc/more\n",
				"inc/more":   "[core]\n  excludesFile = ~/after\n",
				"after":      "after\n",
				"before":     "before\n",
			},
			ignore: "after\n",
		},
		{
			name:  "~user expands by the passwd file",
			files: map[string]string{".gitconfig": "[core]\nexcludesFile = ~other/ig\n"},
			// other's home is the same temp home in this test
		},
		{
			name:  "a relative path is the project's",
			files: map[string]string{".gitconfig": "[core]\nexcludesFile = rel-ignore\n"},
		},
		{
			name:      "a config that is not a config",
			files:     map[string]string{".gitconfig": "[core\nexcludesFile = x\n", ".config/git/ignore": "default\n"},
			ignore:    "default\n",
			wantError: true,
		},
		{
			name:      "an oversized ignore file",
			files:     map[string]string{".config/git/ignore": strings.Repeat("x", globalsMax+1)},
			wantError: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			for name, s := range c.files {
				write(t, filepath.Join(home, name), s)
			}
			if strings.Contains(c.name, "~user") {
				write(t, filepath.Join(home, "ig"), "other's\n")
				c.ignore = "other's\n"
			}
			if strings.Contains(c.name, "relative") {
				write(t, filepath.Join(project, "rel-ignore"), "project's\n")
				c.ignore = "project's\n"
			}
			passwd := filepath.Join(t.TempDir(), "passwd")
			write(t, passwd, fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nbroken line\nowner:x:%d:%d::%s:/bin/sh\nother:x:4242:4242::%s:/bin/sh\n", uid, uid, home, home))
			if uid == 0 {
				// The test runs as root: root's line is the owner's.
				write(t, passwd, fmt.Sprintf("root:x:0:0:root:%s:/bin/sh\nother:x:4242:4242::%s:/bin/sh\n", home, home))
			}
			ignore, attrs, err := ownerGlobals(project, passwd)
			if (err != nil) != c.wantError {
				t.Errorf("error %v, want one: %v", err, c.wantError)
			}
			if string(ignore) != c.ignore || string(attrs) != c.attrs {
				t.Errorf("ignore %q attributes %q, want %q %q", ignore, attrs, c.ignore, c.attrs)
			}
		})
	}
}

// TestOwnerGlobalsUnknownOwner: a uid without a passwd line is an error,
// not a guess.
func TestOwnerGlobalsUnknownOwner(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	write(t, passwd, "nobody:x:65534:65534::/nonexistent:/bin/false\n")
	if os.Getuid() == 65534 {
		t.Skip("runs as nobody")
	}
	if _, _, err := ownerGlobals(t.TempDir(), passwd); err == nil {
		t.Error("no error for an owner without a passwd line")
	}
}

// TestParseConfig: the value syntax of git config.
func TestParseConfig(t *testing.T) {
	cases := []struct{ in, want string }{
		{"[core]\nexcludesFile=a", "a"},
		{"[core]\n  excludesFile =   a b  \t ", "a b"},
		{"[core]\nexcludesFile = \"a  b\" # c", "a  b"},
		{"[core]\nexcludesFile = a\\\nb", "ab"},
		{"[core]\nexcludesFile = a\\tb", "a\tb"},
		{"[core]\nexcludesFile = a;b", "a"},
		{"[core \"sub\"]\nexcludesFile = no\n[core]\nexcludesFile = yes\n", "yes"},
		{"[core]\r\nexcludesFile = crlf\r\n", "crlf"},
		{"; comment\n[core]\n# comment\nbare\nexcludesFile = x", "x"},
	}
	for _, c := range cases {
		got := ""
		err := parseConfig([]byte(c.in), func(k, v string) error {
			if k == "core.excludesfile" {
				got = v
			}
			return nil
		})
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
		// git reads it so too.
		if _, err := exec.LookPath("git"); err == nil {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "config"), c.in)
			if out := gitRun(t, dir, nil, "config", "--file", "config", "--get", "core.excludesFile"); string(out) != c.want+"\n" {
				t.Errorf("%q: git reads %q", c.in, out)
			}
		}
	}
	for _, bad := range []string{"[core\nx=1", "[core]\nx = \"open", "[core]\nx = a\\q", "[core]\nx\x00=1"} {
		if err := parseConfig([]byte(bad), func(string, string) error { return nil }); err == nil {
			t.Errorf("%q: no error", bad)
		}
		if _, err := exec.LookPath("git"); err == nil {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "config"), bad)
			cmd := exec.Command("git", "config", "--file", "config", "--list")
			cmd.Dir = dir
			cmd.Env = []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "PATH=" + os.Getenv("PATH")}
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Errorf("%q: git reads it: %q", bad, out)
			}
		}
	}
}
