package api

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// StatLines is the media type of a diff's summary as text, one line per
// changed path (AppendStatLine), then one line holding the rest of the
// api.Diff as JSON (it starts with "{", which no stat line does). It is
// what `airlock diff --stat` asks for: a large session's summary is
// hundreds of thousands of lines, and decoding them as JSON costs more
// than the engine's work. A first line "#width N" (AppendStatWidth) may
// say how long the longest path is.
const StatLines = "text/x-airlock-stat"

// AppendStatLine appends s as a line (without its newline): kind, added
// and removed lines, flags (b binary, t too large, c conflict, m merged,
// h held, g generated, i ignored by the project's rules, s ignored by
// the session's only), the scanners' findings joined by commas, the path it was
// renamed from and the path, separated by tabs. Paths are escaped (a
// backslash, tab, newline and any control byte as \\, \t, \n, \xNN), so
// no name a session makes can add a field or a line.
func AppendStatLine(b []byte, s Stat) []byte {
	b = append(b, s.Kind...)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(s.Added), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(s.Removed), 10)
	b = append(b, '\t')
	for _, f := range []struct {
		on bool
		c  byte
	}{{s.Binary, 'b'}, {s.TooLarge, 't'}, {s.Conflict, 'c'}, {s.Merged, 'm'}, {s.Held, 'h'},
		{s.Generated, 'g'}, {s.Ignored == IgnoredProject, 'i'}, {s.Ignored == IgnoredSession, 's'}} {
		if f.on {
			b = append(b, f.c)
		}
	}
	b = append(b, '\t')
	for i, f := range s.Findings {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEscaped(b, strings.ReplaceAll(f, ",", " "))
	}
	b = append(b, '\t')
	b = appendEscaped(b, s.From)
	b = append(b, '\t')
	return appendEscaped(b, s.Path)
}

const hexDigits = "0123456789abcdef"

func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}

// AppendStatWidth appends the line that may come first in StatLines: the
// length in bytes of the longest path to come ("#width N"), so that a
// client can align each line as it comes instead of holding them all.
func AppendStatWidth(b []byte, width int) []byte {
	return strconv.AppendInt(append(b, "#width "...), int64(width), 10)
}

// ParseStatWidth reads a line AppendStatWidth made (ok false: it is not
// one).
func ParseStatWidth(line []byte) (width int, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte("#width "))
	if !found {
		return 0, false
	}
	n, err := atoi(rest)
	return n, err == nil
}

// ParseStatLine reads a line AppendStatLine made.
func ParseStatLine(line []byte) (Stat, error) {
	var f [7][]byte
	rest := line
	for n := 0; n < 6; n++ {
		i := bytes.IndexByte(rest, '\t')
		if i < 0 {
			return Stat{}, fmt.Errorf("a stat line has %d fields, not 7: %.80q", n+1, line)
		}
		f[n], rest = rest[:i], rest[i+1:]
	}
	f[6] = rest
	if bytes.IndexByte(rest, '\t') >= 0 || len(f[0]) == 0 {
		return Stat{}, fmt.Errorf("a stat line has more than 7 fields or no kind: %.80q", line)
	}
	var s Stat
	var err error
	s.Kind = kindOf(f[0])
	if s.Added, err = atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("a stat line's added count: %w", err)
	}
	if s.Removed, err = atoi(f[2]); err != nil {
		return Stat{}, fmt.Errorf("a stat line's removed count: %w", err)
	}
	for _, c := range f[3] {
		switch c {
		case 'b':
			s.Binary = true
		case 't':
			s.TooLarge = true
		case 'c':
			s.Conflict = true
		case 'm':
			s.Merged = true
		case 'h':
			s.Held = true
		case 'g':
			s.Generated = true
		case 'i':
			s.Ignored = IgnoredProject
		case 's':
			s.Ignored = IgnoredSession
		default:
			return Stat{}, fmt.Errorf("a stat line's flag %q is unknown", c)
		}
	}
	if len(f[4]) > 0 {
		for _, x := range bytes.Split(f[4], []byte{','}) {
			v, err := unescape(x)
			if err != nil {
				return Stat{}, err
			}
			s.Findings = append(s.Findings, v)
		}
	}
	if s.From, err = unescape(f[5]); err != nil {
		return Stat{}, err
	}
	if s.Path, err = unescape(f[6]); err != nil {
		return Stat{}, err
	}
	return s, nil
}

func unescape(b []byte) (string, error) {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b), nil
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", fmt.Errorf("a stat line ends in a lone backslash")
		}
		i++
		switch b[i] {
		case '\\':
			out = append(out, '\\')
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'x':
			if i+2 >= len(b) {
				return "", fmt.Errorf("a stat line has a short \\x escape")
			}
			v, err := strconv.ParseUint(string(b[i+1:i+3]), 16, 8)
			if err != nil {
				return "", fmt.Errorf("a stat line's \\x escape: %w", err)
			}
			out = append(out, byte(v))
			i += 2
		default:
			return "", fmt.Errorf("a stat line has an unknown escape \\%c", b[i])
		}
	}
	return string(out), nil
}

// kindOf is the kind's string, shared for the kinds there are: a large
// summary holds one per path.
func kindOf(b []byte) string {
	for _, k := range [...]string{KindAdded, KindModified, KindDeleted, KindRenamed, KindMode, KindReplaced} {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

// atoi is strconv.Atoi of a count without a string.
func atoi(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, fmt.Errorf("%.20q is not a count", b)
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%.20q is not a count", b)
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}
