package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func mustCompile(t *testing.T, s Spec) *Policy {
	t.Helper()
	p, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseRule(t *testing.T) {
	for _, ok := range []string{"example.com", "*.example.com", "example.com:443", "198.51.100.0/24", "198.51.100.7", "198.51.100.0/24:443", "2001:db8::/32", "[2001:db8::1]:443", "EXAMPLE.com."} {
		if _, err := ParseRule(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, says := range map[string]string{
		"":                 "empty rule",
		"exa mple.com":     "not allowed",
		"*example.com":     "not allowed",
		"ex*.com":          "not allowed",
		"example.com:0":    "port",
		"example.com:http": "port",
		"198.51.100.1/24":  "host bits",
		"198.51.100.0/33":  "not a CIDR",
		"[2001:db8::1":     "missing ]",
		"a..b":             "empty",
	} {
		_, err := ParseRule(bad)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, says)
		}
	}
	if _, err := Compile(Spec{Mode: "open"}); err == nil || !strings.Contains(err.Error(), "allow-all, deny-all or custom") {
		t.Errorf("bad mode: %v", err)
	}
}

func TestDecisions(t *testing.T) {
	p := mustCompile(t, Spec{Mode: Custom, Allow: []string{"*.example.com", "api.example.org:443", "198.51.100.0/24"}, Deny: []string{"evil.example.com", "198.51.100.66"}})
	names := map[string]bool{
		"docs.example.com:443":  true,
		"a.b.example.com:80":    true,
		"example.com:443":       false, // the wildcard names subdomains only
		"evil.example.com:443":  false, // deny beats allow
		"EVIL.example.com.:443": false,
		"api.example.org:443":   true,
		"api.example.org:80":    false, // the port is part of the rule
		"other.org:443":         false,
	}
	for hp, want := range names {
		i := strings.LastIndex(hp, ":")
		var port int
		for _, c := range hp[i+1:] {
			port = port*10 + int(c-'0')
		}
		if d := p.Name(hp[:i], port); d.Allowed != want {
			t.Errorf("%s: %+v, want allowed=%v", hp, d, want)
		}
	}
	addrs := map[string]bool{"198.51.100.7": true, "198.51.100.66": false, "203.0.113.9": false}
	for a, want := range addrs {
		if d := p.Addr(netip.MustParseAddr(a), 443); d.Allowed != want {
			t.Errorf("%s: %+v, want allowed=%v", a, d, want)
		}
	}
	// A name that is allowed cannot lead to a denied or private address.
	if d := p.Resolved("a.example.com", netip.MustParseAddr("198.51.100.66"), 443); d.Allowed {
		t.Errorf("an allowed name resolving to a denied address: %+v", d)
	}
	if d := p.Resolved("a.example.com", netip.MustParseAddr("10.1.2.3"), 443); d.Allowed || d.Rule != "private" {
		t.Errorf("an allowed name resolving to a private address: %+v", d)
	}
}

// Private, loopback, link-local and metadata addresses stay blocked even
// when allowed, unless the session opts in; metadata needs a rule naming it.
func TestPrivateRanges(t *testing.T) {
	all := mustCompile(t, Spec{Mode: AllowAll})
	for _, a := range []string{"127.0.0.1", "10.0.0.1", "172.17.0.1", "192.168.1.1", "169.254.169.254", "169.254.1.1", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "0.0.0.0"} {
		if d := all.Addr(netip.MustParseAddr(a), 80); d.Allowed {
			t.Errorf("allow-all reached %s: %+v", a, d)
		}
	}
	ruled := mustCompile(t, Spec{Mode: Custom, Allow: []string{"10.0.0.0/8", "169.254.169.254"}})
	if d := ruled.Addr(netip.MustParseAddr("10.0.0.1"), 80); d.Allowed {
		t.Errorf("a rule without the opt-in reached a private address")
	}
	ruled.Private = true
	if d := ruled.Addr(netip.MustParseAddr("10.0.0.1"), 80); !d.Allowed {
		t.Errorf("opted in with a rule: %+v", d)
	}
	if d := ruled.Addr(netip.MustParseAddr("169.254.169.254"), 80); !d.Allowed {
		t.Errorf("metadata named by a rule, opted in: %+v", d)
	}
	all.Private = true
	if d := all.Addr(netip.MustParseAddr("169.254.169.254"), 80); d.Allowed {
		t.Errorf("allow-all with the opt-in reached the metadata address")
	}
	if d := all.Addr(netip.MustParseAddr("127.0.0.1"), 80); !d.Allowed {
		t.Errorf("allow-all opted in: %+v", d)
	}
	deny := mustCompile(t, Spec{Mode: DenyAll, Allow: []string{"example.com"}})
	if deny.Name("example.com", 443).Allowed {
		t.Errorf("deny-all let a name through")
	}
}

// Every spelling of a host comes out as one, or is refused with a reason.
func TestParseHost(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM.":                  "example.com",
		"a_b.example.com":               "a_b.example.com",
		"[::1]":                         "::1",
		"::1":                           "::1",
		"[::ffff:127.0.0.1]":            "127.0.0.1",
		"::ffff:7f00:1":                 "127.0.0.1",
		"[0:0:0:0:0:ffff:7f00:1]":       "127.0.0.1",
		"198.51.100.7":                  "198.51.100.7",
		"[2001:DB8::1]":                 "2001:db8::1",
		"1e100.net":                     "1e100.net",
		"0xdeadbeef.example.com":        "0xdeadbeef.example.com",
		"xn--bcher-kva.example":         "xn--bcher-kva.example",
		"example.0x7f.com":              "example.0x7f.com",
		strings.Repeat("a.", 126) + "a": strings.Repeat("a.", 126) + "a",
	} {
		h, err := ParseHost(in)
		if err != nil || h.String() != want {
			t.Errorf("%q: %v %v, want %q", in, h, err, want)
		}
	}
	for in, says := range map[string]string{
		"[::1%lo]":                       "zone",
		"::1%lo":                         "zone",
		"fe80::1%eth0":                   "zone",
		"[fe80::1%25eth0]":               "zone",
		"2130706433":                     "four decimal numbers",
		"0x7f000001":                     "four decimal numbers",
		"0x7f.1":                         "four decimal numbers",
		"0177.0.0.1":                     "four decimal numbers",
		"127.1":                          "four decimal numbers",
		"127.0.0.1.":                     "four decimal numbers",
		"1.2.3.4.5":                      "four decimal numbers",
		"example.123":                    "four decimal numbers",
		"0x":                             "four decimal numbers",
		"":                               "not a host",
		".":                              "not a host",
		"a..b":                           "empty",
		"evil.test..":                    "empty",
		"ok.test\x00.evil":               "not allowed",
		"ok.test%00":                     "zone",
		"ex ample.com":                   "not allowed",
		"bücher.example":                 "not allowed",
		"a@b.example":                    "not allowed",
		"[example.com]":                  "not an IPv6",
		"[::1":                           "without its ]",
		"[1.2.3.4]":                      "not an IPv6",
		strings.Repeat("a", 64) + ".com": "overlong",
		strings.Repeat("a.", 127) + "a":  "not a host",
	} {
		if h, err := ParseHost(in); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v %v, want an error saying %q", in, h, err, says)
		}
	}
}

// The kinds of address the session may not reach without opting in,
// whichever form carries them.
func TestSpecialForms(t *testing.T) {
	for a, want := range map[string]string{
		"127.0.0.1":              "loopback",
		"::ffff:127.0.0.1":       "loopback",
		"64:ff9b::7f00:1":        "loopback", // NAT64
		"64:ff9b::a00:1":         "private",
		"64:ff9b::c633:6401":     "",         // NAT64 of a public address
		"2002:7f00:1::1":         "loopback", // 6to4
		"2002:c633:6401::1":      "",
		"::127.0.0.1":            "reserved", // IPv4-compatible
		"::":                     "unspecified",
		"::1":                    "loopback",
		"0.0.0.0":                "unspecified",
		"fe80::1%eth0":           "link-local",
		"fec0::1":                "private",
		"2001::1":                "reserved", // Teredo
		"169.254.169.254":        "metadata",
		"::ffff:169.254.169.254": "metadata",
		"198.51.100.7":           "",
		"2606:4700::1111":        "",
		"255.255.255.255":        "reserved",
		"198.18.0.1":             "private",
	} {
		if got := Special(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %q, want %q", a, got, want)
		}
	}
	// A zone is refused whatever the policy says.
	all := mustCompile(t, Spec{Mode: AllowAll, Private: true})
	for _, a := range []string{"fe80::1%eth0", "::1%lo", "2606:4700::1111%eth0"} {
		if d := all.Addr(netip.MustParseAddr(a), 443); d.Allowed || !strings.Contains(d.Reason, "zone") {
			t.Errorf("%s: %+v", a, d)
		}
		if d := all.Resolved("ok.example", netip.MustParseAddr(a), 443); d.Allowed {
			t.Errorf("%s resolved: %+v", a, d)
		}
	}
	for _, h := range []string{"[::1%lo]", "2130706433", "0x7f.1", "localhost..", "127.1"} {
		if d := all.Name(h, 443); d.Allowed || d.Reason == "" {
			t.Errorf("Name(%q): %+v", h, d)
		}
	}
}

// A private: rule lets the session reach one host and port at a private
// address, and nothing else private.
func TestPrivateRule(t *testing.T) {
	p := mustCompile(t, Spec{Mode: Custom, Allow: []string{"private:172.17.0.1:8080", "private:model.internal:443", "*.example.com"}})
	for _, tc := range []struct {
		name string
		addr string
		port int
		want bool
	}{
		{"", "172.17.0.1", 8080, true},
		{"", "172.17.0.1", 8081, false}, // another port
		{"", "172.17.0.2", 8080, false}, // another address
		{"", "127.0.0.1", 8080, false},  // loopback
		{"model.internal", "10.1.2.3", 443, true},
		{"model.internal", "10.1.2.3", 80, false},
		{"model.internal", "169.254.169.254", 443, false}, // never metadata
		{"a.example.com", "10.1.2.3", 443, false},         // an allowed name to a private address
		{"model.internal", "10.1.2.3", 0, true},           // a DNS answer
		{"a.example.com", "10.1.2.3", 0, false},
	} {
		var d Decision
		if tc.name == "" {
			d = p.Addr(netip.MustParseAddr(tc.addr), tc.port)
		} else {
			if !p.Name(tc.name, max(tc.port, 443)).Allowed {
				t.Errorf("%s: the name is not allowed", tc.name)
			}
			d = p.Resolved(tc.name, netip.MustParseAddr(tc.addr), tc.port)
		}
		if d.Allowed != tc.want {
			t.Errorf("%s %s:%d: %+v, want allowed=%v", tc.name, tc.addr, tc.port, d, tc.want)
		}
	}
	if p.Private {
		t.Errorf("a private: rule turned on private access for the whole session")
	}
	for bad, says := range map[string]string{
		"private:10.0.0.0/8:80":     "one host and one port",
		"private:*.example.com:443": "one host and one port",
		"private:model.internal":    "one host and one port",
		"private:[fe80::1%lo]:80":   "zone",
		"private:":                  "empty",
	} {
		if _, err := ParseRule(bad); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want %q", bad, err, says)
		}
	}
	if _, err := ParseInjection("private:model.internal:443:x-api-key=secret:K"); err == nil {
		t.Errorf("an injection for a private: host")
	}
}
