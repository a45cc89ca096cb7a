package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is one connection (or DNS query) a session made, for the log.
type Conn struct {
	Time     time.Time     `json:"time"`
	Kind     string        `json:"kind"` // http, connect, tcp, dns
	Host     string        `json:"host"`
	Port     int           `json:"port,omitempty"`
	Addr     string        `json:"addr,omitempty"` // the address connected to
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
	// CA signs the certificates of hosts with injections; Secret gives a
	// secret's value; RootCAs verify upstream TLS (nil: the system's).
	CA       *CA
	Secret   func(name string) (string, error)
	RootCAs  *x509.CertPool
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

// dial connects to host:port if the policy allows the name (or address)
// and the address it resolves to.
func (x *Proxy) dial(ctx context.Context, host string, port int) (net.Conn, Decision, error) {
	p := x.policy.Load()
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		d := p.Addr(a, port, false)
		if !d.Allowed {
			return nil, d, &blocked{d}
		}
		c, err := x.dialer.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
		return c, d, err
	}
	d := p.Name(host, port)
	if !d.Allowed {
		return nil, d, &blocked{d}
	}
	addrs, err := x.resolve(ctx, host)
	if err != nil {
		return nil, d, fmt.Errorf("resolve %s: %w", host, err)
	}
	var last error
	var lastBlock Decision
	for _, a := range addrs {
		ad := p.Addr(a, port, true)
		if !ad.Allowed {
			lastBlock = ad
			continue
		}
		c, err := x.dialer.DialContext(ctx, "tcp", net.JoinHostPort(a.Unmap().String(), strconv.Itoa(port)))
		if err == nil {
			return c, d, nil
		}
		last = err
	}
	if last == nil {
		lastBlock.Reason = host + " resolves only to blocked addresses: " + lastBlock.Reason
		return nil, lastBlock, &blocked{lastBlock}
	}
	return nil, d, last
}

func splitHostPort(hostport string, def int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.Trim(hostport, "[]"), def, nil
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hostport)
	}
	return host, port, nil
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

// refuse answers a blocked request in words, with the rule.
func refuse(w http.ResponseWriter, host string, d Decision) {
	w.Header().Set("X-Airlock-Blocked", d.Rule)
	http.Error(w, fmt.Sprintf("Airlock blocked %s: %s (rule: %s). Allow it with `airlock policy SESSION --allow %s` or from `airlock net log SESSION`.",
		host, d.Reason, d.Rule, host), http.StatusForbidden)
}

func (x *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	host, port, err := splitHostPort(r.Host, 443)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	entry := Conn{Time: start, Kind: "connect", Host: host, Port: port}
	up, d, err := x.dial(r.Context(), host, port)
	entry.Rule = d.Rule
	if err != nil {
		var b *blocked
		if errors.As(err, &b) {
			entry.Rule, entry.Reason = b.d.Rule, b.d.Reason
			refuse(w, host, b.d)
		} else {
			entry.Allowed, entry.Reason = true, "upstream: "+err.Error()
			http.Error(w, "Airlock could not reach "+r.Host+": "+err.Error(), http.StatusBadGateway)
		}
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
	// A TLS client names the server it wants (SNI). It must be the name
	// the CONNECT asked for: a connection allowed for one name never
	// carries another.
	first := newPeek(brw.Reader)
	if list := x.injectionsFor(host, port); len(list) > 0 {
		if sni, isTLS := first.serverName(); isTLS && sni != "" && !strings.EqualFold(sni, host) {
			entry.Allowed, entry.Rule, entry.Reason = false, "sni", fmt.Sprintf("the TLS server name %s differs from the CONNECT host %s", sni, host)
		} else {
			up.Close() // the injecting path makes its own upstream connections
			x.mitm(client, first, host, port, list, &entry)
		}
		entry.Duration = time.Since(start)
		x.log(entry)
		return
	}
	if sni, isTLS := first.serverName(); isTLS && sni != "" && !isAddr(host) && !strings.EqualFold(strings.TrimSuffix(sni, "."), strings.TrimSuffix(host, ".")) {
		entry.Allowed, entry.Rule = false, "sni"
		entry.Reason = fmt.Sprintf("the TLS server name %s differs from the CONNECT host %s", sni, host)
		entry.Duration = time.Since(start)
		x.log(entry)
		return
	}
	entry.BytesOut, entry.BytesIn = splice(client, first, up)
	entry.Duration = time.Since(start)
	x.log(entry)
}

func isAddr(h string) bool {
	_, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil
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

// forward carries a plain-HTTP proxy request. The name in the URL and
// the Host header must both be allowed: a request for one never reaches
// another.
func (x *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	host, port, err := splitHostPort(r.URL.Host, 80)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	entry := Conn{Time: start, Kind: "http", Host: host, Port: port}
	if r.URL.Scheme != "http" {
		http.Error(w, "only http:// URLs go through the proxy as requests; https uses CONNECT", http.StatusBadRequest)
		return
	}
	if hh, _, _ := splitHostPort(r.Host, port); hh != "" && !strings.EqualFold(hh, host) {
		entry.Rule, entry.Reason = "host", fmt.Sprintf("the Host header %s differs from the URL's host %s", hh, host)
		refuse(w, host, Decision{Rule: entry.Rule, Reason: entry.Reason})
		entry.Duration = time.Since(start)
		x.log(entry)
		return
	}
	x.httpOnce.Do(func() {
		x.http = &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				h, p, err := splitHostPort(addr, 80)
				if err != nil {
					return nil, err
				}
				c, _, err := x.dial(ctx, h, p)
				return c, err
			},
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     60 * time.Second,
		}
	})
	// Decide before forwarding, for a refusal in words.
	if d := x.decideName(host, port); !d.Allowed {
		entry.Rule, entry.Reason = d.Rule, d.Reason
		refuse(w, host, d)
		entry.Duration = time.Since(start)
		x.log(entry)
		return
	}
	in := &countingReader{r: r.Body}
	r.Body = in
	rw := &countingWriter{ResponseWriter: w}
	var upErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = r.URL
			pr.Out.Host = r.Host
			// A client that half-closes after its request (HTTP/1.0
			// style) looks to net/http like one that went away; the
			// answer must still come. A client really gone fails the
			// copy of the answer instead.
			pr.Out = pr.Out.WithContext(context.WithoutCancel(pr.In.Context()))
		},
		Transport:     &injecting{x: x, list: x.injectionsFor(host, port), next: x.http},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			upErr = err
			var b *blocked
			if errors.As(err, &b) {
				refuse(w, host, b.d)
				return
			}
			http.Error(w, "Airlock could not reach "+r.URL.Host+": "+err.Error(), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(rw, r)
	entry.Allowed, entry.Rule = true, x.decideName(host, port).Rule
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

func (x *Proxy) decideName(host string, port int) Decision {
	p := x.policy.Load()
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Addr(a, port, false)
	}
	return p.Name(host, port)
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

// peek reads a connection's first TLS record, when it is one, so that
// its server name can be checked, and then replays it.
type peek struct {
	r   *bufio.Reader
	buf []byte
}

func newPeek(r *bufio.Reader) *peek { return &peek{r: r} }

// serverName reads the ClientHello, if the client speaks TLS first, and
// returns its SNI.
func (p *peek) serverName() (string, bool) {
	hdr, err := p.r.Peek(5)
	if err != nil || hdr[0] != 0x16 { // not a TLS handshake
		return "", false
	}
	n := int(hdr[3])<<8 | int(hdr[4])
	rec, err := p.r.Peek(5 + n)
	if err != nil {
		return "", true
	}
	var sni string
	srv := tls.Server(&replayConn{r: bytes.NewReader(rec)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = h.ServerName
			return nil, errStopHandshake
		},
	})
	srv.Handshake()
	return sni, true
}

var errStopHandshake = errors.New("stop: the ClientHello is read")

func (p *peek) Read(b []byte) (int, error) { return p.r.Read(b) }

// replayConn is a net.Conn that reads recorded bytes and discards writes.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *replayConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *replayConn) Close() error                     { return nil }
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }
func (c *replayConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *replayConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
