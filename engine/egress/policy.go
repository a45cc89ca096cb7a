// Package egress decides and carries what leaves a session: a policy of
// domain, wildcard and CIDR rules, an HTTP/HTTPS proxy, a transparent TCP
// listener and a DNS server the engine runs on each session network's
// gateway (the network itself, its bridge and its firewall rules, are
// engine/network's), the injection of secrets into requests in transit
// (their values come through the Secrets interface, from
// engine/secrets), and the CA that signs the certificates injection
// needs. Every connection is reported to the engine for its log.
package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Modes of a policy.
const (
	AllowAll = "allow-all" // everything public, except what a deny rule names
	DenyAll  = "deny-all"  // nothing
	Custom   = "custom"    // what an allow rule names, except what a deny rule names
	// Ask is custom, except that what no rule decides is put to the
	// user (see ask.go); where no one is asked, it is denied.
	Ask = "ask"
)

// Rule is one allow or deny entry: an exact domain, a wildcard domain
// (*.example.com: its subdomains, not itself), or a CIDR or address,
// each with an optional port. An allow rule written private:HOST:PORT
// (one exact name or address, one port) also lets the session reach that
// host and port at a private address, and nothing else private: how an
// agent's local model endpoint is allowed.
type Rule struct {
	Text    string // as written
	domain  string // lower case, no trailing dot; "" for a CIDR
	wild    bool
	prefix  netip.Prefix
	port    int    // 0 = any
	private bool   // private:HOST:PORT
	method  string // upper case; "" = any (a request rule, see request.go)
	glob    string // a cleaned path glob; "" = any path
}

// privatePrefix marks a rule that opts one host and port into private
// addresses.
const privatePrefix = "private:"

// ParseRule reads a rule: example.com, *.example.com, 198.51.100.0/24,
// 2001:db8::/32, each optionally followed by :PORT ([v6]:PORT for IPv6);
// or private:HOST:PORT. A domain may also carry a method before it and a
// path glob after it: "GET api.github.com/repos/**" (see request.go).
func ParseRule(s string) (Rule, error) {
	method, host, glob, err := splitRequest(strings.TrimSpace(s))
	if err != nil {
		return Rule{Text: s}, fmt.Errorf("rule %q: %v", s, err)
	}
	if method == "" && glob == "" {
		return parseHostRule(s)
	}
	r, err := parseHostRule(host)
	r.Text, r.method, r.glob = s, method, glob
	if err != nil {
		return r, fmt.Errorf("rule %q: %v", s, err)
	}
	return r, nil
}

// parseHostRule reads a rule without a method or path.
func parseHostRule(s string) (Rule, error) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(s), privatePrefix); ok {
		r, err := ParseRule(rest)
		if err != nil {
			return r, err
		}
		r.Text, r.private = s, true
		if r.wild || r.port == 0 || (r.domain == "" && r.prefix.Bits() != r.prefix.Addr().BitLen()) {
			return r, fmt.Errorf("rule %q: a private rule names one host and one port, like private:10.0.0.5:8080 or private:model.internal:443", s)
		}
		return r, nil
	}
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
	if strings.Contains(host, "%") {
		return r, fmt.Errorf("rule %q: an address with a zone (%%) names an interface of the engine's host: write it without", s)
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
	if labels := strings.Split(d, "."); numeric(labels[len(labels)-1]) {
		return r, fmt.Errorf("rule %q: %q reads as an IPv4 address in another form: write it as a.b.c.d", s, host)
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

// matchName reports whether the rule names host (a canonical name, see
// ParseHost) and port.
func (r Rule) matchName(host string, port int) bool {
	if r.domain == "" || (r.port != 0 && r.port != port) {
		return false
	}
	if r.wild {
		return strings.HasSuffix(host, "."+r.domain)
	}
	return host == r.domain
}

// matchAddr reports whether the rule names the address and port.
func (r Rule) matchAddr(a netip.Addr, port int) bool {
	return r.domain == "" && (r.port == 0 || r.port == port) && r.prefix.Contains(a.Unmap())
}

// match reports whether the rule names h and port.
func (r Rule) match(h Host, port int) bool {
	if h.IsAddr() {
		return r.matchAddr(h.Addr, port)
	}
	return r.matchName(h.Name, port)
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
	// Inspect names hosts whose TLS the proxy ends (with a certificate
	// from the engine's CA) so that request rules apply to them.
	Inspect []Rule
	// AskTimeout is how long the ask mode holds a question before it is
	// a deny (0: 60 s).
	AskTimeout time.Duration
}

// Spec is a policy as stored and sent: rules as text.
type Spec struct {
	Mode    string   `json:"mode"`
	Allow   []string `json:"allow,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	Private bool     `json:"private,omitempty"`
	Inject  []string `json:"inject,omitempty"`
	Inspect []string `json:"inspect,omitempty"`
	// AskTimeout: see Policy.
	AskTimeout time.Duration `json:"ask_timeout,omitempty"`
}

// MaxAskTimeout is the longest a question may wait: a held connection
// is a client waiting, and most give up well before.
const MaxAskTimeout = time.Hour

// Compile checks a spec and returns its policy.
func Compile(s Spec) (*Policy, error) {
	p := &Policy{Mode: s.Mode, Private: s.Private, AskTimeout: s.AskTimeout}
	if s.AskTimeout < 0 || s.AskTimeout > MaxAskTimeout {
		return nil, fmt.Errorf("ask timeout %s: give a positive duration up to %s (0: the default, 60s)", s.AskTimeout, MaxAskTimeout)
	}
	switch s.Mode {
	case AllowAll, DenyAll, Custom, Ask:
	case "":
		p.Mode = Custom
	default:
		return nil, fmt.Errorf("network mode %q: use allow-all, deny-all or custom, or ask (what no rule decides is put to the user)", s.Mode)
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
	for _, t := range s.Inspect {
		r, err := ParseRule(t)
		if err != nil {
			return nil, err
		}
		if r.isRequest() || r.private || r.domain == "" {
			return nil, fmt.Errorf("inspect %q: name a host (example.com or *.example.com, optionally :PORT) whose TLS the proxy should end", t)
		}
		p.Inspect = append(p.Inspect, r)
	}
	for _, r := range append(append([]Rule(nil), p.Allow...), p.Deny...) {
		if err := p.checkRequestRule(r); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Spec returns the policy as text.
func (p *Policy) Spec() Spec {
	s := Spec{Mode: p.Mode, Private: p.Private, AskTimeout: p.AskTimeout}
	for _, r := range p.Allow {
		s.Allow = append(s.Allow, r.Text)
	}
	for _, r := range p.Deny {
		s.Deny = append(s.Deny, r.Text)
	}
	for _, i := range p.Inject {
		s.Inject = append(s.Inject, i.Text)
	}
	for _, r := range p.Inspect {
		s.Inspect = append(s.Inspect, r.Text)
	}
	return s
}

// Decision is what the policy says of a connection, and why.
type Decision struct {
	Allowed bool
	Rule    string // the rule that decided, or the mode
	Reason  string // for a block, in words
	// Ask is set on a block that no rule decided under the ask mode:
	// the proxy may put it to the user instead.
	Ask bool
}

// Name decides a connection to a host as a session named it, before
// resolution: a name by the rules, an address by Addr, and anything
// ParseHost refuses is blocked with its reason.
func (p *Policy) Name(host string, port int) Decision {
	h, err := ParseHost(host)
	if err != nil {
		return Decision{Rule: "address", Reason: err.Error()}
	}
	return p.Host(h, port)
}

// Host decides a connection to a parsed host.
func (p *Policy) Host(h Host, port int) Decision {
	if h.IsAddr() {
		return p.Addr(h.Addr, port)
	}
	return p.name(h.Name, port, false)
}

// NameAnyPort decides a name without a port (a DNS lookup): allowed if a
// rule allows it on some port, denied only by a rule for every port.
func (p *Policy) NameAnyPort(host string) Decision {
	h, err := ParseHost(host)
	if err != nil {
		return Decision{Rule: "address", Reason: err.Error()}
	}
	if h.IsAddr() {
		return Decision{Rule: "address", Reason: host + " is an address, not a name to look up"}
	}
	return p.name(h.Name, 0, true)
}

// undecided is the block of what no rule decides: one to ask under the
// ask mode.
func (p *Policy) undecided(reason string) Decision {
	return Decision{Rule: "no rule", Reason: reason, Ask: p.Mode == Ask}
}

// byMode is the decision of a mode that decides alone, once no deny rule
// has: allow-all and deny-all.
func (p *Policy) byMode() (Decision, bool) {
	switch p.Mode {
	case AllowAll:
		return Decision{Allowed: true, Rule: AllowAll}, true
	case DenyAll:
		return Decision{Rule: DenyAll, Reason: "the session's network is deny-all"}, true
	}
	return Decision{}, false
}

func (p *Policy) name(host string, port int, anyPort bool) Decision {
	for _, r := range p.Deny {
		// A request rule denies requests, not the connection that
		// carries them.
		if !r.isRequest() && (!anyPort || r.port == 0) && r.matchName(host, port) {
			return Decision{Rule: "deny " + r.Text, Reason: host + " is denied"}
		}
	}
	if d, ok := p.byMode(); ok {
		return d
	}
	for _, r := range p.Allow {
		if anyPort && r.matchName(host, r.port) || !anyPort && r.matchName(host, port) {
			return Decision{Allowed: true, Rule: "allow " + r.Text}
		}
	}
	if anyPort {
		return Decision{Rule: "no rule", Reason: "no rule allows " + host} // a lookup is never asked
	}
	return p.undecided(fmt.Sprintf("no rule allows %s:%d", host, port))
}

// Addr decides a connection to an address the session gave as an IP
// literal: a rule must allow it (or the mode), and a private, loopback,
// link-local or other special address also needs the session's opt-in or
// a private: rule for it and the port.
func (p *Policy) Addr(a netip.Addr, port int) Decision {
	return p.addr(a, port, "")
}

// Resolved decides a connection to an address that name (already allowed
// by Name) resolved to: the name's decision stands unless a deny rule or
// the special ranges stop the address (DNS rebinding). Port 0 is a DNS
// answer: any port.
func (p *Policy) Resolved(name string, a netip.Addr, port int) Decision {
	return p.addr(a, port, name)
}

func (p *Policy) addr(a netip.Addr, port int, name string) Decision {
	if !a.IsValid() {
		return Decision{Rule: "address", Reason: "no address"}
	}
	if a.Zone() != "" {
		return Decision{Rule: "address", Reason: fmt.Sprintf("%s has a zone, which names an interface of the engine's host", a)}
	}
	a = a.Unmap()
	byName := name != ""
	anyPort := port == 0
	for _, r := range p.Deny {
		if r.matchAddr(a, port) || anyPort && r.port == 0 && r.matchAddr(a, 0) {
			return Decision{Rule: "deny " + r.Text, Reason: a.String() + " is denied"}
		}
	}
	explicit, pinned := "", ""
	for _, r := range p.Allow {
		if r.private && (byName && r.matchName(name, port) || r.matchAddr(a, port) || anyPort && (byName && r.matchName(name, r.port) || r.matchAddr(a, r.port))) {
			pinned = r.Text
		}
		if explicit == "" && r.matchAddr(a, port) {
			explicit = r.Text
		}
	}
	kind := Special(a)
	optedIn := p.Private && (explicit != "" || byName || p.Mode == AllowAll) || pinned != ""
	if kind == "metadata" {
		optedIn = p.Private && explicit != "" // never by a name, allow-all or a private: rule
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
	d := p.undecided(fmt.Sprintf("no rule allows %s", net.JoinHostPort(a.String(), strconv.Itoa(port))))
	d.Ask = d.Ask && !anyPort // a lookup is never asked
	return d
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
	{"private", netip.MustParsePrefix("198.18.0.0/15")},
	{"private", netip.MustParsePrefix("fc00::/7")},
	{"private", netip.MustParsePrefix("fec0::/10")},      // site-local
	{"private", netip.MustParsePrefix("64:ff9b:1::/48")}, // local NAT64
	{"link-local", netip.MustParsePrefix("169.254.0.0/16")},
	{"link-local", netip.MustParsePrefix("fe80::/10")},
	{"unspecified", netip.MustParsePrefix("0.0.0.0/8")},
	{"unspecified", netip.MustParsePrefix("::/128")},
	{"multicast", netip.MustParsePrefix("224.0.0.0/4")},
	{"multicast", netip.MustParsePrefix("ff00::/8")},
	{"reserved", netip.MustParsePrefix("240.0.0.0/4")},
	{"reserved", netip.MustParsePrefix("192.0.0.0/24")},
	{"reserved", netip.MustParsePrefix("::/96")},     // IPv4-compatible
	{"reserved", netip.MustParsePrefix("2001::/32")}, // Teredo
	{"reserved", netip.MustParsePrefix("100::/64")},  // discard
}

// Prefixes that carry an IPv4 address inside an IPv6 one, to wherever
// that IPv4 address is: NAT64 (in the last 32 bits) and 6to4 (bits 16-47).
var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixToV4 = netip.MustParsePrefix("2002::/16")
)

// Special names the kind of a non-public address ("" for public). An
// IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4) is the kind
// of the IPv4 address it carries.
func Special(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	b := a.As16()
	switch {
	case nat64.Contains(a):
		if k := Special(netip.AddrFrom4([4]byte(b[12:16]))); k != "" {
			return k
		}
	case sixToV4.Contains(a):
		if k := Special(netip.AddrFrom4([4]byte(b[2:6]))); k != "" {
			return k
		}
	}
	for _, s := range special {
		if s.pfx.Contains(a) {
			return s.kind
		}
	}
	return ""
}
