package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is one connection (or DNS query) a session made, for the log.
type Conn struct {
	Time     time.Time     `json:"time"`
	Kind     string        `json:"kind"` // http, connect, https (a request inside an intercepted connection), tcp, dns
	Host     string        `json:"host"`
	Port     int           `json:"port,omitempty"`
	Method   string        `json:"method,omitempty"` // of a request the proxy read (http, https)
	Path     string        `json:"path,omitempty"`   // cleaned, as rules match it, without the query
	Addr     string        `json:"addr,omitempty"`   // the address connected to
	BytesOut int64         `json:"bytes_out"`
	BytesIn  int64         `json:"bytes_in"`
	Allowed  bool          `json:"allowed"`
	Rule     string        `json:"rule,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Duration time.Duration `json:"duration"`
}

// Proxy carries a session's HTTP and HTTPS traffic under its policy. It
// is an http.Handler for proxy requests (absolute-URI requests and
// CONNECT).
type Proxy struct {
	policy atomic.Pointer[Policy]
	// Log receives every connection once it ends or is refused.
	Log func(Conn)
	// Resolve looks names up (default: the host's resolver).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// CA signs the certificates of hosts with injections; Secrets give
	// the values they name; RootCAs verify upstream TLS (nil: the
	// system's).
	CA      *CA
	Secrets Secrets
	RootCAs *x509.CertPool
	// HelloTimeout is how long a CONNECT's client has to send its whole
	// TLS ClientHello (0: 10 s).
	HelloTimeout time.Duration
	// Asker puts what no rule decides under the ask mode to the user
	// (nil: no one is asked, undecided is denied) for as long as the
	// policy's AskTimeout.
	Asker    Asker
	asking   asking
	dialer   net.Dialer
	httpOnce sync.Once
	http     *http.Transport
}

// NewProxy returns a proxy enforcing p.
func NewProxy(p *Policy) *Proxy {
	x := &Proxy{dialer: net.Dialer{Timeout: 10 * time.Second}}
	x.policy.Store(p)
	return x
}

// SetPolicy replaces the policy; new connections follow it at once.
func (x *Proxy) SetPolicy(p *Policy) { x.policy.Store(p) }

// Policy returns the policy in force.
func (x *Proxy) Policy() *Policy { return x.policy.Load() }

func (x *Proxy) log(c Conn) {
	if x.Log != nil {
		x.Log(c)
	}
}

func (x *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if x.Resolve != nil {
		return x.Resolve(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// blocked is a refusal with the decision that made it.
type blocked struct{ d Decision }

func (b *blocked) Error() string { return b.d.Reason }

// dial connects to h:port if the policy allows the host and every address
// it would connect to (each address a name resolves to is checked: DNS
// rebinding).
// A connection no rule decides under the ask mode is asked about as q
// (nil: it was decided already, by its request or its CONNECT, and is
// not asked again).
func (x *Proxy) dial(ctx context.Context, h Host, port int, q *Question) (net.Conn, Decision, error) {
	p := x.policy.Load()
	d := p.Host(h, port)
	if d.Ask && q == nil {
		d = Decision{Allowed: true, Rule: "asked"}
	} else if d.Ask {
		d = x.decide(ctx, d, *q)
	}
	if !d.Allowed {
		return nil, d, &blocked{d}
	}
	if h.IsAddr() {
		c, err := x.dialer.DialContext(ctx, "tcp", h.hostPort(port))
		return c, d, err
	}
	addrs, err := x.resolve(ctx, h.Name)
	if err != nil {
		return nil, d, fmt.Errorf("resolve %s: %w", h.Name, err)
	}
	var last error
	lastBlock := Decision{Rule: "address", Reason: "no address"}
	for _, a := range addrs {
		ad := p.Resolved(h.Name, a, port)
		if !ad.Allowed {
			lastBlock = ad
			continue
		}
		c, err := x.dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, d, nil
		}
		last = err
	}
	if last == nil {
		lastBlock.Reason = h.Name + " resolves only to blocked addresses: " + lastBlock.Reason
		return nil, lastBlock, &blocked{lastBlock}
	}
	return nil, d, last
}

// ServeHTTP serves proxy requests.
func (x *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		x.connect(w, r)
	case r.URL.IsAbs() && r.URL.Host != "":
		x.forward(w, r)
	default:
		http.Error(w, "this is Airlock's egress proxy: send proxy requests (absolute URLs or CONNECT)", http.StatusBadRequest)
	}
}

// refuse answers a blocked request in words, with the rule, and logs it.
func (x *Proxy) refuse(w http.ResponseWriter, entry Conn, d Decision) {
	w.Header().Set("X-Airlock-Blocked", d.Rule)
	msg := fmt.Sprintf("Airlock blocked %s: %s (rule: %s).", entry.Host, d.Reason, d.Rule)
	switch d.Rule {
	case "address", "host", "inject": // no rule lets these through
	default:
		what := entry.Host
		if entry.Method != "" {
			host := entry.Host
			if entry.Kind == "http" { // a rule without a port would need the host inspected
				host = net.JoinHostPort(host, strconv.Itoa(entry.Port))
			}
			what = fmt.Sprintf("'%s %s%s'", entry.Method, host, entry.Path)
		}
		msg += fmt.Sprintf(" Allow it with `airlock policy SESSION --allow %s` or from `airlock net log SESSION`.", what)
	}
	http.Error(w, msg, http.StatusForbidden)
	entry.Allowed, entry.Rule, entry.Reason = false, d.Rule, d.Reason
	entry.Duration = time.Since(entry.Time)
	x.log(entry)
}

// clip shortens what a session wrote for the log.
func clip(s string) string {
	if len(s) > 255 {
		return s[:255] + "..."
	}
	return s
}

func (x *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h, port, err := parseTarget(r.Host, 443)
	entry := Conn{Time: start, Kind: "connect", Host: h.String(), Port: port}
	if err != nil {
		entry.Host = clip(r.Host)
		x.refuse(w, entry, Decision{Rule: "address", Reason: err.Error()})
		return
	}
	// A client that half-closes after its CONNECT looks to net/http like
	// one that went away; the decision (and its log entry) must not
	// depend on that race. The dialer's timeout bounds the wait.
	up, d, err := x.dial(context.WithoutCancel(r.Context()), h, port, &Question{Kind: "connect", Host: h.String(), Port: port})
	entry.Rule = d.Rule
	if err != nil {
		var b *blocked
		if errors.As(err, &b) {
			x.refuse(w, entry, b.d)
			return
		}
		entry.Allowed, entry.Reason = true, "upstream: "+err.Error()
		http.Error(w, "Airlock could not reach "+h.hostPort(port)+": "+err.Error(), http.StatusBadGateway)
		entry.Duration = time.Since(start)
		x.log(entry)
		return
	}
	defer up.Close()
	entry.Allowed, entry.Addr = true, up.RemoteAddr().String()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer client.Close()
	io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n")
	// Nothing goes upstream before the ClientHello is read whole and
	// names the host the CONNECT asked for: a connection allowed for one
	// name never carries another.
	rule := "tls"
	hl, first, err := readClientHello(client, brw.Reader, x.HelloTimeout)
	if err == nil {
		rule, err = "sni", x.checkHello(h, port, hl)
	}
	if err != nil {
		entry.Allowed, entry.Rule, entry.Reason = false, rule, err.Error()
		entry.Duration = time.Since(start)
		x.log(entry)
		return
	}
	if list := x.injectionsFor(h, port); len(list) > 0 || x.inspected(h, port) {
		up.Close() // the intercepting path makes its own upstream connections
		x.mitm(client, first, h, port, list, &entry)
		entry.Duration = time.Since(start)
		x.log(entry)
		return
	}
	entry.BytesOut, entry.BytesIn = splice(client, first, up)
	entry.Duration = time.Since(start)
	x.log(entry)
}

// checkHello says why a ClientHello may not go to h:port, if it may not.
// To a name, the server name must be that name. To an address, a client
// sends no server name (RFC 6066 has none for addresses), or the address,
// or a name the policy allows there.
func (x *Proxy) checkHello(h Host, port int, hl hello) error {
	if hl.ECH {
		return errors.New("the TLS ClientHello hides the server name it asks for (Encrypted Client Hello), so it cannot be checked: turn ECH off in the client (Chromium: --disable-features=EncryptedClientHello)")
	}
	if hl.ServerName == "" {
		if h.IsAddr() {
			return nil
		}
		return fmt.Errorf("the TLS ClientHello has no server name, so it cannot be checked against the CONNECT host %s", h)
	}
	sni, err := ParseHost(hl.ServerName)
	if err != nil {
		return fmt.Errorf("the TLS server name: %v", err)
	}
	switch {
	case sni == h:
		return nil
	case h.IsAddr() && !sni.IsAddr():
		if d := x.policy.Load().Host(sni, port); !d.Allowed {
			return fmt.Errorf("the TLS server name %s is not allowed (%s) on a connection to %s", sni, d.Reason, h)
		}
		return nil
	}
	return fmt.Errorf("the TLS server name %s differs from the CONNECT host %s", sni, h)
}

// splice copies both ways until either side is done; it returns the
// bytes sent out and received.
func splice(client net.Conn, fromClient io.Reader, up net.Conn) (int64, int64) {
	var out, in int64
	done := make(chan struct{})
	go func() {
		out, _ = io.Copy(up, fromClient)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		close(done)
	}()
	in, _ = io.Copy(client, up)
	if cw, ok := client.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
	client.Close()
	up.Close()
	<-done
	return out, in
}

// forward carries a plain-HTTP proxy request (net/http takes the host
// from the URL and drops a Host header that says otherwise). Plain HTTP
// never carries a secret: a request to a host with injections is refused.
func (x *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h, port, err := parseTarget(r.URL.Host, 80)
	entry := Conn{Time: start, Kind: "http", Host: h.String(), Port: port, Method: clip(r.Method), Path: clip(cleanPath(r.URL.EscapedPath()))}
	if err != nil {
		entry.Host = clip(r.URL.Host)
		x.refuse(w, entry, Decision{Rule: "address", Reason: err.Error()})
		return
	}
	if r.URL.Scheme != "http" {
		http.Error(w, "only http:// URLs go through the proxy as requests; https uses CONNECT", http.StatusBadRequest)
		return
	}
	if len(x.injectionsFor(h, port)) > 0 {
		x.refuse(w, entry, Decision{Rule: "inject", Reason: fmt.Sprintf("a plain HTTP request to %s, whose requests carry a secret: secrets go only over TLS, so use https://%s", h, h.hostPort(port))})
		return
	}
	// Decide before forwarding, for a refusal in words: the host, then
	// the request.
	p := x.policy.Load()
	d := p.Host(h, port)
	if d.Allowed || d.Ask {
		d = p.Request(h, port, r.Method, r.URL.EscapedPath())
	}
	d = x.decide(r.Context(), d, Question{Kind: "http", Host: h.String(), Port: port, Method: entry.Method, Path: entry.Path})
	if !d.Allowed {
		x.refuse(w, entry, d)
		return
	}
	x.httpOnce.Do(func() {
		x.http = &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				h, p, err := parseTarget(addr, 80)
				if err != nil {
					return nil, err
				}
				c, _, err := x.dial(ctx, h, p, nil) // forward decided
				return c, err
			},
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     60 * time.Second,
		}
	})
	in := &countingReader{r: r.Body}
	r.Body = in
	rw := &countingWriter{ResponseWriter: w}
	var upErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := *r.URL
			u.Host = h.hostPort(port)
			pr.Out.URL = &u
			pr.Out.Host = r.URL.Host
			// A client that half-closes after its request (HTTP/1.0
			// style) looks to net/http like one that went away; the
			// answer must still come. A client really gone fails the
			// copy of the answer instead.
			pr.Out = pr.Out.WithContext(context.WithoutCancel(pr.In.Context()))
		},
		Transport:     x.http,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			upErr = err
			var b *blocked
			if errors.As(err, &b) {
				w.Header().Set("X-Airlock-Blocked", b.d.Rule)
				http.Error(w, fmt.Sprintf("Airlock blocked %s: %s (rule: %s)", h, b.d.Reason, b.d.Rule), http.StatusForbidden)
				return
			}
			http.Error(w, "Airlock could not reach "+h.hostPort(port)+": "+err.Error(), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(rw, r)
	entry.Allowed, entry.Rule = true, d.Rule
	var b *blocked
	if errors.As(upErr, &b) {
		entry.Allowed, entry.Rule, entry.Reason = false, b.d.Rule, b.d.Reason
	} else if upErr != nil {
		entry.Reason = "upstream: " + upErr.Error()
	}
	entry.BytesOut, entry.BytesIn = in.n, rw.n
	entry.Duration = time.Since(start)
	x.log(entry)
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
