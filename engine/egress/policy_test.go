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
		if d := p.Addr(netip.MustParseAddr(a), 443, false); d.Allowed != want {
			t.Errorf("%s: %+v, want allowed=%v", a, d, want)
		}
	}
	// A name that is allowed cannot lead to a denied or private address.
	if d := p.Addr(netip.MustParseAddr("198.51.100.66"), 443, true); d.Allowed {
		t.Errorf("an allowed name resolving to a denied address: %+v", d)
	}
	if d := p.Addr(netip.MustParseAddr("10.1.2.3"), 443, true); d.Allowed || d.Rule != "private" {
		t.Errorf("an allowed name resolving to a private address: %+v", d)
	}
}

// Private, loopback, link-local and metadata addresses stay blocked even
// when allowed, unless the session opts in; metadata needs a rule naming it.
func TestPrivateRanges(t *testing.T) {
	all := mustCompile(t, Spec{Mode: AllowAll})
	for _, a := range []string{"127.0.0.1", "10.0.0.1", "172.17.0.1", "192.168.1.1", "169.254.169.254", "169.254.1.1", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "0.0.0.0"} {
		if d := all.Addr(netip.MustParseAddr(a), 80, false); d.Allowed {
			t.Errorf("allow-all reached %s: %+v", a, d)
		}
	}
	ruled := mustCompile(t, Spec{Mode: Custom, Allow: []string{"10.0.0.0/8", "169.254.169.254"}})
	if d := ruled.Addr(netip.MustParseAddr("10.0.0.1"), 80, false); d.Allowed {
		t.Errorf("a rule without the opt-in reached a private address")
	}
	ruled.Private = true
	if d := ruled.Addr(netip.MustParseAddr("10.0.0.1"), 80, false); !d.Allowed {
		t.Errorf("opted in with a rule: %+v", d)
	}
	if d := ruled.Addr(netip.MustParseAddr("169.254.169.254"), 80, false); !d.Allowed {
		t.Errorf("metadata named by a rule, opted in: %+v", d)
	}
	all.Private = true
	if d := all.Addr(netip.MustParseAddr("169.254.169.254"), 80, false); d.Allowed {
		t.Errorf("allow-all with the opt-in reached the metadata address")
	}
	if d := all.Addr(netip.MustParseAddr("127.0.0.1"), 80, false); !d.Allowed {
		t.Errorf("allow-all opted in: %+v", d)
	}
	deny := mustCompile(t, Spec{Mode: DenyAll, Allow: []string{"example.com"}})
	if deny.Name("example.com", 443).Allowed {
		t.Errorf("deny-all let a name through")
	}
}
