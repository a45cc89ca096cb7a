package names

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is what makes a character deceptive in a name.
type Kind string

const (
	// Control is a C0 or C1 control character, DEL, or a line or paragraph
	// separator: it breaks or rewrites the line a name is shown on.
	Control Kind = "control"
	// Escape is ESC (or the 8-bit CSI): the start of a terminal control
	// sequence.
	Escape Kind = "escape"
	// Bidi is a bidirectional control: it reorders what follows it.
	Bidi Kind = "bidi"
	// Invisible is a zero-width, format, filler or look-alike space
	// character: it shows as nothing, or as a plain space.
	Invisible Kind = "invisible"
	// InvalidUTF8 is a byte that is not part of valid UTF-8.
	InvalidUTF8 Kind = "invalid_utf8"
)

// Problem is one deceptive character in a name.
type Problem struct {
	Kind   Kind   `json:"kind"`
	Offset int    `json:"offset"` // in bytes, into the name
	Char   string `json:"char"`   // the character as Quote escapes it: \n, \x1b, \u202e, \xff
}

// classify says what is deceptive about r at name[i:] (its size given),
// or "" when r shows as itself. A zero-width joiner or variation selector
// is fine between emoji (they compose one), deceptive anywhere else.
func classify(name string, i int, r rune, size int) Kind {
	switch {
	case r == utf8.RuneError && size == 1:
		return InvalidUTF8
	case r == 0x1b || r == 0x9b:
		return Escape
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029:
		return Control
	case isBidi(r):
		return Bidi
	case r == 0x200d || (r >= 0xfe00 && r <= 0xfe0f):
		prev, _ := utf8.DecodeLastRuneInString(name[:i])
		next, _ := utf8.DecodeRuneInString(name[i+size:])
		if isEmoji(prev) && (r != 0x200d || isEmoji(next)) {
			return ""
		}
		return Invisible
	case isInvisible(r):
		return Invisible
	}
	return ""
}

func isBidi(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// isInvisible: format characters (Cf: zero-width spaces and joiners, the
// soft hyphen, word joiners, the BOM, tag characters, ...), spaces other
// than the plain one, fillers that render blank, variation selectors and
// the combining grapheme joiner.
func isInvisible(r rune) bool {
	switch r {
	case 0x034f, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x180e, 0x2800, 0x3164, 0xffa0:
		return true
	}
	return unicode.Is(unicode.Cf, r) || (unicode.Is(unicode.Zs, r) && r != ' ') ||
		(r >= 0xe0100 && r <= 0xe01ef) || (r >= 0x180b && r <= 0x180f)
}

// isEmoji is a rough test for a pictographic character (a joiner or a
// variation selector after one is part of the emoji).
func isEmoji(r rune) bool {
	return (r >= 0x1f000 && r <= 0x1faff) || (r >= 0x2600 && r <= 0x27bf) || (r >= 0x2300 && r <= 0x23ff) ||
		(r >= 0x2b00 && r <= 0x2bff) || r == 0x00a9 || r == 0x00ae || r == 0x203c || r == 0x2049 || r == 0x2122
}

// Check lists the deceptive characters in name, in order (nil: none).
func Check(name string) []Problem {
	var out []Problem
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if k := classify(name, i, r, size); k != "" {
			out = append(out, Problem{Kind: k, Offset: i, Char: escape(r, name[i], size)})
		}
		i += size
	}
	return out
}

// escape writes one deceptive character (or, when r is utf8.RuneError of
// size 1, the invalid byte b) as Quote does.
func escape(r rune, b byte, size int) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return fmt.Sprintf(`\x%02x`, b)
	case r == '\n':
		return `\n`
	case r == '\t':
		return `\t`
	case r == '\r':
		return `\r`
	case r < 0x80:
		return fmt.Sprintf(`\x%02x`, r)
	case r > 0xffff:
		return fmt.Sprintf(`\U%08x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// Quote returns name unchanged when it shows as what it is, otherwise in
// double quotes with every deceptive character escaped (\n, \t, \x1b,
// \u202e, \U000e0041, \xff for a byte that is not UTF-8) and `"` and `\`
// backslashed. A name that begins or ends with a space, or begins with a
// double quote, is quoted too, so the unquoted form is never ambiguous.
// Every other character, accented, CJK or emoji, is kept as it is.
func Quote(name string) string {
	if !needsQuote(name) {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 2)
	b.WriteByte('"')
	writeEscaped(&b, name, true)
	b.WriteByte('"')
	return b.String()
}

// Safe returns text (a message, a log line, an error that may embed a
// name) with its deceptive characters escaped as Quote escapes them, and
// nothing else changed: no quotes are added. For prose, where a name was
// not quoted where it was put in; a name on its own takes Quote.
func Safe(text string) string {
	if len(Check(text)) == 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + 8)
	writeEscaped(&b, text, false)
	return b.String()
}

// SafeLines is Safe of each line of text: its newlines are kept (a
// message of several lines stays one), any other deceptive character is
// escaped.
func SafeLines(text string) string {
	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = Safe(lines[i])
	}
	return strings.Join(lines, "\n")
}

// writeEscaped writes s with its deceptive characters escaped, and, in a
// quoted name, its double quotes and backslashes.
func writeEscaped(b *strings.Builder, s string, quoted bool) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case classify(s, i, r, size) != "":
			b.WriteString(escape(r, s[i], size))
		case quoted && (r == '"' || r == '\\'):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
}

// needsQuote reports whether Quote changes name.
func needsQuote(name string) bool {
	if name == "" || name[0] == ' ' || name[0] == '"' || name[len(name)-1] == ' ' {
		return true
	}
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if r >= 0x20 && r < 0x7f {
			i++
			continue
		}
		if classify(name, i, r, size) != "" {
			return true
		}
		i += size
	}
	return false
}

// Quotes is Quote of each name.
func Quotes(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = Quote(n)
	}
	return out
}
