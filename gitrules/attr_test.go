package gitrules

import (
	"strings"
	"testing"
)

// TestAttributes: precedence, macros (defined only at the top), the
// built-in binary, !name, quoted patterns and the lines git ignores.
func TestAttributes(t *testing.T) {
	fs := files{
		".gitattributes": strings.Join([]string{
			"[attr]gen linguist-generated -diff",
			"*.min.js gen",
			"*.png binary",
			"*.txt text eol=lf",
			"docs/** -text",
			`"q u o t e d.txt" diff=q`,
			"!neg.txt text", // negative patterns are ignored
			"bad.txt text bad%name",
			"dir/ text", // matches directories only, never a file inside
			"long.txt " + strings.Repeat("x", attrMaxLine) + " -text", // too long: git skips it
		}, "\n"),
		"sub/.gitattributes":   "[attr]local -text\n*.txt !eol local\n*.dat linguist-generated=true\n",
		".git/info/attributes": "info.txt -text\n",
	}
	r := New(Options{Read: fs.read, Git: true, GlobalAttributes: []byte("*.txt diff=global\n*.c diff=cpp\n")})
	cases := []struct {
		path, name string
		want       Attr
	}{
		{"a.min.js", "gen", Attr{State: Set}},
		{"a.min.js", "linguist-generated", Attr{State: Set}},
		{"a.min.js", "diff", Attr{State: Unset}},
		{"x/y.png", "binary", Attr{State: Set}},
		{"x/y.png", "diff", Attr{State: Unset}},
		{"x/y.png", "text", Attr{State: Unset}},
		{"a.txt", "eol", Attr{State: Value, Value: "lf"}},
		{"a.txt", "diff", Attr{State: Value, Value: "global"}}, // the global file is below the project's
		{"docs/a.txt", "text", Attr{State: Unset}},
		{"q u o t e d.txt", "diff", Attr{State: Value, Value: "q"}},
		{"neg.txt", "text", Attr{State: Set}}, // from *.txt, not from the ignored line
		{"bad.txt", "text", Attr{State: Set}},
		{"dir/f", "text", Attr{}},
		{"dir/", "text", Attr{State: Set}},
		{"long.txt", "text", Attr{State: Set}},
		{"sub/a.txt", "eol", Attr{}}, // !eol: back to unspecified
		{"sub/a.txt", "local", Attr{State: Set}},
		{"sub/a.txt", "text", Attr{State: Set}},  // the text comes from the root's *.txt: local is no macro there
		{"info.txt", "text", Attr{State: Unset}}, // info/attributes is above every file
		{"m.c", "diff", Attr{State: Value, Value: "cpp"}},
	}
	for _, c := range cases {
		if got := r.Attr(c.path, c.name); got != c.want {
			t.Errorf("%s %s: %+v, want %+v", c.path, c.name, got, c.want)
		}
	}
	gen := []struct {
		path, reason string
	}{
		{"a.min.js", "linguist-generated"},
		{"x/y.png", "-diff"},
		{"sub/x.dat", "linguist-generated"},
		{"a.txt", ""},
	}
	for _, c := range gen {
		reason, ok := r.Generated(c.path)
		if reason != c.reason || ok != (c.reason != "") {
			t.Errorf("Generated(%s): %q %v, want %q", c.path, reason, ok, c.reason)
		}
	}
}
