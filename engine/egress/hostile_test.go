package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The attacks of a hostile session on the proxy, one scenario each: every
// one is refused, nothing reaches what it aimed at, and the session's log
// says why.

// loopbackTarget is a TCP service on 127.0.0.1 and ::1 (same port) that
// counts the connections it takes: what a session must never reach.
func loopbackTarget(t *testing.T) (int, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	l4, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l4.Addr().(*net.TCPAddr).Port
	ls := []net.Listener{l4}
	if l6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		ls = append(ls, l6)
	}
	for _, l := range ls {
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nthe host answers")
				c.Close()
			}
		}()
	}
	return port, &hits
}

// libcResolve resolves like getaddrinfo does: the numeric forms of an
// IPv4 address (2130706433, 0x7f.1, 0177.0.0.1, 127.1) are that address.
func libcResolve(_ context.Context, host string) ([]netip.Addr, error) {
	if strings.HasSuffix(host, ".test") || host == "localhost" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	parts := strings.Split(host, ".")
	var nums []uint64
	for _, p := range parts {
		n, err := strconv.ParseUint(p, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("no such host %s", host)
		}
		nums = append(nums, n)
	}
	var v uint32
	switch len(nums) {
	case 1:
		v = uint32(nums[0])
	case 2:
		v = uint32(nums[0])<<24 | uint32(nums[1])
	case 3:
		v = uint32(nums[0])<<24 | uint32(nums[1])<<16 | uint32(nums[2])
	case 4:
		v = uint32(nums[0])<<24 | uint32(nums[1])<<16 | uint32(nums[2])<<8 | uint32(nums[3])
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return []netip.Addr{netip.AddrFrom4(b)}, nil
}

// rawExchange sends raw bytes to the proxy and returns the status line
// of its answer, with the connection and its reader for what follows.
func rawExchange(t *testing.T, proxyURL, raw string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(proxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, raw)
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	for line, err := br.ReadString('\n'); line != "\r\n" && err == nil; line, err = br.ReadString('\n') {
	}
	return strings.TrimSpace(status), c, br
}

func lastRefusal(t *testing.T, logs func() []Conn) Conn {
	t.Helper()
	l := logs()
	for i := len(l) - 1; i >= 0; i-- {
		if !l[i].Allowed {
			return l[i]
		}
	}
	t.Errorf("no refusal in the log %+v", l)
	return Conn{}
}

// Every way of writing an address the session must not reach is refused,
// wherever the session gives one: a CONNECT, an absolute URL. Allow-all
// without the private opt-in is the most open policy these must hold in.
func TestHostileAddressForms(t *testing.T) {
	port, hits := loopbackTarget(t)
	p := strconv.Itoa(port)
	x, purl, logs := testProxy(t, Spec{Mode: AllowAll, Deny: []string{"evil.test", "*.evil.test"}})
	x.Resolve = libcResolve
	for _, target := range []string{
		"[::1%25lo]:" + p,              // a zoned loopback (the zone hid it from the range check)
		"[::1%25eth0]:" + p,            // any zone
		"[fe80::1%25eth0]:" + p,        // zoned link-local
		"[::ffff:127.0.0.1]:" + p,      // IPv4-mapped
		"[::ffff:7f00:1]:" + p,         // the same, in hex
		"[64:ff9b::7f00:1]:" + p,       // NAT64 of 127.0.0.1
		"[::127.0.0.1]:" + p,           // IPv4-compatible
		"0.0.0.0:" + p,                 // this host
		"[::]:" + p,                    // this host, IPv6
		"2130706433:" + p,              // 127.0.0.1 as one number
		"0x7f000001:" + p,              // in hex
		"0x7f.1:" + p,                  // two parts
		"0177.0.0.1:" + p,              // octal
		"127.1:" + p,                   // short form
		"127.0.0.1.:" + p,              // with a trailing dot
		"EVIL.TEST:" + p,               // denied, in upper case
		"evil.test.:" + p,              // denied, with the root's dot
		"evil.test..:" + p,             // two dots
		"a.EVIL.test.:" + p,            // a denied wildcard
		"%65vil.test:" + p,             // percent-encoded
		"ok.test%00.evil.test:" + p,    // a NUL
		"localhost:" + p,               // resolves to loopback
		"[0:0:0:0:0:ffff:7f00:1]:" + p, // mapped, long form
	} {
		for _, how := range []string{"CONNECT", "GET"} {
			var raw string
			if how == "CONNECT" {
				raw = "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
			} else {
				raw = "GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
			}
			before := len(logs())
			status, c, br := rawExchange(t, purl, raw)
			if strings.Contains(status, " 200") {
				c.SetDeadline(time.Now().Add(2 * time.Second))
				if how == "CONNECT" {
					io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
				}
				body, _ := io.ReadAll(br)
				t.Errorf("%s %s: %s %q", how, target, status, body)
				continue
			}
			if !strings.Contains(status, " 400") { // net/http's own refusal of a malformed request is not logged
				l := logs()
				if len(l) <= before || l[len(l)-1].Allowed || l[len(l)-1].Reason == "" {
					t.Errorf("%s %s: %s, log %+v: want a refusal with a reason", how, target, status, l[before:])
				}
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's loopback service took %d connections", n)
	}
}

// The DNS server answers no address form and no name the policy denies in
// another spelling.
func TestHostileDNS(t *testing.T) {
	x, _, _ := testProxy(t, Spec{Mode: AllowAll, Private: true, Deny: []string{"evil.test"}})
	x.Resolve = libcResolve
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, _ := net.ListenPacket("udp", "127.0.0.1:0")
	addr := l.LocalAddr().String()
	l.Close()
	if err := (&DNS{Proxy: x}).ServeDNSOn(ctx, addr); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"2130706433", "0x7f.1", "127.1", "127.0.0.1", "EVIL.TEST", "evil\\000.test", "ok.test\\%lo"} {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		r, err := dns.Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(r.Answer) != 0 || r.Rcode != dns.RcodeRefused {
			t.Errorf("%s: %v", name, r)
		}
	}
}

// clientHello returns the handshake message (not its records) a Go TLS
// client sends first with cfg.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() { tls.Client(a, cfg).Handshake() }()
	var msg []byte
	hdr := make([]byte, 5)
	for len(msg) < 4 || len(msg) < 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])) {
		if _, err := io.ReadFull(b, hdr); err != nil {
			t.Fatal(err)
		}
		rec := make([]byte, int(hdr[3])<<8|int(hdr[4]))
		if _, err := io.ReadFull(b, rec); err != nil {
			t.Fatal(err)
		}
		msg = append(msg, rec...)
	}
	b.Close()
	return msg
}

// records cuts a handshake message into TLS records of at most size bytes.
func records(msg []byte, size int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, 0x16, 3, 1, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// withExtension appends an extension to a ClientHello message.
func withExtension(msg []byte, typ uint16, data []byte) []byte {
	out := append([]byte(nil), msg...)
	// body: version(2) random(32) session id, cipher suites, compression, extensions
	i := 4 + 2 + 32
	i += 1 + int(out[i])
	i += 2 + (int(out[i])<<8 | int(out[i+1]))
	i += 1 + int(out[i])
	extLen := int(out[i])<<8 | int(out[i+1])
	ext := binary.BigEndian.AppendUint16(nil, typ)
	ext = binary.BigEndian.AppendUint16(ext, uint16(len(data)))
	ext = append(ext, data...)
	binary.BigEndian.PutUint16(out[i:], uint16(extLen+len(ext)))
	out = append(out, ext...)
	n := len(out) - 4
	out[1], out[2], out[3] = byte(n>>16), byte(n>>8), byte(n)
	return out
}

// A CONNECT carries TLS to the host it names and to no other, however the
// ClientHello is sent: large, split across records, without a name, with
// its real name encrypted, or not TLS at all.
func TestHostileClientHello(t *testing.T) {
	var served atomic.Int64
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "secure")
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "https://"))
	x, purl, logs := testProxy(t, Spec{Mode: Custom, Allow: []string{"ok.test", "127.0.0.1"}, Private: true})
	x.HelloTimeout = 300 * time.Millisecond

	big := make([]string, 100) // a 20 KB ClientHello: two records
	for i := range big {
		big[i] = strings.Repeat(string(rune('a'+i%26)), 200)
	}
	ech := append([]byte{0, 0, 1, 0, 1, 7, 0, 32}, make([]byte, 32)...)
	ech = append(ech, 0, 16)
	ech = append(ech, make([]byte, 16)...)
	for _, tc := range []struct {
		name   string
		target string
		hello  []byte
		says   string
	}{
		{"a ClientHello over 4 KB naming another host", "ok.test", records(clientHello(t, &tls.Config{ServerName: "evil.test", NextProtos: big[:20]}), 16384), "evil.test"},
		{"a ClientHello over 16 KB naming another host", "ok.test", records(clientHello(t, &tls.Config{ServerName: "evil.test", NextProtos: big}), 16384), "evil.test"},
		{"another host, in records of 50 bytes", "ok.test", records(clientHello(t, &tls.Config{ServerName: "evil.test"}), 50), "evil.test"},
		{"no server name", "ok.test", records(clientHello(t, &tls.Config{InsecureSkipVerify: true}), 16384), "no server name"},
		{"an encrypted server name (ECH)", "ok.test", records(withExtension(clientHello(t, &tls.Config{ServerName: "ok.test"}), 0xfe0d, ech), 16384), "Encrypted Client Hello"},
		{"not TLS", "ok.test", []byte("GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"), "not TLS"},
		{"a broken ClientHello", "ok.test", []byte{0x16, 3, 1, 0, 8, 1, 0, 0, 4, 3, 3, 0, 0}, "ClientHello"},
		{"a ClientHello over 64 KB", "ok.test", records(append([]byte{1, 1, 0, 0}, make([]byte, 70000)...), 16384), "ClientHello"},
		{"nothing at all", "ok.test", nil, "sent nothing"},
		{"an address, and a name no rule allows", "127.0.0.1", records(clientHello(t, &tls.Config{ServerName: "evil.test"}), 16384), "evil.test"},
	} {
		status, c, br := rawExchange(t, purl, "CONNECT "+tc.target+":"+port+" HTTP/1.1\r\nHost: "+tc.target+":"+port+"\r\n\r\n")
		if !strings.Contains(status, "200") {
			t.Fatalf("%s: CONNECT answered %q", tc.name, status)
		}
		c.Write(tc.hello)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(br)
		if len(got) > 0 && got[0] == 0x16 { // a ServerHello: the upstream got the connection
			t.Errorf("%s: the upstream answered", tc.name)
			continue
		}
		if r := lastRefusal(t, logs); !strings.Contains(r.Reason, tc.says) {
			t.Errorf("%s: log %+v, want a refusal saying %q", tc.name, r, tc.says)
		}
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the upstream served %d requests", n)
	}

	// What is legal goes through: a large ClientHello over several
	// records, and one without a name to an address.
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	for _, tc := range []struct {
		target string
		cfg    *tls.Config
	}{
		{"ok.test", &tls.Config{ServerName: "ok.test", NextProtos: append([]string{"http/1.1"}, big...), InsecureSkipVerify: true}},
		{"OK.test.", &tls.Config{ServerName: "ok.test", InsecureSkipVerify: true}},
		{"127.0.0.1", &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}, // no SNI for an address
	} {
		status, c, br := rawExchange(t, purl, "CONNECT "+tc.target+":"+port+" HTTP/1.1\r\nHost: x\r\n\r\n")
		if !strings.Contains(status, "200") {
			t.Fatalf("%s: CONNECT answered %q", tc.target, status)
		}
		tc2 := tls.Client(&bufConn{Conn: c, r: br}, tc.cfg)
		if err := tc2.Handshake(); err != nil {
			t.Errorf("%s (%d-byte ClientHello): %v; log %+v", tc.target, len(clientHello(t, tc.cfg)), err, logs()[len(logs())-1])
			continue
		}
		io.WriteString(tc2, "GET / HTTP/1.0\r\nHost: "+tc.target+"\r\n\r\n")
		body, _ := io.ReadAll(tc2)
		if !strings.HasSuffix(string(body), "secure") {
			t.Errorf("%s: %q", tc.target, body)
		}
	}
}

// injectionSetup is a proxy with secret injections for example.com, an
// upstream on TLS and one on plain HTTP that record what reached them,
// and the engine CA's pool for the session's side.
type injectionSetup struct {
	x            *Proxy
	purl         string
	logs         func() []Conn
	tport, pport string
	sessionRoots *x509.CertPool
	mu           sync.Mutex
	seen         []string // host|key of each request upstream
}

func (s *injectionSetup) upstream() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func newInjectionSetup(t *testing.T, inject ...string) *injectionSetup {
	t.Helper()
	s := &injectionSetup{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Host+"|"+r.Header.Get("X-Api-Key"))
		s.mu.Unlock()
		io.WriteString(w, "upstream ok")
	})
	tlsUp := httptest.NewTLSServer(handler)
	t.Cleanup(tlsUp.Close)
	plainUp := httptest.NewServer(handler)
	t.Cleanup(plainUp.Close)
	_, s.tport, _ = net.SplitHostPort(strings.TrimPrefix(tlsUp.URL, "https://"))
	_, s.pport, _ = net.SplitHostPort(strings.TrimPrefix(plainUp.URL, "http://"))
	s.x, s.purl, s.logs = testProxy(t, Spec{Mode: Custom, Allow: []string{"example.com", "other.test", "127.0.0.1"}, Private: true, Inject: inject})
	ca, err := LoadCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.x.CA = ca
	roots := x509.NewCertPool()
	roots.AddCert(tlsUp.Certificate())
	s.x.RootCAs = roots
	s.x.Secrets = SecretFunc(func(context.Context, string) (string, error) { return "the-real-key", nil })
	s.sessionRoots = x509.NewCertPool()
	s.sessionRoots.AddCert(ca.Cert)
	return s
}

// intercepted opens a CONNECT to target and TLS inside it with sni.
func (s *injectionSetup) intercepted(t *testing.T, target, sni string) (*tls.Conn, error) {
	t.Helper()
	status, c, br := rawExchange(t, s.purl, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	if !strings.Contains(status, "200") {
		return nil, fmt.Errorf("CONNECT %s: %s", target, status)
	}
	cfg := &tls.Config{RootCAs: s.sessionRoots, ServerName: sni}
	if sni == "" {
		cfg = &tls.Config{InsecureSkipVerify: true}
	}
	tc := tls.Client(&bufConn{Conn: c, r: br}, cfg)
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	return tc, tc.Handshake()
}

// Secrets go only over TLS, and only to the host the injection names:
// not over plain HTTP, not to another Host inside an intercepted
// connection (domain fronting), not without a server name.
func TestHostileInjection(t *testing.T) {
	s := newInjectionSetup(t, "example.com:x-api-key=secret:API_KEY", "127.0.0.1:x-api-key=secret:API_KEY")
	for _, tc := range []struct {
		name    string
		connect string // CONNECT target ("" for a plain request)
		sni     string
		request string
		says    string
	}{
		{"plain HTTP", "", "", "GET http://example.com:" + s.pport + "/ HTTP/1.1\r\nHost: example.com:" + s.pport + "\r\nConnection: close\r\n\r\n", "plain HTTP"},
		{"plain HTTP to an address", "", "", "GET http://127.0.0.1:" + s.pport + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + s.pport + "\r\nConnection: close\r\n\r\n", "plain HTTP"},
		{"another Host header", "example.com:" + s.tport, "example.com", "GET / HTTP/1.1\r\nHost: other.test:" + s.tport + "\r\n\r\n", "other.test"},
		{"another Host header, same port elided", "example.com:" + s.tport, "example.com", "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", "other.test"},
		{"an absolute URL naming another host", "example.com:" + s.tport, "example.com", "GET https://other.test:" + s.tport + "/ HTTP/1.1\r\nHost: example.com:" + s.tport + "\r\n\r\n", "other.test"},
		{"another port in the Host header", "example.com:" + s.tport, "example.com", "GET / HTTP/1.1\r\nHost: example.com:1\r\n\r\n", "example.com:1"},
		{"a zoned Host header", "example.com:" + s.tport, "example.com", "GET / HTTP/1.1\r\nHost: [::1%25lo]:" + s.tport + "\r\n\r\n", "zone"},
		{"another Host to an address", "127.0.0.1:" + s.tport, "", "GET / HTTP/1.1\r\nHost: other.test:" + s.tport + "\r\n\r\n", "other.test"},
		{"no server name", "example.com:" + s.tport, "", "GET / HTTP/1.1\r\nHost: example.com:" + s.tport + "\r\n\r\n", "no server name"},
	} {
		before := len(s.upstream())
		var resp string
		if tc.connect == "" {
			status, _, br := rawExchange(t, s.purl, tc.request)
			body, _ := io.ReadAll(br)
			resp = status + " " + string(body)
		} else if tls, err := s.intercepted(t, tc.connect, tc.sni); err != nil {
			resp = err.Error()
		} else {
			io.WriteString(tls, strings.Replace(tc.request, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1))
			b, _ := io.ReadAll(bufio.NewReader(tls))
			resp = string(b)
		}
		for _, u := range s.upstream()[before:] {
			if strings.Contains(u, "the-real-key") {
				t.Errorf("%s: the key went upstream (%s); the session got %q", tc.name, u, resp)
			}
		}
		if strings.Contains(resp, "upstream ok") {
			t.Errorf("%s: went through: %q", tc.name, resp)
		}
		if r := lastRefusal(t, s.logs); !strings.Contains(r.Reason, tc.says) {
			t.Errorf("%s: log %+v, want a refusal saying %q", tc.name, r, tc.says)
		}
	}

	// The host in any spelling gets its key, over TLS.
	for _, connect := range []string{"EXAMPLE.com:" + s.tport, "example.com.:" + s.tport} {
		before := len(s.upstream())
		tc, err := s.intercepted(t, connect, "example.com")
		if err != nil {
			t.Fatalf("%s: %v", connect, err)
		}
		io.WriteString(tc, "GET / HTTP/1.1\r\nHost: Example.COM.:"+s.tport+"\r\nConnection: close\r\n\r\n")
		b, _ := io.ReadAll(tc)
		if got := s.upstream()[before:]; !strings.Contains(string(b), "upstream ok") || len(got) != 1 || !strings.HasSuffix(got[0], "|the-real-key") {
			t.Errorf("%s: %q, upstream saw %q", connect, b, got)
		}
	}
}
