// Package egress decides and carries what leaves a session: a policy of
// domain, wildcard and CIDR rules, an HTTP/HTTPS proxy and a DNS server
// the engine runs on each session network's gateway, and the host
// firewall rules that leave the session no other way out. Every
// connection is reported to the engine for its log.
package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Modes of a policy.
const (
	AllowAll = "allow-all" // everything public, except what a deny rule names
	DenyAll  = "deny-all"  // nothing
	Custom   = "custom"    // what an allow rule names, except what a deny rule names
)

// Rule is one allow or deny entry: an exact domain, a wildcard domain
// (*.example.com: its subdomains, not itself), or a CIDR or address,
// each with an optional port.
type Rule struct {
	Text   string // as written
	domain string // lower case, no trailing dot; "" for a CIDR
	wild   bool
	prefix netip.Prefix
	port   int // 0 = any
}

// ParseRule reads a rule: example.com, *.example.com, 198.51.100.0/24,
// 2001:db8::/32, each optionally followed by :PORT ([v6]:PORT for IPv6).
func ParseRule(s string) (Rule, error) {
	r := Rule{Text: s}
	t := strings.TrimSpace(s)
	if t == "" {
		return r, fmt.Errorf("empty rule: give a domain (example.com, *.example.com) or a CIDR (198.51.100.0/24), optionally with :PORT")
	}
	host := t
	if strings.HasPrefix(t, "[") { // [v6]:port or [v6/len]:port
		end := strings.Index(t, "]")
		if end < 0 {
			return r, fmt.Errorf("rule %q: missing ]", s)
		}
		host = t[1:end]
		if rest := t[end+1:]; rest != "" {
			p, err := parsePort(strings.TrimPrefix(rest, ":"), s)
			if err != nil || !strings.HasPrefix(rest, ":") {
				return r, fmt.Errorf("rule %q: after ] only :PORT may follow", s)
			}
			r.port = p
		}
	} else if strings.Count(t, ":") == 1 {
		i := strings.LastIndex(t, ":")
		p, err := parsePort(t[i+1:], s)
		if err != nil {
			return r, err
		}
		host, r.port = t[:i], p
	}
	if strings.ContainsAny(host, "/") || isIPLiteral(host) {
		pfx, err := parsePrefix(host)
		if err != nil {
			return r, fmt.Errorf("rule %q: %v", s, err)
		}
		r.prefix = pfx
		return r, nil
	}
	d := strings.TrimSuffix(strings.ToLower(host), ".")
	if strings.HasPrefix(d, "*.") {
		r.wild = true
		d = d[2:]
	}
	if err := checkDomain(d); err != nil {
		return r, fmt.Errorf("rule %q: %v", s, err)
	}
	r.domain = d
	return r, nil
}

func parsePort(p, rule string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("rule %q: port %q must be a number from 1 to 65535", rule, p)
	}
	return n, nil
}

func isIPLiteral(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address", s)
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (write it like 198.51.100.0/24)", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set: did you mean %s?", s, p.Masked())
	}
	return p, nil
}

func checkDomain(d string) error {
	if d == "" || len(d) > 253 {
		return fmt.Errorf("%q is not a domain", d)
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not a domain (empty or overlong label)", d)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a domain (%q is not allowed; wildcards only as a leading *.)", d, c)
			}
		}
	}
	return nil
}

// matchName reports whether the rule names host (a domain) and port.
func (r Rule) matchName(host string, port int) bool {
	if r.domain == "" || (r.port != 0 && r.port != port) {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if r.wild {
		return strings.HasSuffix(host, "."+r.domain)
	}
	return host == r.domain
}

// matchAddr reports whether the rule names the address and port.
func (r Rule) matchAddr(a netip.Addr, port int) bool {
	return r.domain == "" && (r.port == 0 || r.port == port) && r.prefix.Contains(a.Unmap())
}

// Policy is a session's egress policy. The zero value denies everything.
type Policy struct {
	Mode  string
	Allow []Rule
	Deny  []Rule
	// Private lets the session reach private, loopback, link-local and
	// metadata addresses that its rules allow; without it they stay
	// blocked whatever the rules say.
	Private bool
	// Inject adds headers with secrets to matching hosts' requests.
	Inject []Injection
}

// Spec is a policy as stored and sent: rules as text.
type Spec struct {
	Mode    string   `json:"mode"`
	Allow   []string `json:"allow,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	Private bool     `json:"private,omitempty"`
	Inject  []string `json:"inject,omitempty"`
}

// Compile checks a spec and returns its policy.
func Compile(s Spec) (*Policy, error) {
	p := &Policy{Mode: s.Mode, Private: s.Private}
	switch s.Mode {
	case AllowAll, DenyAll, Custom:
	case "":
		p.Mode = Custom
	default:
		return nil, fmt.Errorf("network mode %q: use allow-all, deny-all or custom", s.Mode)
	}
	for _, t := range s.Allow {
		r, err := ParseRule(t)
		if err != nil {
			return nil, err
		}
		p.Allow = append(p.Allow, r)
	}
	for _, t := range s.Deny {
		r, err := ParseRule(t)
		if err != nil {
			return nil, err
		}
		p.Deny = append(p.Deny, r)
	}
	for _, t := range s.Inject {
		i, err := ParseInjection(t)
		if err != nil {
			return nil, err
		}
		p.Inject = append(p.Inject, i)
	}
	return p, nil
}

// Spec returns the policy as text.
func (p *Policy) Spec() Spec {
	s := Spec{Mode: p.Mode, Private: p.Private}
	for _, r := range p.Allow {
		s.Allow = append(s.Allow, r.Text)
	}
	for _, r := range p.Deny {
		s.Deny = append(s.Deny, r.Text)
	}
	for _, i := range p.Inject {
		s.Inject = append(s.Inject, i.Text)
	}
	return s
}

// Decision is what the policy says of a connection, and why.
type Decision struct {
	Allowed bool
	Rule    string // the rule that decided, or the mode
	Reason  string // for a block, in words
}

// Name decides a connection to a domain name (before resolution).
func (p *Policy) Name(host string, port int) Decision {
	return p.name(host, port, false)
}

// NameAnyPort decides a name without a port (a DNS lookup): allowed if a
// rule allows it on some port, denied only by a rule for every port.
func (p *Policy) NameAnyPort(host string) Decision {
	return p.name(host, 0, true)
}

func (p *Policy) name(host string, port int, anyPort bool) Decision {
	for _, r := range p.Deny {
		if (!anyPort || r.port == 0) && r.matchName(host, port) {
			return Decision{Rule: "deny " + r.Text, Reason: host + " is denied"}
		}
	}
	switch p.Mode {
	case AllowAll:
		return Decision{Allowed: true, Rule: AllowAll}
	case DenyAll:
		return Decision{Rule: DenyAll, Reason: "the session's network is deny-all"}
	}
	for _, r := range p.Allow {
		if anyPort && r.matchName(host, r.port) || !anyPort && r.matchName(host, port) {
			return Decision{Allowed: true, Rule: "allow " + r.Text}
		}
	}
	if anyPort {
		return Decision{Rule: "no rule", Reason: "no rule allows " + host}
	}
	return Decision{Rule: "no rule", Reason: fmt.Sprintf("no rule allows %s:%d", host, port)}
}

// Addr decides a connection to an address: one the client gave as an IP
// literal (byName false), or one a name it asked for resolved to (byName
// true: the name's decision stands unless a deny rule or the private
// ranges stop the address).
func (p *Policy) Addr(a netip.Addr, port int, byName bool) Decision {
	a = a.Unmap()
	for _, r := range p.Deny {
		if r.matchAddr(a, port) {
			return Decision{Rule: "deny " + r.Text, Reason: a.String() + " is denied"}
		}
	}
	explicit := ""
	for _, r := range p.Allow {
		if r.matchAddr(a, port) {
			explicit = r.Text
			break
		}
	}
	kind := Special(a)
	optedIn := p.Private && (explicit != "" || byName || p.Mode == AllowAll)
	if kind == "metadata" {
		optedIn = p.Private && explicit != "" // never by a name or allow-all
	}
	if kind != "" && !optedIn {
		hint := "opt in with --allow-private and a rule for it"
		return Decision{Rule: "private", Reason: fmt.Sprintf("%s is a %s address: %s", a, kind, hint)}
	}
	if p.Mode == DenyAll {
		return Decision{Rule: DenyAll, Reason: "the session's network is deny-all"}
	}
	if byName {
		return Decision{Allowed: true, Rule: "name"}
	}
	if explicit != "" {
		return Decision{Allowed: true, Rule: "allow " + explicit}
	}
	if p.Mode == AllowAll {
		return Decision{Allowed: true, Rule: AllowAll}
	}
	return Decision{Rule: "no rule", Reason: fmt.Sprintf("no rule allows %s", net.JoinHostPort(a.String(), strconv.Itoa(port)))}
}

var special = []struct {
	kind string
	pfx  netip.Prefix
}{
	{"metadata", netip.MustParsePrefix("169.254.169.254/32")},
	{"metadata", netip.MustParsePrefix("fd00:ec2::254/128")},
	{"loopback", netip.MustParsePrefix("127.0.0.0/8")},
	{"loopback", netip.MustParsePrefix("::1/128")},
	{"private", netip.MustParsePrefix("10.0.0.0/8")},
	{"private", netip.MustParsePrefix("172.16.0.0/12")},
	{"private", netip.MustParsePrefix("192.168.0.0/16")},
	{"private", netip.MustParsePrefix("100.64.0.0/10")},
	{"private", netip.MustParsePrefix("fc00::/7")},
	{"link-local", netip.MustParsePrefix("169.254.0.0/16")},
	{"link-local", netip.MustParsePrefix("fe80::/10")},
	{"unspecified", netip.MustParsePrefix("0.0.0.0/8")},
	{"unspecified", netip.MustParsePrefix("::/128")},
	{"multicast", netip.MustParsePrefix("224.0.0.0/4")},
	{"multicast", netip.MustParsePrefix("ff00::/8")},
	{"reserved", netip.MustParsePrefix("240.0.0.0/4")},
}

// Special names the kind of a non-public address ("" for public).
func Special(a netip.Addr) string {
	a = a.Unmap()
	for _, s := range special {
		if s.pfx.Contains(a) {
			return s.kind
		}
	}
	return ""
}
