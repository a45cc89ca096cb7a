package egress

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "/",
		"/":                           "/",
		"/repos/x":                    "/repos/x",
		"/repos/x/":                   "/repos/x/",
		"/repos/../admin":             "/admin",
		"/repos/%2e%2e/admin":         "/admin",
		"/repos/%2E%2E/admin":         "/admin",
		"/repos/%252e%252e/admin":     "/admin", // doubly encoded
		"/repos/..%2fadmin":           "/admin",
		`/repos/..\admin`:             "/admin",
		"//repos///x":                 "/repos/x",
		"/../../etc":                  "/etc",
		"/a/./b":                      "/a/b",
		"/%72epos/x":                  "/repos/x",
		"/repos/%zz":                  "/repos/%zz", // not an escape: kept as written
		"/repos/x%3Fadmin=1":          "/repos/x?admin=1",
		"/repos/octo/hello%20world/x": "/repos/octo/hello world/x",
	} {
		if got := cleanPath(in); got != want {
			t.Errorf("cleanPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		glob, path string
		want       bool
	}{
		{"/repos/**", "/repos", true},
		{"/repos/**", "/repos/", true},
		{"/repos/**", "/repos/a/b/c", true},
		{"/repos/**", "/reposx", false},
		{"/repos/**", "/admin", false},
		{"/repos/*", "/repos/a", true},
		{"/repos/*", "/repos/a/b", false},
		{"/repos/*/issues", "/repos/a/issues", true},
		{"/repos/*/issues", "/repos/a/b/issues", false},
		{"/repos/**/issues", "/repos/a/b/issues", true},
		{"/repos/**/issues", "/repos/issues", true},
		{"/v1/*.json", "/v1/a.json", true},
		{"/v1/*.json", "/v1/a.jsonx", false},
		{"/v1/a*b*c", "/v1/abc", true},
		{"/v1/a*b*c", "/v1/axxbyyc", true},
		{"/v1/a*b*c", "/v1/axxbyy", false},
		{"/**", "/anything/at/all", true},
		{"/", "/", true},
		{"/", "/x", false},
		{"/exact", "/exact", true},
		{"/exact", "/exact/", false},
	} {
		if got := globMatch(cleanGlob(tc.glob), cleanPath(tc.path)); got != tc.want {
			t.Errorf("%q on %q = %v, want %v", tc.glob, tc.path, got, tc.want)
		}
	}
}

func TestParseRequestRule(t *testing.T) {
	for _, tc := range []struct {
		in, method, domain, glob string
		port                     int
	}{
		{"GET api.github.com/repos/**", "GET", "api.github.com", "/repos/**", 0},
		{"get api.github.com/repos/**", "GET", "api.github.com", "/repos/**", 0},
		{"POST api.github.com", "POST", "api.github.com", "", 0},
		{"* api.github.com:8443/v1/*", "", "api.github.com", "/v1/*", 8443},
		{"api.github.com/repos/../admin", "", "api.github.com", "/admin", 0},
		{"*.github.com/x", "", "github.com", "/x", 0},
		{"198.51.100.0/24", "", "", "", 0}, // a CIDR, not a path
	} {
		r, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if r.method != tc.method || r.domain != tc.domain || r.glob != tc.glob || r.port != tc.port || r.Text != tc.in {
			t.Errorf("%q: method %q domain %q glob %q port %d", tc.in, r.method, r.domain, r.glob, r.port)
		}
	}
	for bad, says := range map[string]string{
		"FETCH api.github.com/x":   "only an HTTP method",
		"GET api.github.com/x?y=1": "query",
		"GET api.github.com/x y":   "%20",
		"198.51.100.7/x":           "not a CIDR",
	} {
		_, err := ParseRule(bad)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, says)
		}
	}
}

// A request rule must be enforceable: on plain HTTP (port 80) or on a
// host whose TLS the proxy ends; anywhere else Compile refuses it.
func TestRequestRuleNeedsTermination(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		says string // "" = compiles
	}{
		{Spec{Allow: []string{"GET api.github.com/repos/**"}}, "cannot be enforced: the proxy does not see inside TLS to api.github.com; mark it for inspection with --inspect api.github.com"},
		{Spec{Deny: []string{"POST api.github.com/**"}}, "cannot be enforced"},
		{Spec{Allow: []string{"GET api.github.com/repos/**"}, Inspect: []string{"api.github.com"}}, ""},
		{Spec{Allow: []string{"GET api.github.com/repos/**"}, Inspect: []string{"*.github.com"}}, ""},
		{Spec{Allow: []string{"GET *.github.com/**"}, Inspect: []string{"api.github.com"}}, "cannot be enforced"},
		{Spec{Allow: []string{"GET api.github.com:443/x"}, Inspect: []string{"api.github.com:8443"}}, "cannot be enforced"},
		{Spec{Allow: []string{"GET api.github.com/x"}, Inject: []string{"api.github.com:authorization=Bearer secret:GH"}}, ""},
		{Spec{Allow: []string{"GET plain.test:80/x"}}, ""},
		{Spec{Allow: []string{"GET 198.51.100.0/24"}}, "names a domain"},
		{Spec{Inspect: []string{"GET api.github.com/x"}}, "name a host"},
		{Spec{Inspect: []string{"198.51.100.0/24"}}, "name a host"},
		{Spec{Inject: []string{"GET api.github.com:x=secret:A"}}, "a method or a path"},
	} {
		_, err := Compile(tc.spec)
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%+v: %v", tc.spec, err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%+v: %v, want an error saying %q", tc.spec, err, tc.says)
		}
	}
}

func TestRequestDecisions(t *testing.T) {
	p := mustCompile(t, Spec{Mode: Custom, Inspect: []string{"api.test"},
		Allow: []string{"GET api.test/repos/**", "PUT api.test/repos/*/topics", "other.test"},
		Deny:  []string{"POST api.test/**", "api.test/repos/*/secrets/**"}})
	api, other := Host{Name: "api.test"}, Host{Name: "other.test"}
	for _, tc := range []struct {
		h            Host
		method, path string
		rule         string // "" = blocked by no rule
		allowed      bool
	}{
		{api, "GET", "/repos/a/b", "allow GET api.test/repos/**", true},
		{api, "get", "/repos/a/b", "allow GET api.test/repos/**", true},
		{api, "GET", "/repos/a/b?x=/admin", "allow GET api.test/repos/**", true}, // the query is not the path
		{api, "HEAD", "/repos/a", "", false},
		{api, "GET", "/admin", "", false},
		{api, "GET", "/repos/../admin", "", false},
		{api, "GET", "/repos/%2e%2e/admin", "", false},
		{api, "POST", "/repos/a", "deny POST api.test/**", false},
		{api, "post", "/repos/a", "deny POST api.test/**", false},
		{api, "PUT", "/repos/a/topics", "allow PUT api.test/repos/*/topics", true},
		{api, "PUT", "/repos/a/b/topics", "", false},
		{api, "GET", "/repos/a/secrets/k", "deny api.test/repos/*/secrets/**", false},
		{api, "GET", "/repos/a/x/../secrets/k", "deny api.test/repos/*/secrets/**", false},
		{other, "DELETE", "/anything", "allow other.test", true},
	} {
		path, _, _ := strings.Cut(tc.path, "?")
		d := p.Request(tc.h, 443, tc.method, path)
		want := tc.rule
		if want == "" {
			want = "no rule"
		}
		if d.Allowed != tc.allowed || d.Rule != want {
			t.Errorf("%s %s%s: %+v, want allowed=%v by %q", tc.method, tc.h, tc.path, d, tc.allowed, want)
		}
	}
	// The connection: a request allow rule opens it, a request deny rule
	// does not close it.
	if d := p.Host(api, 443); !d.Allowed {
		t.Errorf("connection to api.test: %+v", d)
	}
	if d := p.NameAnyPort("api.test"); !d.Allowed {
		t.Errorf("lookup of api.test: %+v", d)
	}
	// Deny beats allow, and allow-all still answers to a request deny.
	q := mustCompile(t, Spec{Mode: AllowAll, Inspect: []string{"api.test"}, Allow: []string{"POST api.test/**"}, Deny: []string{"POST api.test/admin/**"}})
	if d := q.Request(api, 443, "POST", "/admin/x"); d.Allowed {
		t.Errorf("allow-all with a deny: %+v", d)
	}
	if d := q.Request(api, 443, "POST", "/x"); !d.Allowed {
		t.Errorf("allow-all: %+v", d)
	}
}

// requestSetup is a proxy under request rules, an upstream on plain HTTP
// and one on TLS (both example.com, the name of httptest's certificate,
// and other.test), recording the requests that reached them.
type requestSetup struct {
	*injectionSetup
	client *http.Client
	mu     sync.Mutex
	hits   []string
}

func newRequestSetup(t *testing.T, spec Spec) *requestSetup {
	s := &requestSetup{injectionSetup: newInjectionSetup(t)}
	s.x.SetPolicy(mustCompile(t, spec))
	u, _ := url.Parse(s.purl)
	s.client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: s.sessionRoots}}}
	return s
}

func (s *requestSetup) do(t *testing.T, method, target string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, target, strings.NewReader("body"))
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Against a real proxy and real servers: plain HTTP requests are always
// read; HTTPS ones on a host marked for inspection (TLS ends at the
// proxy with the engine's CA). Each request's method, path and rule are
// in the log.
func TestProxyRequestRules(t *testing.T) {
	spec := Spec{Mode: Custom, Private: true, Inspect: []string{"example.com"},
		Allow: []string{"GET example.com/repos/**", "GET example.com/v1/*.json", "other.test:80"},
		Deny:  []string{"POST example.com/**", "example.com/repos/*/secrets/**"}}
	// example.com is inspected on every port: the plain HTTP upstream's
	// too (a plain HTTP rule needs no inspection only on port 80).
	s := newRequestSetup(t, spec)
	for _, scheme := range []struct{ name, port string }{{"https", s.tport}, {"http", s.pport}} {
		base := scheme.name + "://example.com:" + scheme.port
		for _, tc := range []struct {
			method, path string
			status       int
			rule         string
		}{
			{"GET", "/repos/octo/hello", 200, "allow GET example.com"},
			{"GET", "/repos/octo/hello?admin=1", 200, "allow GET example.com"},
			{"POST", "/repos/octo/hello", 403, "deny POST example.com"},
			{"GET", "/admin", 403, "no rule"},
			{"GET", "/repos/../admin", 403, "no rule"},
			{"GET", "/repos/%2e%2e/admin", 403, "no rule"},
			{"GET", "/repos/octo/secrets/token", 403, "deny example.com/repos/*/secrets/**"},
		} {
			before := len(s.logs())
			status, body := s.do(t, tc.method, base+tc.path)
			if status != tc.status {
				t.Errorf("%s %s%s: %d %q, want %d", tc.method, base, tc.path, status, body, tc.status)
			}
			if tc.status == 403 && !strings.Contains(body, "Airlock blocked") {
				t.Errorf("%s %s%s: the refusal does not say why: %q", tc.method, base, tc.path, body)
			}
			var found bool
			for _, l := range s.logs()[before:] {
				if l.Method == tc.method && strings.HasPrefix(l.Rule, tc.rule) && l.Allowed == (tc.status == 200) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s %s%s: no log entry with rule %q: %+v", tc.method, base, tc.path, tc.rule, s.logs()[before:])
			}
		}
	}
	// What reached the upstreams: only the allowed GETs, two per scheme.
	if got := s.upstream(); len(got) != 4 {
		t.Errorf("upstream saw %d requests, want 4: %q", len(got), got)
	}
	// The log's path is the one the rules matched.
	for _, l := range s.logs() {
		if l.Method != "" && strings.Contains(l.Path, "..") {
			t.Errorf("a log path not cleaned: %+v", l)
		}
	}
}

// A rule on a host whose TLS the proxy does not end is refused when the
// policy is set, so the running policy stays what it was.
func TestProxyRequestRuleRefused(t *testing.T) {
	_, err := Compile(Spec{Mode: Custom, Allow: []string{"GET other.test/repos/**"}})
	if err == nil || !strings.Contains(err.Error(), "--inspect other.test") {
		t.Fatalf("a request rule on a host not inspected: %v", err)
	}
}

// BenchmarkRequestDecision measures the added latency of a request rule
// on an inspected host against a host rule, both through the proxy on
// loopback (the TLS termination is in both, so the figure is the
// decision's).
func BenchmarkRequestDecision(b *testing.B) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "https://"))
	for _, bc := range []struct {
		name string
		spec Spec
	}{
		{"host-rule", Spec{Mode: Custom, Private: true, Inspect: []string{"example.com"}, Allow: []string{"example.com"}}},
		{"request-rule", Spec{Mode: Custom, Private: true, Inspect: []string{"example.com"},
			Allow: []string{"GET example.com/repos/*/issues/**", "GET example.com/v1/**"}, Deny: []string{"POST example.com/**", "example.com/repos/*/secrets/**"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			x := NewProxy(nil)
			p, err := Compile(bc.spec)
			if err != nil {
				b.Fatal(err)
			}
			x.SetPolicy(p)
			x.Resolve = loopbackResolve
			ca, err := LoadCA(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			x.CA = ca
			x.RootCAs = x509.NewCertPool()
			x.RootCAs.AddCert(up.Certificate())
			srv := httptest.NewServer(x)
			defer srv.Close()
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			u, _ := url.Parse(srv.URL)
			c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: roots}}}
			target := "https://example.com:" + port + "/repos/octo/issues/1"
			getP50(b, c, target)
		})
	}
}

// BenchmarkDecide is the decision alone: a host rule's and a request
// rule's, on the same request.
func BenchmarkDecide(b *testing.B) {
	h := Host{Name: "example.com"}
	host := mustCompileB(b, Spec{Mode: Custom, Inspect: []string{"example.com"}, Allow: []string{"example.com"}})
	req := mustCompileB(b, Spec{Mode: Custom, Inspect: []string{"example.com"},
		Allow: []string{"GET example.com/repos/*/issues/**", "GET example.com/v1/**"}, Deny: []string{"POST example.com/**", "example.com/repos/*/secrets/**"}})
	b.Run("host-rule", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if !host.Host(h, 443).Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("request-rule", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if !req.Host(h, 443).Allowed || !req.Request(h, 443, "GET", "/repos/octo/issues/1").Allowed {
				b.Fatal("denied")
			}
		}
	})
}

func mustCompileB(b *testing.B, s Spec) *Policy {
	p, err := Compile(s)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// getP50 GETs target b.N times through c and reports the median time.
func getP50(b *testing.B, c *http.Client, target string) {
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := c.Get(target)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
}
