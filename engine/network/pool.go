package network

import (
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlock/airlock/errdefs"
)

// Gateway is what serves on a network's gateway address: the engine's
// egress (proxy, transparent listener, DNS), of which the pool knows
// nothing else. The pool starts one on every network it makes, before
// the firewall sends traffic to it, and hands it to the session that
// takes the network.
type Gateway[P any] interface {
	// Serve hands the gateway to session id under policy; new
	// connections follow both at once.
	Serve(session string, policy P)
	// Close stops its listeners. The network and its rules stay.
	Close()
}

// StartFunc starts a gateway on network n, serving no session under a
// policy that lets nothing out (what a spare network runs). It fails
// when it cannot listen on n.GW.
type StartFunc[G any] func(n *Net) (G, error)

// Network is a network with its gateway running.
type Network[G any] struct {
	Net
	Gateway G
}

// Options tune a pool.
type Options struct {
	// Owner labels this engine's bridges (as their alias), so that
	// another engine's networks are never taken or removed.
	Owner string
	// Spares is how many networks to keep ready (0: none).
	Spares int
	// Range is where networks take their /30 from (zero: DefaultRange).
	Range netip.Prefix
	// LockFile serializes the choice of a /30 with other processes on
	// the host: the daemon and `airlock ci` runs share the range (""
	// means /run/airlock-netalloc.lock). Without it, 4 of 20 concurrent
	// runs picked the same /30.
	LockFile string
	Logger   *slog.Logger // nil logs nothing
}

// DefaultLockFile is the host-wide allocation lock.
const DefaultLockFile = "/run/airlock-netalloc.lock"

// Pool makes, keeps and removes one engine's session networks. What it
// pools is not Docker networks (sessions have none: Docker starts them
// with no network) but the engine's own: making one (a bridge, a dozen
// iptables calls, the gateway's listeners) takes about 45 ms here, which
// a session's start would otherwise wait for, so the pool keeps Options.Spares networks ready, their gateways
// up under a deny-all policy and nobody on them; a session takes one and
// a replacement is made in the background. It is safe for concurrent
// use.
type Pool[P any, G Gateway[P]] struct {
	links Links
	fw    Firewall
	start StartFunc[G]
	opts  Options
	log   *slog.Logger

	alloc sync.Mutex // the choice of a /30 in this process

	mu      sync.Mutex // guards what follows
	spares  []*Network[G]
	filling bool
	closing bool
	stale   map[string]*staleNet // ReleaseLater's keys, until released
	bg      sync.WaitGroup       // the filler, ReleaseLater's releases
}

// staleNet is a key ReleaseLater was given: claimed by whoever releases
// it (the background, or a make of the same key), done once released.
type staleNet struct {
	claimed bool
	done    chan struct{}
}

// NewPool returns a pool making networks through links and fw, each with
// a gateway from start. It makes no network until asked (Take, Fill).
func NewPool[P any, G Gateway[P]](links Links, fw Firewall, start StartFunc[G], opts Options) *Pool[P, G] {
	if !opts.Range.IsValid() {
		opts.Range = DefaultRange
	}
	if opts.LockFile == "" {
		opts.LockFile = DefaultLockFile
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pool[P, G]{links: links, fw: fw, start: start, opts: opts, log: log.With("component", "network")}
}

// Available says what the host lacks for session networks.
func (p *Pool[P, G]) Available() error { return p.fw.Available() }

// Take gives session id a network under policy: a spare when one is
// ready (then a replacement is made in the background), else a new one
// keyed by id. The network is the caller's until it calls Stop and
// Release.
func (p *Pool[P, G]) Take(id string, policy P) (*Network[G], error) {
	n := p.takeSpare()
	if n == nil {
		var err error
		if n, err = p.make(id); err != nil {
			return nil, err
		}
	} else {
		p.Fill()
	}
	n.Gateway.Serve(id, policy)
	return n, nil
}

func (p *Pool[P, G]) takeSpare() *Network[G] {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := len(p.spares)
	if k == 0 {
		return nil
	}
	n := p.spares[k-1]
	p.spares = p.spares[:k-1]
	return n
}

// Open brings network key back for session id after an engine restart:
// its gateway is started again under policy, and its rules installed
// unless they are still in place (see Installed).
func (p *Pool[P, G]) Open(key, id string, policy P, rulesInPlace bool) (*Network[G], error) {
	n, err := p.Lookup(key)
	if err != nil {
		return nil, err
	}
	g, err := p.start(n)
	if err != nil {
		return nil, err
	}
	g.Serve(id, policy)
	if !rulesInPlace {
		if err := p.fw.Add(key, n.GW); err != nil {
			g.Close()
			p.fw.Remove(key)
			return nil, errdefs.Unavailablef("install the session's firewall rules: %v", err)
		}
	}
	return &Network[G]{Net: *n, Gateway: g}, nil
}

// Lookup finds network key on the host.
func (p *Pool[P, G]) Lookup(key string) (*Net, error) {
	addr, err := p.links.BridgeAddr(BridgeName(key))
	if err != nil {
		return nil, errdefs.Unavailablef("%v", err)
	}
	return &Net{Key: key, Bridge: BridgeName(key), GW: addr.Addr(), Prefix: addr.Masked()}, nil
}

// Attach plugs the network namespace of process pid (a started
// container's) into network key: eth0 with the /30's other address and a
// default route through the gateway.
func (p *Pool[P, G]) Attach(key string, pid int) error {
	n, err := p.Lookup(key)
	if err != nil {
		return err
	}
	if err := p.links.Plug(n.Bridge, hostVeth(key), pid, n.Container(), n.GW); err != nil {
		return errdefs.Unavailablef("plug the session into its network: %v", err)
	}
	return nil
}

// Installed lists the keys of the networks whose firewall rules are all
// in place (asked once when an engine restarts).
func (p *Pool[P, G]) Installed() map[string]bool { return p.fw.Installed() }

// Stop stops network n's gateway and removes its rules; the bridge stays
// (a container may still be on it) until Release. A nil n is fine.
func (p *Pool[P, G]) Stop(n *Network[G]) {
	if n == nil {
		return
	}
	n.Gateway.Close()
	p.fw.Remove(n.Key)
}

// Release removes network key from the host: its rules, its bridge and
// the host's end of its veth. What is gone already is fine. The gateway,
// if one runs, is Stop's.
func (p *Pool[P, G]) Release(key string) {
	p.fw.Remove(key)
	p.links.Delete(BridgeName(key))
	p.links.Delete(hostVeth(key))
}

// Fill makes spare networks in the background up to Options.Spares.
func (p *Pool[P, G]) Fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.filling || p.closing || len(p.spares) >= p.opts.Spares {
		return
	}
	p.filling = true
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		p.fill()
	}()
}

func (p *Pool[P, G]) fill() {
	defer func() {
		p.mu.Lock()
		p.filling = false
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		need := len(p.spares) < p.opts.Spares && !p.closing
		p.mu.Unlock()
		if !need {
			return
		}
		n, err := p.make(randomKey())
		if err != nil {
			p.log.Warn("make a spare network", "err", err)
			return
		}
		p.mu.Lock()
		closing := p.closing
		if !closing {
			p.spares = append(p.spares, n)
		}
		p.mu.Unlock()
		if closing {
			p.Stop(n)
			p.Release(n.Key)
			return
		}
	}
}

// Close removes the spare networks and waits for a spare being made (the
// engine is stopping). Taken networks are their sessions'.
func (p *Pool[P, G]) Close() {
	p.mu.Lock()
	p.closing = true
	spares := p.spares
	p.spares = nil
	p.mu.Unlock()
	for _, n := range spares {
		p.Stop(n)
		p.Release(n.Key)
	}
	p.bg.Wait()
}

// ReleaseLater releases keys (Release) in the background, one after
// another; Close waits for it. A make of one of them (a session woken
// under its old network's key) releases it first itself, or waits for
// its release, so it never meets its remains.
func (p *Pool[P, G]) ReleaseLater(keys []string) {
	if len(keys) == 0 {
		return
	}
	p.mu.Lock()
	if p.stale == nil {
		p.stale = map[string]*staleNet{}
	}
	for _, k := range keys {
		if p.stale[k] == nil {
			p.stale[k] = &staleNet{done: make(chan struct{})}
		}
	}
	p.bg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.bg.Done()
		for _, k := range keys {
			p.releaseStale(k)
		}
	}()
}

// releaseStale releases key if ReleaseLater was given it and no one has
// yet, or waits for whoever is.
func (p *Pool[P, G]) releaseStale(key string) {
	p.mu.Lock()
	s := p.stale[key]
	if s == nil {
		p.mu.Unlock()
		return
	}
	if s.claimed {
		p.mu.Unlock()
		<-s.done
		return
	}
	s.claimed = true
	p.mu.Unlock()
	p.Release(key)
	p.mu.Lock()
	delete(p.stale, key)
	p.mu.Unlock()
	close(s.done)
}

// Unused lists this engine's networks that neither a session (used, by
// key) nor the pool's spares hold — spares of a previous run, a network
// made by a create that crashed before recording it, a lost session's —
// for the caller to Release.
func (p *Pool[P, G]) Unused(used map[string]bool) ([]string, error) {
	keys, err := OwnedKeys(p.links, p.opts.Owner)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	spare := map[string]bool{}
	for _, n := range p.spares {
		spare[n.Key] = true
	}
	var unused []string
	for _, key := range keys {
		if !used[key] && !spare[key] {
			unused = append(unused, key)
		}
	}
	return unused, nil
}

// OwnedKeys lists the keys of the networks owner made.
func OwnedKeys(links Links, owner string) ([]string, error) {
	names, err := links.Bridges(owner)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, name := range names {
		if key, ok := strings.CutPrefix(name, "al-"); ok && key != "" {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// make makes network key: a bridge on a free /30, its gateway started,
// its rules installed. On an error nothing of it is left.
func (p *Pool[P, G]) make(key string) (*Network[G], error) {
	p.releaseStale(key)
	n, err := p.create(key)
	if err != nil {
		return nil, err
	}
	g, err := p.start(n)
	if err != nil {
		p.links.Delete(n.Bridge)
		return nil, errdefs.Unavailablef("start the session network's gateway: %v", err)
	}
	if err := p.fw.Add(key, n.GW); err != nil {
		g.Close()
		p.Release(key)
		return nil, errdefs.Unavailablef("install the session's firewall rules: %v", err)
	}
	return &Network[G]{Net: *n, Gateway: g}, nil
}

// create makes the bridge of network key on the first /30 of the range
// that the host does not use, under the host-wide allocation lock.
func (p *Pool[P, G]) create(key string) (*Net, error) {
	p.alloc.Lock()
	defer p.alloc.Unlock()
	defer lockHost(p.opts.LockFile)()
	used, err := p.links.Prefixes()
	if err != nil {
		return nil, errdefs.Unavailablef("list the host's networks: %v", err)
	}
	pfx, ok := freePrefix(p.opts.Range, used)
	for ok && p.links.GatewayBound(pfx.Addr().Next()) {
		p.log.Warn("a /30 with no bridge still has its gateway bound by some process: skipped", "prefix", pfx)
		used = append(used, pfx)
		pfx, ok = freePrefix(p.opts.Range, used)
	}
	if !ok {
		return nil, errdefs.Unavailablef("no free /30 left in %s for another session network: remove sessions you no longer need (`airlock rm`)", p.opts.Range)
	}
	n := &Net{Key: key, Bridge: BridgeName(key), GW: pfx.Addr().Next(), Prefix: pfx}
	if err := p.links.AddBridge(n.Bridge, p.opts.Owner, netip.PrefixFrom(n.GW, 30)); err != nil {
		return nil, errdefs.Unavailablef("make the session's network: %v", err)
	}
	return n, nil
}

// lockHost takes the host-wide allocation lock at path; the returned
// func frees it. Where the file cannot be made (an unusual host) only
// this process is serialized.
func lockHost(path string) func() {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
}
