package engine

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/secrets"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
)

// DefaultAllow is what a session may reach when neither the request nor
// the config file says otherwise: model providers and package registries.
var DefaultAllow = []string{
	"api.anthropic.com", "api.openai.com",
	"registry.npmjs.org", "pypi.org", "files.pythonhosted.org",
	"proxy.golang.org", "sum.golang.org", "crates.io", "static.crates.io", "index.crates.io",
	"deb.debian.org", "security.debian.org",
	"github.com", "codeload.github.com", "objects.githubusercontent.com", "raw.githubusercontent.com",
}

// policyOf compiles a session's policy: the engine's default when spec
// is nil, the default plus spec's rules when spec has no mode, and the
// default's ask timeout where spec has none.
func (e *Engine) policyOf(spec *api.EgressPolicy) (*egress.Policy, error) {
	d := e.defs().Egress
	switch {
	case spec == nil:
		spec = &d
	case spec.Mode == "":
		spec = addRules(d, *spec)
	case spec.AskTimeout == 0:
		own := *spec
		own.AskTimeout = d.AskTimeout // the setting, where the session sets none
		spec = &own
	}
	p, err := egress.Compile(egressSpec(*spec))
	if err != nil {
		return nil, errdefs.Invalidf("network policy: %v", err)
	}
	return p, nil
}

// addRules is base with the rules of add (a policy without a mode) added.
func addRules(base, add api.EgressPolicy) *api.EgressPolicy {
	out := &api.EgressPolicy{Mode: base.Mode, Allow: append(slices.Clone(base.Allow), add.Allow...),
		Deny: append(slices.Clone(base.Deny), add.Deny...), Private: base.Private || add.Private,
		Inject: append(slices.Clone(base.Inject), add.Inject...), Inspect: append(slices.Clone(base.Inspect), add.Inspect...),
		AskTimeout: base.AskTimeout}
	if add.AskTimeout != 0 {
		out.AskTimeout = add.AskTimeout
	}
	return out
}

// egressSpec and wirePolicy convert a policy between the wire and egress.
func egressSpec(p api.EgressPolicy) egress.Spec {
	return egress.Spec{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny, Private: p.Private, Inject: p.Inject, Inspect: p.Inspect, AskTimeout: p.AskTimeout}
}

func wirePolicy(s egress.Spec) api.EgressPolicy {
	return api.EgressPolicy{Mode: s.Mode, Allow: s.Allow, Deny: s.Deny, Private: s.Private, Inject: s.Inject, Inspect: s.Inspect, AskTimeout: s.AskTimeout}
}

func specJSON(p *egress.Policy) string {
	b, _ := json.Marshal(wirePolicy(p.Spec()))
	return string(b)
}

func storedPolicy(rec store.Session) *api.EgressPolicy {
	if rec.Egress == "" {
		return nil
	}
	var p api.EgressPolicy
	if json.Unmarshal([]byte(rec.Egress), &p) != nil {
		return nil
	}
	return &p
}

// The engine's session networks: engine/network's pool, with the
// session's egress (proxy, transparent listener, DNS) as each network's
// gateway.
type (
	netPool    = network.Pool[*egress.Policy, *egressState]
	sessionNet = network.Network[*egressState]
)

func newNetPool(stateDir string, spares int, log *slog.Logger, start network.StartFunc[*egressState]) *netPool {
	return network.NewPool[*egress.Policy](network.Netlink{}, network.IPTables{}, start,
		network.Options{Owner: "airlock:" + stateDir, Spares: spares, Logger: log})
}

// egressState is what serves on a session network's gateway: the proxy
// (which holds the policy) and the listeners on the gateway. It is
// engine/network's Gateway, and egress's Secrets for its session.
type egressState struct {
	proxy   *egress.Proxy
	secrets *secrets.Store
	stop    func()
	session atomic.Value // the session id its log entries and secrets belong to
}

var (
	_ network.Gateway[*egress.Policy] = (*egressState)(nil)
	_ egress.Secrets                  = (*egressState)(nil)
)

// Serve implements network.Gateway.
func (s *egressState) Serve(session string, p *egress.Policy) {
	s.proxy.SetPolicy(p)
	s.session.Store(session)
}

// Close implements network.Gateway.
func (s *egressState) Close() { s.stop() }

// Value implements egress.Secrets: the session's own value, else the
// stored one.
func (s *egressState) Value(ctx context.Context, name string) (string, error) {
	return s.secrets.Value(ctx, s.session.Load().(string), name)
}

// gateway is the gateway address of the network a session record names.
func (e *Engine) gateway(_ context.Context, name string) (netip.Addr, error) {
	n, err := e.nets.Lookup(network.KeyOf(name))
	if err != nil {
		return netip.Addr{}, err
	}
	return n.GW, nil
}

// attach plugs a started container into its session's network.
func (e *Engine) attach(ctx context.Context, rec store.Session, containerID string) error {
	ins, err := e.docker.ContainerInspect(ctx, containerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	if ins.State == nil || ins.State.Pid <= 0 {
		return errdefs.Unavailablef("the session's container is not running")
	}
	return e.nets.Attach(network.KeyOf(rec.Network), ins.State.Pid)
}

// dropNetwork stops a network's gateway and removes it (a create that
// failed). A nil n is fine.
func (e *Engine) dropNetwork(n *sessionNet) {
	if n != nil {
		e.nets.Stop(n)
		e.nets.Release(n.Key)
	}
}

// startGateway starts the proxy, transparent listener and DNS on network
// n's gateway, serving nobody under a deny-all policy until the pool
// hands the network to a session. Log entries go to that session.
func (e *Engine) startGateway(n *network.Net) (*egressState, error) {
	x := egress.NewProxy(&egress.Policy{Mode: egress.DenyAll})
	st := &egressState{proxy: x, secrets: e.secrets}
	st.session.Store("")
	x.CA, x.RootCAs, x.Secrets, x.Resolve = e.ca, e.upstreamRoots(), st, e.resolve
	if !e.neverAsk {
		x.Asker = gatewayAsker{e, st}
	}
	x.Log = func(c egress.Conn) {
		id := st.session.Load().(string)
		if id == "" {
			return // a spare: nothing runs on it
		}
		if _, err := e.store.AddEgress(context.Background(), id, api.EgressEntry{Time: c.Time, Kind: c.Kind, Host: c.Host, Port: c.Port, Addr: c.Addr, Method: c.Method, Path: c.Path,
			BytesOut: c.BytesOut, BytesIn: c.BytesIn, Allowed: c.Allowed, Rule: c.Rule, Reason: c.Reason, Duration: c.Duration}); err != nil {
			e.log.Warn("record a connection", "session", id, "err", err)
		}
	}
	gw := n.GW
	ctx, cancel := context.WithCancel(context.Background())
	var closers []func()
	stop := func() {
		cancel()
		for _, c := range closers {
			c()
		}
	}
	listen := func(port int) (net.Listener, error) {
		var err error
		for i := 0; i < 50; i++ { // the bridge's address can take a moment to be usable
			var l net.Listener
			if l, err = net.Listen("tcp", net.JoinHostPort(gw.String(), strconv.Itoa(port))); err == nil {
				return l, nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil, err
	}
	pl, err := listen(network.ProxyPort)
	if err != nil {
		stop()
		return nil, fmt.Errorf("start the session's proxy: %w", err)
	}
	srv := &http.Server{Handler: x, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(pl)
	closers = append(closers, func() { srv.Close() })
	tl, err := listen(network.TransparentPort)
	if err != nil {
		stop()
		return nil, fmt.Errorf("start the session's transparent listener: %w", err)
	}
	go x.ServeTransparent(tl)
	closers = append(closers, func() { tl.Close() })
	if err := (&egress.DNS{Proxy: x}).ServeDNSOn(ctx, net.JoinHostPort(gw.String(), strconv.Itoa(network.DNSPort))); err != nil {
		stop()
		return nil, fmt.Errorf("start the session's DNS: %w", err)
	}
	st.stop = stop
	return st, nil
}

// upstreamRoots are the CAs the proxy trusts upstream: the system's plus
// the configured extra bundle (an intercepting proxy's). Without a bundle
// it is nil, which crypto/tls takes for the system's pool, loaded on the
// first upstream TLS handshake: a copy made here parsed every system CA
// (3.8 MB of allocations, the most of an idle engine's start, for the
// spare network) before any session asked for one.
func (e *Engine) upstreamRoots() *x509.CertPool {
	bundle := e.defs().CABundle
	if bundle == "" {
		return nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if b, err := os.ReadFile(bundle); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	return pool
}

// proxyEnv points a session's tools at its proxy.
func proxyEnv(gw netip.Addr) []string {
	u := "http://" + net.JoinHostPort(gw.String(), strconv.Itoa(network.ProxyPort))
	noProxy := "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u, "NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
		"NPM_CONFIG_PROXY=" + u, "NPM_CONFIG_HTTPS_PROXY=" + u,
	}
}

// writeNetConfig points the session's resolver at the engine's DNS, and
// apt (which sudo leaves without the proxy environment) at its proxy.
func writeNetConfig(dir string, gw netip.Addr) (string, error) {
	p := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(p, []byte("nameserver "+gw.String()+"\noptions ndots:0 timeout:2 attempts:2\n"), 0o644); err != nil {
		return p, err
	}
	u := "http://" + net.JoinHostPort(gw.String(), strconv.Itoa(network.ProxyPort))
	apt := "Acquire::http::Proxy \"" + u + "\";\nAcquire::https::Proxy \"" + u + "\";\n"
	return p, os.WriteFile(filepath.Join(dir, "apt-proxy.conf"), []byte(apt), 0o644)
}

// Policy changes a running session's egress policy; new connections
// follow it at once. A hibernated session's stored policy changes, and
// it wakes under it.
func (e *Engine) Policy(ctx context.Context, id string, ch api.PolicyChange) (api.EgressPolicy, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.EgressPolicy{}, err
	}
	l := e.liveSession(rec.ID)
	var was *egress.Policy
	switch {
	case l != nil && l.net != nil:
		was = l.net.Gateway.proxy.Policy()
	case rec.State == api.StateHibernated:
		if was, err = e.policyOf(storedPolicy(rec)); err != nil {
			return api.EgressPolicy{}, err
		}
	default:
		return api.EgressPolicy{}, errdefs.Conflictf("session %s has no network of its own (it predates egress policies, or it is not running)", rec.ID)
	}
	cur := was.Spec()
	next := wirePolicy(cur)
	if ch.Set != nil {
		next = *ch.Set
	}
	if ch.Mode != "" {
		next.Mode = ch.Mode
	}
	if ch.Private != nil {
		next.Private = *ch.Private
	}
	if ch.AskTimeout != 0 {
		next.AskTimeout = ch.AskTimeout
	}
	if ch.FromLog > 0 {
		entry, err := e.store.EgressEntry(ctx, rec.ID, ch.FromLog)
		if err != nil {
			return api.EgressPolicy{}, err
		}
		if entry.Allowed {
			return api.EgressPolicy{}, errdefs.Conflictf("log entry %d (%s) was allowed already", entry.ID, entry.Host)
		}
		host := strings.Fields(entry.Host)[0] // DNS entries carry the record type
		rule := host
		if entry.Port > 0 {
			rule = net.JoinHostPort(host, strconv.Itoa(entry.Port))
			if !strings.Contains(host, ":") {
				rule = host + ":" + strconv.Itoa(entry.Port)
			}
		}
		if entry.Method != "" {
			// A request the proxy read: allow that request, where a
			// request rule can hold (a domain whose requests the proxy
			// reads); else its host and port, as for a connection.
			req := entry.Method + " " + rule + (&url.URL{Path: entry.Path}).EscapedPath()
			trial := next
			trial.Allow = appendNew(slices.Clone(next.Allow), req)
			if _, err := e.policyOf(&trial); err == nil {
				rule = req
			}
		}
		ch.Allow = append(ch.Allow, rule)
		if next.Mode == egress.DenyAll {
			next.Mode = egress.Custom
		}
	}
	next.Allow = appendNew(next.Allow, ch.Allow...)
	next.Deny = appendNew(next.Deny, ch.Deny...)
	next.Inject = appendNew(next.Inject, ch.Inject...)
	next.Inspect = appendNew(next.Inspect, ch.Inspect...)
	p, err := e.policyOf(&next)
	if err != nil {
		return api.EgressPolicy{}, err
	}
	if err := e.checkSecrets(ctx, rec.ID, p); err != nil {
		return api.EgressPolicy{}, err
	}
	out := wirePolicy(p.Spec())
	if specJSON(p) == specJSON(was) {
		return out, nil // nothing changes (an agent turn re-binding its endpoint)
	}
	if l != nil && l.net != nil {
		l.net.Gateway.proxy.SetPolicy(p)
	}
	if err := e.store.SetEgress(ctx, rec.ID, specJSON(p)); err != nil {
		return api.EgressPolicy{}, err
	}
	e.log.Info("egress policy changed", "session", rec.ID, "policy", specJSON(p))
	return out, nil
}

// checkSecrets says which secret an injection names that does not exist.
func (e *Engine) checkSecrets(ctx context.Context, session string, p *egress.Policy) error {
	for _, i := range p.Inject {
		if err := e.secrets.Check(ctx, session, i.Secrets()...); err != nil {
			return err
		}
	}
	return nil
}

func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, x := range list {
			if x == a {
				found = true
			}
		}
		if !found {
			list = append(list, a)
		}
	}
	return list
}

// EgressLog lists a session's connections.
func (e *Engine) EgressLog(ctx context.Context, id string, blockedOnly bool, limit int) ([]api.EgressEntry, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.store.EgressLog(ctx, rec.ID, blockedOnly, limit)
}
