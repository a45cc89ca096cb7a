package egress

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// A request rule is a rule that also names a method, a path glob or
// both: "GET api.github.com/repos/**", "POST api.github.com/**",
// "api.example.com:8080/v1/*". The proxy can only check them where it
// reads requests: plain HTTP always, HTTPS only on hosts whose TLS it
// ends (hosts with injections, or hosts marked for inspection), so
// Compile refuses a request rule on any other host rather than let it
// pass unenforced.
//
// Paths are compared after normalization (see cleanPath); the query
// string is never part of the match. In a glob, * matches within one
// path segment and ** matches any number of whole segments, none
// included, so /repos/** matches /repos itself.

// splitRequest cuts an optional leading METHOD and a trailing /PATH off
// rule text, leaving the host part. A CIDR's /bits is not a path: a path
// starts after a host that is not an address.
func splitRequest(t string) (method, host, glob string, err error) {
	host = t
	if i := strings.IndexAny(t, " \t"); i >= 0 {
		method, host = strings.ToUpper(t[:i]), strings.TrimSpace(t[i+1:])
		if !validMethod(method) {
			return "", "", "", fmt.Errorf("%q is not allowed before a host: only an HTTP method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS) or * for any", t[:i])
		}
		if method == "*" {
			method = ""
		}
	}
	if i := strings.Index(host, "/"); i >= 0 && !strings.HasPrefix(host, "[") && !isIPLiteral(strings.TrimPrefix(host[:i], privatePrefix)) {
		host, glob = host[:i], host[i:]
		if strings.Contains(glob, "?") || strings.Contains(glob, "#") {
			return "", "", "", fmt.Errorf("the path %q has a query or fragment: a path rule matches the path only, whatever the query", glob)
		}
		if strings.ContainsAny(glob, " \t") {
			return "", "", "", fmt.Errorf("the path %q has a space: write it as %%20", glob)
		}
		glob = cleanGlob(glob)
	}
	return method, host, glob, nil
}

func validMethod(m string) bool {
	switch m {
	case "*", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// cleanGlob normalizes a path glob the way cleanPath normalizes a path,
// keeping its stars.
func cleanGlob(g string) string {
	return cleanPath(g)
}

// cleanPath is the one spelling of a request path that rules compare:
// percent-encoding decoded (repeatedly, so a doubly encoded %252e%252e
// does not survive as dots an upstream might decode again), backslashes
// read as slashes (some servers do), and . and .. segments resolved, so
// /repos/../admin is /admin and /repos/%2e%2e/admin too. An empty path
// is /.
func cleanPath(p string) string {
	for i := 0; i < 4 && strings.Contains(p, "%"); i++ {
		d, err := url.PathUnescape(p)
		if err != nil || d == p {
			break
		}
		p = d
	}
	p = strings.ReplaceAll(p, `\`, "/")
	trailing := strings.HasSuffix(p, "/") && len(p) > 1
	p = path.Clean("/" + p)
	if trailing && p != "/" {
		p += "/"
	}
	return p
}

// isRequest reports whether the rule names a method or a path.
func (r Rule) isRequest() bool { return r.method != "" || r.glob != "" }

// matchRequest reports whether the rule's method and path glob (if any)
// match a request's method and a cleaned path.
func (r Rule) matchRequest(method, cleaned string) bool {
	if r.method != "" && r.method != strings.ToUpper(method) {
		return false
	}
	return r.glob == "" || globMatch(r.glob, cleaned)
}

// globMatch matches a cleaned path against a cleaned glob, segment by
// segment.
func globMatch(glob, p string) bool {
	return segmentsMatch(strings.Split(glob, "/"), strings.Split(p, "/"))
}

func segmentsMatch(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			if len(g) == 1 {
				return true
			}
			for i := 0; i <= len(p); i++ {
				if segmentsMatch(g[1:], p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 || !starMatch(g[0], p[0]) {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}

// starMatch matches one segment, * standing for any run of characters.
func starMatch(g, s string) bool {
	parts := strings.Split(g, "*")
	if len(parts) == 1 {
		return g == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	last := parts[len(parts)-1]
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// terminated reports whether the proxy reads the requests of host rule r
// on every port it names: plain HTTP (port 80), or a host whose TLS the
// proxy ends because an inspection or injection names it.
func (p *Policy) terminated(r Rule) bool {
	if r.port == 80 {
		return true
	}
	covers := func(by Rule) bool {
		if by.port != 0 && by.port != r.port {
			return false
		}
		if by.wild {
			return strings.HasSuffix(r.domain, "."+by.domain)
		}
		return !r.wild && by.domain == r.domain
	}
	for _, i := range p.Inspect {
		if covers(i) {
			return true
		}
	}
	for _, i := range p.Inject {
		if covers(i.host) {
			return true
		}
	}
	return false
}

// checkRequestRule says why a request rule cannot be enforced, if it
// cannot.
func (p *Policy) checkRequestRule(r Rule) error {
	if !r.isRequest() {
		return nil
	}
	if r.domain == "" {
		return fmt.Errorf("rule %q: a method or path rule names a domain, not an address or CIDR", r.Text)
	}
	if r.private {
		return fmt.Errorf("rule %q: a private: rule names a host and port only", r.Text)
	}
	if !p.terminated(r) {
		host := r.domain
		if r.wild {
			host = "*." + host
		}
		return fmt.Errorf("rule %q cannot be enforced: the proxy does not see inside TLS to %s; mark it for inspection with --inspect %s (the session must trust the engine's CA) or drop the method/path", r.Text, host, host)
	}
	return nil
}

// Request decides one request the proxy reads (plain HTTP, or inside TLS
// it ends) to h:port: deny rules first, host rules and request rules
// alike, then the mode, then allow rules. The host's connection was
// already allowed; this decides the request on it.
func (p *Policy) Request(h Host, port int, method, rawPath string) Decision {
	cleaned := cleanPath(rawPath)
	names := func(r Rule) bool { return r.match(h, port) && r.matchRequest(method, cleaned) }
	for _, r := range p.Deny {
		if names(r) {
			return Decision{Rule: "deny " + r.Text, Reason: fmt.Sprintf("%s %s%s is denied", method, h, cleaned)}
		}
	}
	if d, ok := p.byMode(); ok {
		return d
	}
	for _, r := range p.Allow {
		if names(r) {
			return Decision{Allowed: true, Rule: "allow " + r.Text}
		}
	}
	return p.undecided(fmt.Sprintf("no rule allows %s %s%s", method, h.hostPort(port), cleaned))
}
