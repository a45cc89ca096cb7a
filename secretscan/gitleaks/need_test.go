package gitleaks

import (
	"strings"
	"testing"

	"github.com/airlock/airlock/secretscan/nodetree"
	"github.com/zricethezav/gitleaks/v8/detect"
)

// TestAllowlistAlternatives: an allowlist's regular expressions tried as
// alternatives, each where the string holds what it needs, allow what
// gitleaks' allowlist allows; and most strings hold what most need.
func TestAllowlistAlternatives(t *testing.T) {
	det, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	corpus := []string{
		"accessor", "ACCESS_ID=1", "random.access", "api_version", "rapid", "Capital", "foo-API-bar:jar:", "author",
		"X-MS-Exchange-Organization-Auth", "credentials_id", "withCredentials", "primary_key", "turkey", "key_alias",
		"keyVault_name", "keyVaultToStoreSecrets", "keystore_file", "issuerkeyhash", "Monkey", "DONKEY", "keying",
		"secret_length", "UserSecretsId", "csrf-token", "io.jsonwebtoken : jjwt", "token_url", "public_token", "key_file",
		"FOO=\nBAR=\n", "a.b=\nc.d=\n", "true", "TRUE", "False", "null", "aaaa", "****", "$1", "${2}", "$FOO", "$Foo", "${FOO}", "{{ x }}",
		"${{ secrets.FOO }}", "%FOO%", "%Foo%", "%s", "{1}", "@FOO@", "@Foo@", "/Users/me/x y", "/usr/local/bin", "EXAMPLEKEY",
		"AKIAIOSFODNN7EXAMPLE", "x",
	}
	nodetree.Generate(256<<10, 3, func(f nodetree.File) error {
		corpus = append(corpus, strings.Split(f.Text, "\n")...)
		return nil
	})
	s := newScanner(det)
	t1 := &text1{regexes: s.regexes}
	skipped, tried := 0, 0
	for a, alts := range s.regexes {
		if len(a.Regexes) == 0 {
			continue
		}
		if alts == nil {
			t.Errorf("allowlist %q (%d expressions) not split", a.Description, len(a.Regexes))
			continue
		}
		for _, text := range corpus {
			if got, want := t1.regexAllowed(a, text), a.RegexAllowed(text); got != want {
				t.Errorf("allowlist %q on %q: %v, gitleaks says %v", a.Description, text, got, want)
			}
			for _, alt := range alts {
				if alt.re.MatchString(text) && alt.need != nil && !alt.need.heldBy(lowered(text)) {
					t.Errorf("%s matches %q, which does not hold what it needs", alt.re, text)
				}
				if alt.need != nil && !alt.need.heldBy(lowered(text)) {
					skipped++
				} else {
					tried++
				}
			}
		}
	}
	if skipped < tried {
		t.Errorf("%d alternatives skipped, %d tried", skipped, tried)
	}
}
