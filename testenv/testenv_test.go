package testenv

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:           "/a/b",
		`/a\040b`:        "/a b",
		`/x\011y\134z`:   "/x\ty\\z",
		`/trailing\04`:   `/trailing\04`,
		`/not\09octal`:   `/not\09octal`,
		`/two\040\040sp`: "/two  sp",
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
