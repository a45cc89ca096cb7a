package gitrules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// globalsMax bounds every file OwnerGlobals reads (passwd excepted).
const globalsMax = 1 << 20

// OwnerGlobals reads, as data, the global ignore and attributes files of
// the project's owner (the uid owning projectDir, whose home /etc/passwd
// gives): core.excludesFile and core.attributesFile from their
// ~/.config/git/config and ~/.gitconfig (the latter wins, include.path
// followed; includeIf is not), ~ expanded, and when unset
// ~/.config/git/ignore and ~/.config/git/attributes. A missing file is
// nil, not an error; an unreadable or oversized one is left out with an
// error, the other still returned.
func OwnerGlobals(projectDir string) (ignore, attributes []byte, err error) {
	return ownerGlobals(projectDir, "/etc/passwd")
}

func ownerGlobals(projectDir, passwdPath string) ([]byte, []byte, error) {
	fi, err := os.Stat(projectDir)
	if err != nil {
		return nil, nil, fmt.Errorf("gitrules: the project's owner: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, nil, fmt.Errorf("gitrules: the owner of %q is unknown on this system", projectDir)
	}
	users, err := readPasswd(passwdPath)
	if err != nil {
		return nil, nil, err
	}
	home, ok := users.byUID[st.Uid]
	if !ok {
		return nil, nil, fmt.Errorf("gitrules: uid %d, the owner of %q, has no entry in %s", st.Uid, projectDir, passwdPath)
	}
	return globalsIn(home, projectDir, users)
}

// passwd is what OwnerGlobals needs of /etc/passwd: homes by uid and name.
type passwd struct {
	byUID  map[uint32]string
	byName map[string]string
}

func readPasswd(path string) (passwd, error) {
	users := passwd{byUID: map[uint32]string{}, byName: map[string]string{}}
	data, err := readBounded(path, 16<<20)
	if err != nil {
		return users, fmt.Errorf("gitrules: reading the user database: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 || f[5] == "" {
			continue
		}
		uid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		if _, dup := users.byUID[uint32(uid)]; !dup {
			users.byUID[uint32(uid)] = f[5] // the first entry wins, as getpwuid's
		}
		if _, dup := users.byName[f[0]]; !dup {
			users.byName[f[0]] = f[5]
		}
	}
	return users, nil
}

// globalsIn reads the global files of the user whose home is home; a
// relative core.excludesFile is relative to the project (git runs at the
// top of the work tree).
func globalsIn(home, projectDir string, users passwd) (ignore, attributes []byte, err error) {
	c := &configReader{home: home, users: users, values: map[string]string{}}
	var errs []error
	for _, name := range []string{filepath.Join(home, ".config/git/config"), filepath.Join(home, ".gitconfig")} {
		if err := c.load(name, 0); err != nil {
			errs = append(errs, err)
		}
	}
	read := func(key, fallback string) []byte {
		path, ok := c.values[key]
		if !ok || path == "" {
			path = filepath.Join(home, fallback)
		} else if path = c.expand(path); !filepath.IsAbs(path) {
			path = filepath.Join(projectDir, path)
		}
		data, err := readBounded(path, globalsMax)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("gitrules: %s: %w", key, err))
		}
		return data
	}
	ignore = read("core.excludesfile", ".config/git/ignore")
	attributes = read("core.attributesfile", ".config/git/attributes")
	return ignore, attributes, errors.Join(errs...)
}

// readBounded reads a regular file (a FIFO or device is refused, never
// opened for a blocking read) of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%q is larger than %d bytes", path, max)
	}
	return data, nil
}

// configReader reads git config files for the few keys OwnerGlobals
// needs; values maps "section.key" (lower case) to its last value.
type configReader struct {
	home   string
	users  passwd
	values map[string]string
}

// load reads one config file; include.path is followed where it stands,
// as git does, up to git's depth of 10.
func (c *configReader) load(path string, depth int) error {
	if depth > 10 {
		return fmt.Errorf("gitrules: %q: includes nested more than 10 deep", path)
	}
	data, err := readBounded(path, globalsMax)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gitrules: reading %q: %w", path, err)
	}
	return parseConfig(data, func(key, value string) error {
		if key == "include.path" {
			inc := c.expand(value)
			if !filepath.IsAbs(inc) {
				inc = filepath.Join(filepath.Dir(path), inc)
			}
			return c.load(inc, depth+1)
		}
		c.values[key] = value
		return nil
	})
}

// expand replaces a leading ~ or ~user, as git's interpolate_path.
func (c *configReader) expand(p string) string {
	if !strings.HasPrefix(p, "~") {
		return p
	}
	user, rest, _ := strings.Cut(p[1:], "/")
	home := c.home
	if user != "" {
		h, ok := c.users.byName[user]
		if !ok {
			return p
		}
		home = h
	}
	return filepath.Join(home, rest)
}

// parseConfig reads git's config syntax, calling set for each key with a
// value ("section.sub.key", section and key lower-cased); a bare key (a
// boolean) has no path, so it is skipped.
func parseConfig(data []byte, set func(key, value string) error) error {
	if bytes.IndexByte(data, 0) >= 0 {
		return errors.New("gitrules: a config file holds a NUL byte")
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	next := func() byte { // 0 at the end
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	section := ""
	line := 1
	bad := func(what string) error { return fmt.Errorf("gitrules: bad config line %d: %s", line, what) }
	for {
		b := next()
		switch {
		case b == 0:
			return nil
		case b == '\n':
			line++
		case b == ' ' || b == '\t' || b == '\r':
		case b == '#' || b == ';':
			for b != '\n' && b != 0 {
				b = next()
			}
			line++
		case b == '[':
			s, err := parseSection(next)
			if err != nil {
				return bad(err.Error())
			}
			section = s
		case isAlpha(b):
			name := []byte{lower(b)}
			for b = next(); isAlpha(b) || isDigit(b) || b == '-'; b = next() {
				name = append(name, lower(b))
			}
			for b == ' ' || b == '\t' {
				b = next()
			}
			key := string(name) // git takes a key before any section
			if section != "" {
				key = section + "." + key
			}
			switch b {
			case '\n', 0, '#', ';':
				for b != '\n' && b != 0 {
					b = next()
				}
				line++
				continue // a boolean
			case '=':
			default:
				return bad("a key is followed by neither = nor the line's end")
			}
			v, lines, err := parseValue(next)
			line += lines
			if err != nil {
				return bad(err.Error())
			}
			if err := set(key, v); err != nil {
				return err
			}
		default:
			return bad("unexpected character")
		}
	}
}

// parseSection reads a section header after its [: "name" or
// `name "sub"` (subsection kept as written) or the old "name.sub".
func parseSection(next func() byte) (string, error) {
	var name []byte
	b := next()
	for ; isAlpha(b) || isDigit(b) || b == '-' || b == '.'; b = next() {
		name = append(name, lower(b))
	}
	if b == ']' && len(name) > 0 {
		return string(name), nil
	}
	if b != ' ' && b != '\t' {
		return "", errors.New("a bad section name")
	}
	for b == ' ' || b == '\t' {
		b = next()
	}
	if b != '"' {
		return "", errors.New("a bad section header")
	}
	sub := []byte{'.'}
	for b = next(); b != '"'; b = next() {
		switch b {
		case 0, '\n':
			return "", errors.New("an unterminated subsection")
		case '\\':
			b = next()
			if b == 0 || b == '\n' {
				return "", errors.New("an unterminated subsection")
			}
		}
		sub = append(sub, b)
	}
	if next() != ']' {
		return "", errors.New("a bad section header")
	}
	return string(name) + string(sub), nil
}

// parseValue reads a value after its =, as git's parse_value: quotes
// removed, \\ \" \t \b \n and a line continuation, comments cut, runs of
// blanks outside quotes kept as that many spaces except at the ends. It
// returns how many line ends it consumed.
func parseValue(next func() byte) (string, int, error) {
	var v []byte
	quote, comment, space, lines := false, false, 0, 0
	for {
		c := next()
		if c == '\n' || c == 0 {
			lines++
			if quote {
				return "", lines, errors.New("an unterminated quote")
			}
			return string(v), lines, nil
		}
		if comment {
			continue
		}
		if (c == ' ' || c == '\t' || c == '\r') && !quote {
			if len(v) > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			v = append(v, ' ')
		}
		switch c {
		case '\\':
			switch c = next(); c {
			case '\n':
				lines++
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", lines, errors.New("an unknown escape")
			}
			v = append(v, c)
		case '"':
			quote = !quote
		default:
			v = append(v, c)
		}
	}
}

func isAlpha(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }
func isDigit(b byte) bool { return '0' <= b && b <= '9' }
func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}
