package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// testProxy runs a proxy on loopback whose names *.test resolve to
// loopback, where the test's servers are.
func testProxy(t *testing.T, spec Spec) (*Proxy, string, func() []Conn) {
	t.Helper()
	x := NewProxy(mustCompile(t, spec))
	x.Resolve = loopbackResolve
	var mu sync.Mutex
	var logs []Conn
	x.Log = func(c Conn) { mu.Lock(); logs = append(logs, c); mu.Unlock() }
	srv := httptest.NewServer(x)
	t.Cleanup(srv.Close)
	// An entry is written once its connection is done, which can be just
	// after the client has its answer: wait a moment for the count to
	// settle.
	return x, srv.URL, func() []Conn {
		var n int
		for i := 0; i < 100; i++ {
			mu.Lock()
			m := len(logs)
			mu.Unlock()
			if m == n && i > 0 {
				break
			}
			n = m
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]Conn(nil), logs...)
	}
}

// loopbackResolve resolves *.test and example.com (httptest's
// certificate's name) to loopback, and nothing else.
func loopbackResolve(_ context.Context, host string) ([]netip.Addr, error) {
	if strings.HasSuffix(host, ".test") || host == "example.com" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

func viaProxy(proxyURL string) *http.Client {
	u, _ := url.Parse(proxyURL)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

func TestProxyHTTP(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from "+r.Host) }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	x, purl, logs := testProxy(t, Spec{Mode: Custom, Allow: []string{"ok.test"}, Private: true})
	c := viaProxy(purl)

	resp, err := c.Get("http://ok.test:" + port + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello from ok.test:"+port {
		t.Fatalf("allowed request: %d %q", resp.StatusCode, body)
	}
	resp, err = c.Get("http://other.test:" + port + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "no rule allows other.test") || resp.Header.Get("X-Airlock-Blocked") == "" {
		t.Fatalf("blocked request: %d %q", resp.StatusCode, body)
	}
	// The Host header may not name another host than the URL.
	req, _ := http.NewRequest("GET", "http://ok.test:"+port+"/x", nil)
	req.Host = "other.test"
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("Host header mismatch: %d", resp.StatusCode)
	}
	// A policy change applies to the next connection.
	x.SetPolicy(mustCompile(t, Spec{Mode: Custom, Allow: []string{"other.test"}, Private: true}))
	resp, err = c.Get("http://other.test:" + port + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after the policy change: %d", resp.StatusCode)
	}
	l := logs()
	if len(l) != 4 || !l[0].Allowed || l[0].BytesIn == 0 || l[1].Allowed || l[1].Rule != "no rule" || l[2].Allowed || !l[3].Allowed {
		t.Fatalf("log %+v", l)
	}
}

func TestProxyConnect(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "https://"))
	_, purl, logs := testProxy(t, Spec{Mode: Custom, Allow: []string{"ok.test", "*.ok.test"}, Deny: []string{"bad.ok.test"}, Private: true})
	c := viaProxy(purl)
	resp, err := c.Get("https://ok.test:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "secure" {
		t.Fatalf("allowed CONNECT: %q", body)
	}
	if _, err := c.Get("https://bad.ok.test:" + port + "/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("denied CONNECT: %v", err)
	}

	// CONNECT to an allowed name, then TLS naming another: refused.
	pc, err := net.Dial("tcp", strings.TrimPrefix(purl, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	fmt.Fprintf(pc, "CONNECT ok.test:%s HTTP/1.1\r\nHost: ok.test:%s\r\n\r\n", port, port)
	br := bufio.NewReader(pc)
	status, _ := br.ReadString('\n')
	for line, _ := br.ReadString('\n'); line != "\r\n" && line != ""; line, _ = br.ReadString('\n') {
	}
	if !strings.Contains(status, "200") {
		t.Fatalf("CONNECT answered %q", status)
	}
	tc := tls.Client(&bufConn{Conn: pc, r: br}, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Fatalf("a TLS handshake naming evil.test went through a CONNECT to ok.test")
	}
	l := logs()
	last := l[len(l)-1]
	if last.Allowed || last.Rule != "sni" || !strings.Contains(last.Reason, "evil.test") {
		t.Fatalf("log %+v", last)
	}
}

// A name that resolves to a private address stays blocked without the
// opt-in, whatever the rules say of the name.
func TestProxyRebinding(t *testing.T) {
	_, purl, logs := testProxy(t, Spec{Mode: AllowAll})
	c := viaProxy(purl)
	resp, err := c.Get("http://inside.test:8080/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "loopback") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if _, err := c.Get("https://127.0.0.1:9/"); err == nil {
		t.Fatalf("a CONNECT to a loopback address went through")
	}
	if l := logs(); len(l) != 2 || l[0].Allowed || l[1].Allowed {
		t.Fatalf("log %+v", l)
	}
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// A host with an injection gets the secret in transit over HTTPS (TLS
// ends at the proxy with the engine's CA, and starts again to the real
// host, verified); the client only ever has a placeholder. (Plain HTTP
// never carries one: TestHostileInjection.)
func TestInjection(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "upstream ok")
	})
	tlsUp := httptest.NewTLSServer(handler)
	defer tlsUp.Close()
	_, tport, _ := net.SplitHostPort(strings.TrimPrefix(tlsUp.URL, "https://"))

	x, purl, logs := testProxy(t, Spec{Mode: Custom, Allow: []string{"example.com"}, Private: true})
	ca, err := LoadCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	x.CA = ca
	roots := x509.NewCertPool()
	roots.AddCert(tlsUp.Certificate())
	x.RootCAs = roots
	x.Secrets = SecretFunc(func(_ context.Context, name string) (string, error) {
		if name == "API_KEY" {
			return "the-real-key", nil
		}
		return "", fmt.Errorf("no secret %s", name)
	})
	x.SetPolicy(mustCompile(t, Spec{Mode: Custom, Allow: []string{"example.com"}, Private: true,
		Inject: []string{"example.com:x-api-key=secret:API_KEY", "example.com:authorization=Bearer secret:API_KEY"}}))

	sessionRoots := x509.NewCertPool()
	sessionRoots.AddCert(ca.Cert)
	u, _ := url.Parse(purl)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: sessionRoots}}}
	for _, target := range []string{"https://example.com:" + tport + "/v1", "https://EXAMPLE.com.:" + tport + "/v1"} {
		req, _ := http.NewRequest("GET", target, nil)
		req.Header.Set("X-Api-Key", "placeholder")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "upstream ok" {
			t.Fatalf("%s: %d %q", target, resp.StatusCode, body)
		}
	}
	mu.Lock()
	if len(seen) != 2 || seen[0] != "the-real-key|Bearer the-real-key" || seen[1] != seen[0] {
		t.Fatalf("upstream saw %q", seen)
	}
	mu.Unlock()
	for _, l := range logs() {
		if strings.Contains(fmt.Sprint(l), "the-real-key") {
			t.Fatalf("the secret is in the log: %+v", l)
		}
	}

	// An upstream whose certificate does not verify: a clear error.
	x.RootCAs = x509.NewCertPool()
	c = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: sessionRoots}}}
	resp, err := c.Get("https://example.com:" + tport + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(body), "does not verify") {
		t.Fatalf("untrusted upstream: %d %q", resp.StatusCode, body)
	}

	for bad, says := range map[string]string{
		"api.test:x-api-key=plain":     "names no secret",
		"api.test=secret:A":            "no header",
		"nope:x=secret:A":              "",
		"api test:x=secret:A":          "not allowed",
		"api.test:bad header=secret:A": "not a header",
	} {
		_, err := ParseInjection(bad)
		if says != "" && (err == nil || !strings.Contains(err.Error(), says)) {
			t.Errorf("%q: %v, want %q", bad, err, says)
		}
	}
}
