package gitleaks_test

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/airlock/airlock/secretscan"
	"github.com/airlock/airlock/secretscan/gitleaks"
	"github.com/airlock/airlock/secretscan/nodetree"
)

// sorted is matches in a fixed order (gitleaks' detector reports them in
// its rules' map order).
func sorted(m []secretscan.Match) []secretscan.Match {
	m = slices.Clone(m)
	slices.SortFunc(m, func(a, b secretscan.Match) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Rule, b.Rule))
	})
	return m
}

// TestWindowsFindWhatGitleaksFinds: on a node_modules-shaped tree with
// secrets planted in it (small files and megabyte minified lines), the
// scanner finds, file by file, exactly what gitleaks' own detector
// finds: every planted secret, by the same rule, and no other finding
// than gitleaks' own.
func TestWindowsFindWhatGitleaksFinds(t *testing.T) {
	size := int64(2 << 20)
	if testing.Short() {
		size = 1 << 20
	}
	ref := gitleaks.NewReference()
	found := map[string][]secretscan.Match{}
	files := 0
	planted, err := nodetree.Generate(size, 7, func(f nodetree.File) error {
		files++
		want, got := sorted(ref.Detector(f.Text)), sorted(ref.Windows(f.Text))
		if !slices.Equal(got, want) {
			t.Errorf("%s: windows found %+v, gitleaks' detector %+v", f.Path, got, want)
		}
		found[f.Path] = got
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(planted) == 0 {
		t.Fatal("no secret planted")
	}
	for _, p := range planted {
		if !slices.ContainsFunc(found[p.Path], func(m secretscan.Match) bool { return m.Rule == p.Rule && m.Line == p.Line }) {
			t.Errorf("planted %s at %s:%d not found (found %+v)", p.Rule, p.Path, p.Line, found[p.Path])
		}
	}
	t.Logf("%d files, %d planted secrets", files, len(planted))
}

// TestPlantedKinds: the fixture plants each kind it names, and gitleaks
// finds each where it was planted.
func TestPlantedKinds(t *testing.T) {
	ref := gitleaks.NewReference()
	kinds := map[string]bool{}
	var files = map[string]string{}
	planted, err := nodetree.Generate(8<<20, 3, func(f nodetree.File) error { files[f.Path] = f.Text; return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range planted {
		kinds[p.Rule] = true
		if !slices.ContainsFunc(ref.Detector(files[p.Path]), func(m secretscan.Match) bool { return m.Rule == p.Rule && m.Line == p.Line }) {
			t.Errorf("gitleaks does not find the planted %s at %s:%d", p.Rule, p.Path, p.Line)
		}
	}
	if len(kinds) != 5 {
		t.Errorf("planted kinds %v, want 5", kinds)
	}
}

// TestKeywordAfterHits: a rule's anchor hits before its keyword wait for
// it, at most some of them; a rule that had more runs over the whole text
// once its keyword comes. Either way, what gitleaks finds is found:
// here a Sourcegraph token (anchors: any hex digit) with its keyword
// after thousands of hex digits, before them, or between.
func TestKeywordAfterHits(t *testing.T) {
	ref := gitleaks.NewReference()
	token := "token = \"3f9a0c7e1b5d4f2a8c6e0b9d7f1a3c5e9b2d4f6a\"\n"
	for _, hits := range []int{10, 5000} {
		hex := strings.Repeat("x = 0123456789abcdef;\n", hits/16+1)
		for _, text := range []string{
			hex + token + "// sourcegraph\n",
			token + hex + "// sourcegraph\n",
			"// sourcegraph\n" + hex + token,
			hex + "// sourcegraph\n" + hex + token,
		} {
			want, got := sorted(ref.Detector(text)), sorted(ref.Windows(text))
			if !slices.Equal(got, want) {
				t.Errorf("%d hits: windows found %+v, gitleaks' detector %+v", hits, got, want)
			}
			if !slices.ContainsFunc(got, func(m secretscan.Match) bool { return m.Rule == "sourcegraph-access-token" }) {
				t.Errorf("%d hits: the token not found (%+v)", hits, got)
			}
		}
	}
}
