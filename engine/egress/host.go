package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Host is a destination as a session named it, in the one spelling the
// policy compares: a lower-case name without the root's trailing dot, or
// an address (IPv4-mapped IPv6 unmapped, never with a zone). Every host
// that comes from a session (a CONNECT, a URL, a Host header, a TLS
// server name, a DNS question) goes through ParseHost before any check,
// so no spelling of a place slips past a rule written in another.
type Host struct {
	Name string     // "" for an address
	Addr netip.Addr // valid only when Name is ""
}

// IsAddr reports whether the host is an address.
func (h Host) IsAddr() bool { return h.Name == "" }

func (h Host) String() string {
	if h.IsAddr() {
		return h.Addr.String()
	}
	return h.Name
}

// hostPort is host:port with IPv6 in brackets.
func (h Host) hostPort(port int) string { return net.JoinHostPort(h.String(), strconv.Itoa(port)) }

// ParseHost reads a host name or an IP address (IPv6 with or without
// brackets). It refuses what does not name one place unambiguously: an
// IPv6 zone (an interface of the engine's host, outside every range
// check), the numeric IPv4 forms resolvers accept (2130706433, 0x7f.1,
// 0177.0.0.1, 127.1), and anything that is not a DNS name.
func ParseHost(s string) (Host, error) {
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return Host{}, fmt.Errorf("%q is not a host: a [ without its ]", s)
		}
		s = s[1 : len(s)-1]
		if !strings.Contains(s, ":") {
			return Host{}, fmt.Errorf("%q is not an IPv6 address", s)
		}
	}
	if strings.Contains(s, "%") {
		return Host{}, fmt.Errorf("%q has a zone (the part after %%), which names an interface of the engine's host: write the address without it", s)
	}
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return Host{}, fmt.Errorf("%q is not an IP address", s)
		}
		return Host{Addr: a.Unmap()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return Host{Addr: a}, nil
	}
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if name == "" || len(name) > 253 {
		return Host{}, fmt.Errorf("%q is not a host name", s)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return Host{}, fmt.Errorf("%q is not a host name (an empty or overlong label)", s)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return Host{}, fmt.Errorf("%q is not a host name (%q is not allowed in one)", s, c)
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return Host{}, fmt.Errorf("%q is an IPv4 address in a form resolvers read differently (a number, hex or octal, or fewer than four parts): write it as four decimal numbers, a.b.c.d", s)
	}
	return Host{Name: name}, nil
}

// numeric reports whether a name's last label makes resolvers (and URL
// parsers) read the whole name as an IPv4 address: decimal digits, or 0x
// and hex digits. No DNS top-level domain looks like that.
func numeric(label string) bool {
	if h, ok := strings.CutPrefix(label, "0x"); ok {
		for i := 0; i < len(h); i++ {
			c := h[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(label); i++ {
		if label[i] < '0' || label[i] > '9' {
			return false
		}
	}
	return true
}

// parseTarget reads host[:port] as a session gave it (a CONNECT target, a
// URL's host, a Host header), def being the port when none is written.
func parseTarget(hostport string, def int) (Host, int, error) {
	host, port := hostport, def
	if h, ps, err := net.SplitHostPort(hostport); err == nil {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 || ps[0] == '+' {
			return Host{}, 0, fmt.Errorf("%q: the port must be a number from 1 to 65535", hostport)
		}
		host, port = h, n
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	} else if strings.Count(hostport, ":") > 0 && !strings.HasPrefix(hostport, "[") {
		return Host{}, 0, fmt.Errorf("%q is not host:port", hostport)
	}
	h, err := ParseHost(host)
	return h, port, err
}
