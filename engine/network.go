package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/network"
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

// egressState is a running session's network side: its proxy (which
// holds the policy), the listeners on its gateway, its firewall rules.
type egressState struct {
	proxy  *egress.Proxy
	bridge string
	gw     netip.Addr
	stop   func()
}

func networkName(id string) string { return "airlock-" + id }

// bridgeName is the host interface of a session's network (at most 15
// characters, the kernel's limit).
func bridgeName(id string) string { return "al-" + id[:min(12, len(id))] }

// policyOf compiles a session's policy: the engine's default when spec
// is nil, the default plus spec's rules when spec has no mode.
func (e *Engine) policyOf(spec *api.EgressPolicy) (*egress.Policy, error) {
	d := e.defaults.Egress
	switch {
	case spec == nil:
		spec = &d
	case spec.Mode == "":
		spec = &api.EgressPolicy{Mode: d.Mode, Allow: append(append([]string(nil), d.Allow...), spec.Allow...),
			Deny: append(append([]string(nil), d.Deny...), spec.Deny...), Private: d.Private || spec.Private}
	}
	p, err := egress.Compile(egress.Spec{Mode: spec.Mode, Allow: spec.Allow, Deny: spec.Deny, Private: spec.Private})
	if err != nil {
		return nil, errdefs.Invalidf("network policy: %v", err)
	}
	return p, nil
}

func specJSON(p *egress.Policy) string {
	s := p.Spec()
	b, _ := json.Marshal(api.EgressPolicy{Mode: s.Mode, Allow: s.Allow, Deny: s.Deny, Private: s.Private})
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

// createNetwork makes the session's own internal network: no route out,
// its bridge named after the session for the firewall rules.
func (e *Engine) createNetwork(ctx context.Context, id string) (netip.Addr, error) {
	name := networkName(id)
	_, err := e.docker.NetworkCreate(ctx, name, network.CreateOptions{
		Driver:   "bridge",
		Internal: true,
		Options: map[string]string{
			"com.docker.network.bridge.name":                 bridgeName(id),
			"com.docker.network.bridge.enable_icc":           "true",
			"com.docker.network.bridge.enable_ip_masquerade": "false",
		},
		Labels: map[string]string{labelSession: id, labelEngine: e.stateDir},
	})
	if err != nil {
		return netip.Addr{}, dockerError("create the session's network", err)
	}
	return e.gateway(ctx, id)
}

func (e *Engine) gateway(ctx context.Context, id string) (netip.Addr, error) {
	ins, err := e.docker.NetworkInspect(ctx, networkName(id), network.InspectOptions{})
	if err != nil {
		return netip.Addr{}, dockerError("inspect the session's network", err)
	}
	for _, c := range ins.IPAM.Config {
		if a, err := netip.ParseAddr(c.Gateway); err == nil && a.Is4() {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("the session's network %s has no IPv4 gateway", networkName(id))
}

// startEgress starts the session's proxy, transparent listener and DNS on
// its gateway and installs its firewall rules.
func (e *Engine) startEgress(id string, gw netip.Addr, pol *egress.Policy) (*egressState, error) {
	x := egress.NewProxy(pol)
	x.Log = func(c egress.Conn) {
		if _, err := e.store.AddEgress(context.Background(), id, api.EgressEntry{Time: c.Time, Kind: c.Kind, Host: c.Host, Port: c.Port, Addr: c.Addr,
			BytesOut: c.BytesOut, BytesIn: c.BytesIn, Allowed: c.Allowed, Rule: c.Rule, Reason: c.Reason, Duration: c.Duration}); err != nil {
			e.log.Warn("record a connection", "session", id, "err", err)
		}
	}
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
	pl, err := listen(egress.ProxyPort)
	if err != nil {
		stop()
		return nil, fmt.Errorf("start the session's proxy: %w", err)
	}
	srv := &http.Server{Handler: x, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(pl)
	closers = append(closers, func() { srv.Close() })
	tl, err := listen(egress.TransparentPort)
	if err != nil {
		stop()
		return nil, fmt.Errorf("start the session's transparent listener: %w", err)
	}
	go x.ServeTransparent(tl)
	closers = append(closers, func() { tl.Close() })
	if err := (&egress.DNS{Proxy: x}).ServeDNSOn(ctx, net.JoinHostPort(gw.String(), strconv.Itoa(egress.DNSPort))); err != nil {
		stop()
		return nil, fmt.Errorf("start the session's DNS: %w", err)
	}
	if err := (egress.Firewall{}).Add(id, bridgeName(id), gw); err != nil {
		stop()
		(egress.Firewall{}).Remove(id, bridgeName(id))
		return nil, fmt.Errorf("install the session's firewall rules: %w", err)
	}
	return &egressState{proxy: x, bridge: bridgeName(id), gw: gw, stop: stop}, nil
}

// stopEgress stops the session's listeners and removes its rules.
func (s *egressState) close(id string) {
	if s == nil {
		return
	}
	s.stop()
	(egress.Firewall{}).Remove(id, s.bridge)
}

// proxyEnv points a session's tools at its proxy.
func proxyEnv(gw netip.Addr) []string {
	u := "http://" + net.JoinHostPort(gw.String(), strconv.Itoa(egress.ProxyPort))
	noProxy := "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u, "NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
		"NPM_CONFIG_PROXY=" + u, "NPM_CONFIG_HTTPS_PROXY=" + u,
	}
}

// writeResolvConf points the session's resolver at the engine's DNS.
func writeResolvConf(dir string, gw netip.Addr) (string, error) {
	p := filepath.Join(dir, "resolv.conf")
	return p, os.WriteFile(p, []byte("nameserver "+gw.String()+"\noptions ndots:0 timeout:2 attempts:2\n"), 0o644)
}

// Policy changes a running session's egress policy; new connections
// follow it at once.
func (e *Engine) Policy(ctx context.Context, id string, ch api.PolicyChange) (api.EgressPolicy, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.EgressPolicy{}, err
	}
	l := e.liveSession(rec.ID)
	if l == nil || l.net == nil {
		return api.EgressPolicy{}, errdefs.Conflictf("session %s has no network of its own (it predates egress policies, or it is not running)", rec.ID)
	}
	cur := l.net.proxy.Policy().Spec()
	next := api.EgressPolicy{Mode: cur.Mode, Allow: cur.Allow, Deny: cur.Deny, Private: cur.Private}
	if ch.Set != nil {
		next = *ch.Set
	}
	if ch.Mode != "" {
		next.Mode = ch.Mode
	}
	if ch.Private != nil {
		next.Private = *ch.Private
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
		ch.Allow = append(ch.Allow, rule)
		if next.Mode == egress.DenyAll {
			next.Mode = egress.Custom
		}
	}
	next.Allow = appendNew(next.Allow, ch.Allow...)
	next.Deny = appendNew(next.Deny, ch.Deny...)
	p, err := e.policyOf(&next)
	if err != nil {
		return api.EgressPolicy{}, err
	}
	l.net.proxy.SetPolicy(p)
	if err := e.store.SetEgress(ctx, rec.ID, specJSON(p)); err != nil {
		return api.EgressPolicy{}, err
	}
	e.log.Info("egress policy changed", "session", rec.ID, "policy", specJSON(p))
	s := p.Spec()
	return api.EgressPolicy{Mode: s.Mode, Allow: s.Allow, Deny: s.Deny, Private: s.Private}, nil
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
