package gitleaks_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/airlock/airlock/secretscan/gitleaks"
	"github.com/airlock/airlock/secretscan/nodetree"
)

// FuzzWindows: on any text, the scanner (rules run on windows around
// their anchors) finds what gitleaks' detector (every rule over the whole
// text) finds.
func FuzzWindows(f *testing.F) {
	for _, s := range []string{
		"const api_key = \"Zx8Qw3Lr5Tn7Vb2Mc4Kd6Hf9Jg1Sp0Ay\"\n",
		"var awsId=\"AKIAQWERTYUIOPASDFGH\"\n",
		"token: ghp_abcdefghijklmnopqrstuvwxyz0123456789\n",
		"-----BEGIN RSA PRIVATE KEY-----\n" + strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkwYWJjZGVmZ2hpamtsbW5v\n", 3) + "-----END RSA PRIVATE KEY-----\n",
		"slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx\n",
		"e.authToken=\"word-word-word\",e.apiKey=\"Q2x8Zk3Lm9Vb7Nc1\";password:\"hunter2hunter2\"",
		"secret=abc\nkey: 0123456789abcdef0123456789abcdef\n",
		"stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF",
		"curl -u user:pass https://example.com\n",
		"API_TOKEN=\u212aey0123456789abcdefXYZ\n", // a Kelvin sign: folds into k
	} {
		f.Add(s)
	}
	nodetree.Generate(64<<10, 5, func(file nodetree.File) error {
		if len(file.Text) < 4<<10 {
			f.Add(file.Text)
		}
		return nil
	})
	ref := gitleaks.NewReference()
	f.Fuzz(func(t *testing.T, text string) {
		want, got := sorted(ref.Detector(text)), sorted(ref.Windows(text))
		if !slices.Equal(got, want) {
			t.Fatalf("windows found %+v, gitleaks' detector %+v, in %q", got, want, text)
		}
	})
}
