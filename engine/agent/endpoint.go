package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
)

// endpoint is an agent's model endpoint, as the policy sees it.
type endpoint struct {
	raw        string
	scheme     string
	host, port string
	portN      int
}

// hostPort is host:port, with IPv6 in brackets.
func (ep endpoint) hostPort() string { return net.JoinHostPort(ep.host, ep.port) }

// keyPlaceholder is what an agent CLI has for its API key when the real
// one is injected in transit.
const keyPlaceholder = "airlock-injects-the-key-in-transit"

// parseEndpoint reads the model endpoint. An empty one is the CLI's own
// default.
func parseEndpoint(raw string) (endpoint, error) {
	if raw == "" {
		return endpoint{}, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return endpoint{}, errdefs.Invalidf("endpoint %q is not an http(s) URL: give it like https://gateway.example.com/v1", raw)
	}
	ep := endpoint{raw: raw, scheme: u.Scheme, host: u.Hostname(), port: u.Port()}
	if ep.port == "" {
		ep.port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	ep.portN, _ = strconv.Atoi(ep.port)
	if h, err := egress.ParseHost(ep.host); err == nil && (h.Name == "localhost" || strings.HasSuffix(h.Name, ".localhost") ||
		h.IsAddr() && (egress.Special(h.Addr) == "loopback" || egress.Special(h.Addr) == "unspecified")) {
		return ep, errdefs.Invalidf("endpoint %s points at localhost, which inside a session is the session itself: use an address of the host the session can reach (e.g. the Docker bridge, 172.17.0.1)", raw)
	}
	return ep, nil
}

// canInject says why the agent's key cannot be injected into its
// requests in transit, if it cannot. Then the turn does not run: the key
// is never handed to the session instead.
func (r *Runner) canInject(session string, ag *harness.Agent, ep endpoint) error {
	if ag.KeyEnv == "" {
		return nil // no key
	}
	never := "and Airlock never puts an API key into the session"
	switch {
	case ag.KeyHeader == "":
		return errdefs.Invalidf("Airlock does not know which header carries %s's key, so it cannot add the key in transit, %s", ag.Title, never)
	case ep.raw == "":
		return errdefs.Invalidf("%s has no model endpoint for Airlock to add its key to, %s: give one with --base-url", ag.Title, never)
	case ep.scheme != "https":
		return errdefs.Invalidf("the model endpoint %s is plain HTTP: Airlock adds %s's API key to requests in transit only over TLS, where the certificate proves the host (over plain HTTP anyone on the way reads it), %s: give an https:// endpoint (for a private CA, set the engine's ca_bundle)",
			ep.raw, ag.Title, never)
	}
	if r.egress.Policy(session) == nil {
		return errdefs.Unavailablef("session %s has no egress proxy running (it did not come back when the engine restarted; the engine's log says why), so %s's API key cannot be added in transit, %s: start a new session, or restart the engine",
			session, ag.Title, never)
	}
	return nil
}

// bindEndpoint puts the agent's endpoint into the session's policy, in one
// change: an allow rule for its host and port unless the policy allows
// them already (the user named it, so an endpoint at a private address,
// a local model or gateway, is let through as that one host and port:
// private:HOST:PORT, not private access for the session), and an
// injection of the agent's key into its requests (a key from the caller
// is kept in memory for the session, a stored one is read when a request
// goes out). canInject has said the injection can be set up.
func (r *Runner) bindEndpoint(ctx context.Context, session string, ag *harness.Agent, ep endpoint, given string) error {
	pol := r.egress.Policy(session)
	if ep.raw == "" || pol == nil {
		return nil
	}
	var ch api.PolicyChange
	if allowed, private := endpointAllowed(ctx, pol, ep); !allowed {
		rule := ep.hostPort()
		if private {
			rule = "private:" + rule
		}
		ch.Allow = []string{rule}
	}
	if ag.KeyEnv != "" {
		if given != "" {
			r.secrets.SetSessionSecret(session, ag.KeyEnv, given)
		}
		ch.Inject = []string{ep.hostPort() + ":" + ag.KeyHeader + "=" + fmt.Sprintf(ag.KeyValue, ag.KeyEnv)}
	}
	return r.egress.ChangePolicy(ctx, session, ch)
}

// endpointAllowed tells whether the policy lets the session reach ep (by
// address, or by name and every address the name has), and whether ep is
// at a private address.
func endpointAllowed(ctx context.Context, pol *egress.Policy, ep endpoint) (allowed, private bool) {
	addrs := []netip.Addr{}
	byName := false
	if a, err := netip.ParseAddr(ep.host); err == nil {
		addrs = append(addrs, a)
	} else {
		byName = true
		addrs, _ = net.DefaultResolver.LookupNetIP(ctx, "ip", ep.host)
	}
	allowed = len(addrs) > 0 && (!byName || pol.Name(ep.host, ep.portN).Allowed)
	for _, a := range addrs {
		private = private || egress.Special(a) != ""
		if byName {
			allowed = allowed && pol.Resolved(ep.host, a, ep.portN).Allowed
		} else {
			allowed = allowed && pol.Addr(a, ep.portN).Allowed
		}
	}
	return allowed, private
}

// reachable remembers endpoints found reachable (host:port -> when).
type reachable struct {
	mu sync.Mutex
	ok map[string]time.Time
}

// checkReachable fails fast, with a clear message, when the endpoint
// cannot be reached, instead of letting a CLI retry for minutes.
func (r *Runner) checkReachable(ctx context.Context, ep endpoint) error {
	if ep.raw == "" {
		return nil
	}
	r.reach.mu.Lock()
	at, ok := r.reach.ok[ep.hostPort()]
	r.reach.mu.Unlock()
	if ok && time.Since(at) < r.opts.ReachableFor {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, r.opts.DialTimeout)
	defer cancel()
	c, err := r.opts.Dial(dctx, "tcp", ep.hostPort())
	if err != nil {
		return errdefs.Unavailablef("the model endpoint %s is unreachable (%v): check the URL (--base-url or the config file) and that the server runs", ep.raw, err)
	}
	c.Close()
	r.reach.mu.Lock()
	r.reach.ok[ep.hostPort()] = time.Now()
	r.reach.mu.Unlock()
	return nil
}
