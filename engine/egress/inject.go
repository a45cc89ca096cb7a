package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Injection adds a header to a host's requests in transit, its value
// holding secrets the session never sees: "api.example.com:x-api-key=secret:NAME"
// or "api.example.com:443:authorization=Bearer secret:NAME".
type Injection struct {
	Text   string
	host   Rule
	Header string
	Value  string // with secret:NAME references
}

var secretRefRE = regexp.MustCompile(`secret:([A-Za-z_][A-Za-z0-9_]*)`)

// ParseInjection reads HOST[:PORT]:HEADER=VALUE, VALUE naming at least
// one secret as secret:NAME.
func ParseInjection(s string) (Injection, error) {
	inj := Injection{Text: s}
	eq := strings.Index(s, "=")
	if eq < 0 {
		return inj, fmt.Errorf("injection %q: write it HOST:HEADER=VALUE, e.g. api.example.com:x-api-key=secret:API_KEY", s)
	}
	left, value := s[:eq], s[eq+1:]
	c := strings.LastIndex(left, ":")
	if c < 0 {
		return inj, fmt.Errorf("injection %q: no header named: write HOST:HEADER=VALUE", s)
	}
	hostPart, header := left[:c], strings.TrimSpace(left[c+1:])
	if header == "" || strings.ContainsAny(header, " \t:") {
		return inj, fmt.Errorf("injection %q: %q is not a header name", s, header)
	}
	r, err := ParseRule(hostPart)
	if err != nil {
		return inj, fmt.Errorf("injection %q: %v", s, err)
	}
	if r.private || r.isRequest() {
		return inj, fmt.Errorf("injection %q: name the host without private:, a method or a path", s)
	}
	if !secretRefRE.MatchString(value) {
		return inj, fmt.Errorf("injection %q: the value names no secret: use secret:NAME (stored with `airlock secret set NAME`)", s)
	}
	inj.host, inj.Header, inj.Value = r, http.CanonicalHeaderKey(header), value
	return inj, nil
}

// Secrets lists the secret names an injection uses.
func (i Injection) Secrets() []string {
	var out []string
	for _, m := range secretRefRE.FindAllStringSubmatch(i.Value, -1) {
		out = append(out, m[1])
	}
	return out
}

// inspected reports whether the policy marks h:port for inspection.
func (x *Proxy) inspected(h Host, port int) bool {
	for _, r := range x.policy.Load().Inspect {
		if r.match(h, port) {
			return true
		}
	}
	return false
}

func (x *Proxy) injectionsFor(h Host, port int) []Injection {
	var out []Injection
	for _, i := range x.policy.Load().Inject {
		if i.host.match(h, port) {
			out = append(out, i)
		}
	}
	return out
}

// Secrets gives the values injections name (secret:NAME) for the session
// a proxy serves, when a request goes out; the proxy keeps none of them.
// The engine's are engine/secrets's store, asked for the proxy's session.
type Secrets interface {
	// Value is secret name's value, an error when the session has none.
	Value(ctx context.Context, name string) (string, error)
}

// SecretFunc is Secrets from a function.
type SecretFunc func(ctx context.Context, name string) (string, error)

// Value implements Secrets.
func (f SecretFunc) Value(ctx context.Context, name string) (string, error) { return f(ctx, name) }

// inject sets the injected headers on an outgoing request.
func (x *Proxy) inject(ctx context.Context, h http.Header, list []Injection) error {
	for _, i := range list {
		var err error
		v := secretRefRE.ReplaceAllStringFunc(i.Value, func(ref string) string {
			name := ref[len("secret:"):]
			if x.Secrets == nil {
				err = fmt.Errorf("no secrets here")
				return ""
			}
			val, e := x.Secrets.Value(ctx, name)
			if e != nil && err == nil {
				err = e
			}
			return val
		})
		if err != nil {
			return err
		}
		h.Set(i.Header, v)
	}
	return nil
}

// mitm serves a CONNECT to a host with injections or marked for
// inspection: TLS ends here, with a certificate from the engine's CA,
// each request is decided by the policy's request rules (and logged with
// its method, path and rule), gets its headers, and goes on to the real
// host over TLS verified as usual. A request whose
// Host (or absolute URL) names another host than the CONNECT is refused:
// it would carry h's key to wherever the upstream routes that name
// (domain fronting).
func (x *Proxy) mitm(client net.Conn, first io.Reader, h Host, port int, list []Injection, entry *Conn) {
	if x.CA == nil {
		entry.Allowed, entry.Reason = false, "injection needs the engine's CA"
		return
	}
	leaf, err := x.CA.Leaf(h.String())
	if err != nil {
		entry.Reason = "certificate: " + err.Error()
		return
	}
	tc := tls.Server(&readerConn{Conn: client, r: first}, &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		entry.Reason = "the session's TLS handshake failed (does it trust the engine's CA?): " + err.Error()
		return
	}
	target := h.hostPort(port)
	hostHeader := target // the port, unless it is HTTPS's
	if port == 443 {
		hostHeader = strings.TrimSuffix(target, ":443")
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, _, err := x.dial(ctx, h, port, nil) // the CONNECT decided
			return c, err
		},
		TLSClientConfig:     &tls.Config{RootCAs: x.RootCAs, ServerName: h.String()},
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 4,
	}
	defer tr.CloseIdleConnections()
	var in, out int64
	var upErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "https", target
			pr.Out.Host = hostHeader
			pr.Out = pr.Out.WithContext(context.WithoutCancel(pr.In.Context()))
		},
		Transport:     &injecting{x: x, list: list, target: target, next: tr},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			upErr = err
			msg := "Airlock could not reach " + target + ": " + err.Error()
			var uerr x509.UnknownAuthorityError
			var herr x509.HostnameError
			if errors.As(err, &uerr) || errors.As(err, &herr) {
				msg = "Airlock refused " + target + ": its TLS certificate does not verify (" + err.Error() + "); if a proxy re-signs TLS on this network, give its CA with ca_bundle"
			}
			http.Error(w, msg, http.StatusBadGateway)
		},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := Conn{Time: time.Now(), Kind: "https", Host: h.String(), Port: port, Method: clip(r.Method), Path: clip(cleanPath(r.URL.EscapedPath()))}
		if err := sameHost(r, h, port); err != nil {
			req.Host = clip(r.Host)
			x.refuse(w, req, Decision{Rule: "host", Reason: err.Error()})
			return
		}
		d := x.policy.Load().Request(h, port, r.Method, r.URL.EscapedPath())
		d = x.decide(r.Context(), d, Question{Kind: "https", Host: req.Host, Port: port, Method: req.Method, Path: req.Path})
		if !d.Allowed {
			x.refuse(w, req, d)
			return
		}
		cr := &countingReader{r: r.Body}
		r.Body = cr
		cw := &countingWriter{ResponseWriter: w}
		rp.ServeHTTP(cw, r)
		out += cr.n
		in += cw.n
		req.Allowed, req.Rule, req.BytesOut, req.BytesIn = true, d.Rule, cr.n, cw.n
		req.Duration = time.Since(req.Time)
		x.log(req)
	}), ReadHeaderTimeout: 30 * time.Second}
	srv.Serve(&oneConn{c: tc})
	entry.BytesOut, entry.BytesIn = out, in
	if len(list) > 0 {
		entry.Rule += " (secret injected)"
	} else {
		entry.Rule += " (inspected)"
	}
	if upErr != nil {
		entry.Reason = "upstream: " + upErr.Error()
	}
}

// sameHost says why a request inside an intercepted connection to h:port
// names another host, if it does. A Host without a port means the
// connection's.
func sameHost(r *http.Request, h Host, port int) error {
	for _, hp := range []string{r.Host, r.URL.Host} {
		if hp == "" {
			continue
		}
		rh, rport, err := parseTarget(hp, port)
		if err != nil {
			return fmt.Errorf("the request's host: %v", err)
		}
		if rh != h || rport != port {
			return fmt.Errorf("the request names %s, but its TLS connection was opened to %s, whose requests carry a secret: a key for one host never goes to another", rh.hostPort(rport), h.hostPort(port))
		}
	}
	return nil
}

// injecting is a RoundTripper that sets the injected headers, on HTTPS
// requests to target only.
type injecting struct {
	x      *Proxy
	list   []Injection
	target string
	next   http.RoundTripper
}

func (t *injecting) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" || r.URL.Host != t.target {
		return nil, fmt.Errorf("a secret for %s would go to %s://%s", t.target, r.URL.Scheme, r.URL.Host)
	}
	if err := t.x.inject(r.Context(), r.Header, t.list); err != nil {
		return nil, fmt.Errorf("inject a secret: %w", err)
	}
	return t.next.RoundTrip(r)
}

// readerConn reads from r (what was peeked included) and writes to Conn.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConn is a listener that yields one connection, then waits for it to
// close.
type oneConn struct {
	c    net.Conn
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	l.mu.Unlock()
	var c net.Conn
	l.once.Do(func() { c = &closeNotify{Conn: l.c, done: l.done} })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }

type closeNotify struct {
	net.Conn
	done chan struct{}
	once sync.Once
}

func (c *closeNotify) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}
