package egress

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The ClientHello reader never loses or adds a byte of what it read, and
// a server name it reports came from a ClientHello that parsed.
func FuzzClientHello(f *testing.F) {
	f.Add(records(clientHello(f, &tls.Config{ServerName: "ok.test"}), 16384))
	f.Add(records(clientHello(f, &tls.Config{ServerName: "ok.test"}), 7))
	f.Add(records(clientHello(f, &tls.Config{InsecureSkipVerify: true}), 100))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Add([]byte{0x16, 3, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			b.Write(in)
			b.Close()
		}()
		h, replay, err := readClientHello(a, a, 5*time.Second)
		got, _ := io.ReadAll(replay)
		if !bytes.Equal(got, in) {
			t.Fatalf("replayed %d bytes of %d, or others", len(got), len(in))
		}
		if err == nil && (len(in) == 0 || in[0] != 0x16) {
			t.Fatalf("a ClientHello (%+v) from bytes that are not a TLS handshake", h)
		}
		if err != nil && h.ServerName != "" {
			t.Fatalf("a server name %q with an error %v", h.ServerName, err)
		}
	})
}

// ParseHost is stable (its output parses to itself) and never lets a
// zone or a numeric IPv4 spelling through.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"example.com", "EXAMPLE.com.", "[::1]", "::1%lo", "[fe80::1%25eth0]", "2130706433", "0x7f.1", "127.1", "::ffff:127.0.0.1", "a..b", "xn--bcher-kva.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHost(s)
		if err != nil {
			return
		}
		again, err := ParseHost(h.String())
		if err != nil || again != h {
			t.Fatalf("%q -> %v -> %v %v", s, h, again, err)
		}
		if h.IsAddr() {
			if h.Addr.Zone() != "" || h.Addr.Is4In6() {
				t.Fatalf("%q -> %v", s, h.Addr)
			}
			return
		}
		if strings.ContainsAny(h.Name, "%[]:") || h.Name != strings.ToLower(h.Name) || strings.HasSuffix(h.Name, ".") {
			t.Fatalf("%q -> name %q", s, h.Name)
		}
		if _, err := netip.ParseAddr(h.Name); err == nil {
			t.Fatalf("%q -> an address as a name %q", s, h.Name)
		}
	})
}
