package names

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata/quote.json")

// golden is one case of testdata/quote.json, which
// frontend/src/lib/names.test.ts reads too. A name that is not valid
// UTF-8 is given as Hex (JSON strings cannot hold it; the interface never
// sees one: the API's JSON replaced its bytes) and skipped there.
type golden struct {
	Name     string `json:"name,omitempty"`
	Hex      string `json:"hex,omitempty"`
	Quoted   string `json:"quoted"`
	Kinds    []Kind `json:"kinds,omitempty"`
	Displays string `json:"displays,omitempty"` // when it differs from the name
}

var quoteCases = []string{
	"README.md",
	"src/main.go",
	"café.txt",
	"cafe\u0301.txt",
	"日本語/ファイル.md",
	"😀.txt",
	"👨\u200d👩\u200d👧.png",
	"❤\ufe0f.txt",
	"a\ufe0fb",
	"a\u200db",
	"with space.txt",
	" leading",
	"trailing ",
	"\"quoted\"",
	"mid\"quote",
	"back\\slash",
	"",
	"x\n--- a\ta.txt",
	"n\n+++ b\n@@ -0,0 +1 @@",
	"uni\u202egnp.exe",
	"esc\x1b[31mred",
	"README.md\u200b",
	"bell\x07",
	"cr\r",
	"del\x7f",
	"c1\u0085next",
	"csi\u009b31m",
	"lsep\u2028x",
	"arabic\u061cmark",
	"lrm\u200e",
	"rlm\u200f",
	"lre\u202a",
	"isolate\u2066x\u2069",
	"fsi\u2068x\u2069",
	"wj\u2060",
	"invisible\u2064times",
	"bom\ufeff",
	"soft\u00adhyphen",
	"mongolian\u180evs",
	"tag\U000e0041\U000e007f",
	"nbsp\u00a0space",
	"ideographic\u3000space",
	"hangul\u3164filler",
	"quote\"and\u202e",
	"ｆｕｌｌ.txt",
	"раураl.txt",
	"Ω.txt",
	"\ufffd.txt",
	"\U0001f468\u200d.txt",
	"\u200dstart",
	"zwnj\u200c",
	"Screen Shot at 10.00.00\u202fAM.png",
	"e\u0301\u0301\u0301",
	"\u00e9t\u00e9 d\u2019hiver",
	"\U0001d41a\U0001d41b.txt",
}

var invalidCases = []string{"bad\xff", "trunc\xe2\x80", "\xef\xbf"}

func TestQuoteGolden(t *testing.T) {
	var got []golden
	for _, n := range append(append([]string{}, quoteCases...), invalidCases...) {
		g := golden{Quoted: Quote(n)}
		if utf8.ValidString(n) {
			g.Name = n
		} else {
			g.Hex = hex.EncodeToString([]byte(n))
		}
		for _, p := range Check(n) {
			g.Kinds = append(g.Kinds, p.Kind)
		}
		if d := Display(n); d != n {
			g.Displays = d
		}
		got = append(got, g)
	}
	data, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data = append(asciiJSON(data), '\n')
	if *update {
		if err := os.WriteFile("testdata/quote.json", data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/quote.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(data) {
		t.Errorf("Quote/Check/Display differ from testdata/quote.json (go test ./names -update, then read the diff):\n%s", data)
	}
}

// TestQuoteIsSafe: whatever the name, Quote's output holds no control,
// escape, bidi or invisible character and is valid UTF-8, and a name that
// is left alone has none either.
func TestQuoteIsSafe(t *testing.T) {
	for _, n := range append(append([]string{}, quoteCases...), invalidCases...) {
		q := Quote(n)
		if !utf8.ValidString(q) {
			t.Errorf("Quote(%q) = %q: not UTF-8", n, q)
		}
		if ps := Check(q); len(ps) > 0 {
			t.Errorf("Quote(%q) = %q still holds %v", n, q, ps)
		}
		if q == n && len(Check(n)) > 0 {
			t.Errorf("Quote(%q) left a deceptive name alone", n)
		}
	}
}

func TestSafe(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"plain text: café", "plain text: café"},
		{"open x\n--- a: no such file", `open x\n--- a: no such file`},
		{"left \"esc\x1b[31m\" \\ uni\u202egnp", `left "esc\x1b[31m" \ uni\u202egnp`},
	} {
		if got := Safe(c.text); got != c.want {
			t.Errorf("Safe(%q) = %q, want %q", c.text, got, c.want)
		}
	}
	if got, want := SafeLines("one \x1b[2J\ntwo \u202e"), "one \\x1b[2J\ntwo \\u202e"; got != want {
		t.Errorf("SafeLines = %q, want %q", got, want)
	}
}

func TestDisplay(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"uni\u202egnp.exe", "uniexe.png"},
		{"a\u202ecba\u202cd", "aabcd"},
		{"README.md\u200b", "README.md"},
		{"plain", "plain"},
	} {
		if got := Display(c.name); got != c.want {
			t.Errorf("Display(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestCollisions(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want []Collision
	}{
		{[]string{"README.md", "README.md\u200b"}, []Collision{
			{"README.md", "README.md\u200b", Hidden}, {"README.md\u200b", "README.md", Hidden}}},
		{[]string{"Makefile", "makefile", "main.go"}, []Collision{
			{"Makefile", "makefile", Case}, {"makefile", "Makefile", Case}}},
		{[]string{"caf\u00e9", "cafe\u0301"}, []Collision{
			{"cafe\u0301", "caf\u00e9", Normalisation}, {"caf\u00e9", "cafe\u0301", Normalisation}}},
		{[]string{"paypal.txt", "раураl.txt"}, []Collision{
			{"paypal.txt", "раураl.txt", Confusable}, {"раураl.txt", "paypal.txt", Confusable}}},
		{[]string{"ｆｕｌｌ", "full"}, []Collision{
			{"full", "ｆｕｌｌ", Confusable}, {"ｆｕｌｌ", "full", Confusable}}},
		{[]string{"ΡΟΤ", "POT", "pot"}, []Collision{
			{"POT", "pot", Case}, {"pot", "POT", Case}, {"ΡΟΤ", "POT", Confusable}}},
		{[]string{"a b", "a\u00a0b"}, []Collision{{"a b", "a\u00a0b", Hidden}, {"a\u00a0b", "a b", Hidden}}},
		{[]string{"a.txt", "b.txt", "café", "日本"}, nil},
	} {
		got := Collisions(c.set)
		if len(got) != len(c.want) {
			t.Errorf("Collisions(%q) = %v, want %v", c.set, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("Collisions(%q)[%d] = %v, want %v", c.set, i, got[i], c.want[i])
			}
		}
	}
}

// asciiJSON escapes every non-ASCII character of a JSON text as \uXXXX,
// so the golden file shows the characters it is about rather than hiding
// them in an editor.
func asciiJSON(data []byte) []byte {
	var out []byte
	for _, r := range string(data) {
		switch {
		case r < 0x80:
			out = append(out, byte(r))
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}

// TestQuoteRoundTrip: a quoted name reads back, with Go's unquoting, as
// exactly the name (Quote's escapes are Go's), so no two names show the
// same; an unquoted one is the name itself and cannot be taken for a
// quoted one.
func TestQuoteRoundTrip(t *testing.T) {
	pieces := []string{"a", "Z", " ", "\"", "\\", "\n", "\t", "\x1b", "\x7f", "\u0085", "\u202e", "\u200b", "\u200d",
		"\ufe0f", "\U0001f468", "é", "e\u0301", "日", "\xff", "\xe2\x80", "\ufffd", "\U000e0041", "\u00a0", "/", "."}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		checkRoundTrip(t, b.String())
	}
}

func checkRoundTrip(t *testing.T, n string) {
	q := Quote(n)
	if q == n {
		if strings.HasPrefix(n, `"`) || len(Check(n)) > 0 {
			t.Fatalf("Quote(%q) left it alone", n)
		}
		return
	}
	back, err := strconv.Unquote(q)
	if err != nil || back != n {
		t.Fatalf("Quote(%q) = %s, which reads back as %q (%v)", n, q, back, err)
	}
	if len(Check(q)) > 0 || !utf8.ValidString(q) {
		t.Fatalf("Quote(%q) = %q is not safe to show", n, q)
	}
}

func FuzzQuote(f *testing.F) {
	for _, n := range quoteCases {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n string) { checkRoundTrip(t, n) })
}
