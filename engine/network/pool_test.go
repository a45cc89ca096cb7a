package network

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/testenv"
)

// fakeLinks is the host's network stack in memory: bridges by name with
// their address and owner, the host's other prefixes, plugged veths.
type fakeLinks struct {
	mu      sync.Mutex
	host    []netip.Prefix
	bridges map[string]fakeBridge
	plugged map[string]plug // by host end
	failAdd error
	bound   map[netip.Addr]bool // gateways some process still listens on
	// deleting, when set, is called before a link is deleted (set it
	// before the pool runs).
	deleting func(name string)
}

type fakeBridge struct {
	owner string
	addr  netip.Prefix
}

type plug struct {
	bridge string
	pid    int
	addr   netip.Prefix
	gw     netip.Addr
}

func newFakeLinks(host ...string) *fakeLinks {
	l := &fakeLinks{bridges: map[string]fakeBridge{}, plugged: map[string]plug{}}
	for _, h := range host {
		l.host = append(l.host, netip.MustParsePrefix(h))
	}
	return l
}

func (l *fakeLinks) GatewayBound(gw netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bound[gw]
}

func (l *fakeLinks) Prefixes() ([]netip.Prefix, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.host)
	for _, b := range l.bridges {
		out = append(out, b.addr.Masked())
	}
	return out, nil
}

func (l *fakeLinks) AddBridge(name, owner string, addr netip.Prefix) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failAdd != nil {
		return l.failAdd
	}
	if _, ok := l.bridges[name]; ok {
		return errors.New("file exists")
	}
	l.bridges[name] = fakeBridge{owner, addr}
	return nil
}

func (l *fakeLinks) BridgeAddr(name string) (netip.Prefix, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.bridges[name]
	if !ok {
		return netip.Prefix{}, errors.New("the session's bridge " + name + " is gone")
	}
	return b.addr, nil
}

func (l *fakeLinks) Bridges(owner string) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name, b := range l.bridges {
		if b.owner == owner {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (l *fakeLinks) Plug(bridge, hostEnd string, pid int, addr netip.Prefix, gw netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.bridges[bridge]; !ok {
		return errors.New("no bridge " + bridge)
	}
	l.plugged[hostEnd] = plug{bridge, pid, addr, gw}
	return nil
}

func (l *fakeLinks) Delete(name string) {
	if l.deleting != nil {
		l.deleting(name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.bridges, name)
	delete(l.plugged, name)
}

func (l *fakeLinks) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name := range l.bridges {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// fakeFirewall keeps the installed networks' gateways.
type fakeFirewall struct {
	mu      sync.Mutex
	rules   map[string]netip.Addr
	adds    int
	failAdd error
}

func (f *fakeFirewall) Available() error { return nil }

func (f *fakeFirewall) Add(key string, gw netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adds++
	if f.failAdd != nil {
		return f.failAdd
	}
	f.rules[key] = gw
	return nil
}

func (f *fakeFirewall) Remove(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rules, key)
}

func (f *fakeFirewall) Installed() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for k := range f.rules {
		out[k] = true
	}
	return out
}

func (f *fakeFirewall) has(key string) bool { return f.Installed()[key] }

// fakeGateway records what it serves.
type fakeGateway struct {
	mu      sync.Mutex
	gw      netip.Addr
	session string
	policy  string
	closed  bool
}

func (g *fakeGateway) Serve(session, policy string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.session, g.policy = session, policy
}

func (g *fakeGateway) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

type fixture struct {
	links    *fakeLinks
	fw       *fakeFirewall
	started  []*fakeGateway
	startErr error
	pool     *Pool[string, *fakeGateway]
}

func newFixture(t *testing.T, opts Options, host ...string) *fixture {
	f := &fixture{links: newFakeLinks(host...), fw: &fakeFirewall{rules: map[string]netip.Addr{}}}
	var mu sync.Mutex
	start := func(n *Net) (*fakeGateway, error) {
		mu.Lock()
		defer mu.Unlock()
		if f.startErr != nil {
			return nil, f.startErr
		}
		g := &fakeGateway{gw: n.GW, policy: "deny-all"}
		f.started = append(f.started, g)
		return g, nil
	}
	if opts.Owner == "" {
		opts.Owner = "airlock:/test"
	}
	opts.LockFile = filepath.Join(t.TempDir(), "netalloc.lock")
	f.pool = NewPool[string](f.links, f.fw, start, opts)
	t.Cleanup(f.pool.Close)
	return f
}

// With no spare, a session gets a network of its own, keyed by its id,
// on the first /30 the host does not use, with its gateway serving it
// under its policy and its rules installed before it is handed out.
func TestTakeMakesANetwork(t *testing.T) {
	f := newFixture(t, Options{}, "10.213.0.0/30", "10.213.0.8/29")
	n, err := f.pool.Take("s1", "allow github.com")
	if err != nil {
		t.Fatal(err)
	}
	want := Net{Key: "s1", Bridge: "al-s1", GW: netip.MustParseAddr("10.213.0.5"), Prefix: netip.MustParsePrefix("10.213.0.4/30")}
	if n.Net != want {
		t.Errorf("network %+v, want %+v", n.Net, want)
	}
	if n.Gateway.session != "s1" || n.Gateway.policy != "allow github.com" || n.Gateway.gw != want.GW {
		t.Errorf("gateway %+v: want it on %s serving s1 under its policy", n.Gateway, want.GW)
	}
	if !f.fw.has("s1") {
		t.Error("no firewall rules for the session's network")
	}
	n2, err := f.pool.Take("s2", "deny-all")
	if err != nil {
		t.Fatal(err)
	}
	if n2.Prefix != netip.MustParsePrefix("10.213.0.16/30") {
		t.Errorf("second network on %s, want the next free /30 (10.213.0.16/30)", n2.Prefix)
	}
}

// A /30 whose gateway some process still listens on (a killed engine's
// proxy, its bridge gone) is skipped: a gateway made there could not be
// served.
func TestTakeSkipsABoundGateway(t *testing.T) {
	f := newFixture(t, Options{}, "10.213.0.0/30")
	f.links.bound = map[netip.Addr]bool{netip.MustParseAddr("10.213.0.5"): true}
	n, err := f.pool.Take("s1", "deny-all")
	if err != nil {
		t.Fatal(err)
	}
	if n.Prefix != netip.MustParsePrefix("10.213.0.8/30") {
		t.Errorf("network on %s, want 10.213.0.8/30 (10.213.0.4/30's gateway is bound)", n.Prefix)
	}
}

// The real check: a listener bound with IP_FREEBIND on an address no
// interface holds is found; a free address is not.
func TestNetlinkGatewayBound(t *testing.T) {
	testenv.Root(t, "binding a foreign address")
	gw := netip.MustParseAddr("10.213.255.253")
	if (Netlink{}).GatewayBound(gw) {
		t.Skipf("%s:%d is in use on this host already", gw, ProxyPort)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_FREEBIND, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: ProxyPort, Addr: gw.As4()}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	if !(Netlink{}).GatewayBound(gw) {
		t.Errorf("a listener on %s:%d was not found", gw, ProxyPort)
	}
}

// A session takes a ready spare (its key is the spare's, not the
// session's), and the pool makes a replacement.
func TestTakeUsesASpare(t *testing.T) {
	f := newFixture(t, Options{Spares: 1})
	f.pool.Fill()
	f.pool.bg.Wait()
	spares := f.links.names()
	if len(spares) != 1 || len(f.started) != 1 || f.started[0].session != "" || f.started[0].policy != "deny-all" {
		t.Fatalf("bridges %v, gateways %+v: want one spare serving nobody under deny-all", spares, f.started)
	}
	spare := f.started[0]
	n, err := f.pool.Take("s1", "custom")
	if err != nil {
		t.Fatal(err)
	}
	if n.Bridge != spares[0] || n.Gateway != spare || n.Gateway.session != "s1" || n.Gateway.policy != "custom" {
		t.Errorf("took %+v: want the spare %s, now serving s1 under its policy", n, spares[0])
	}
	f.pool.bg.Wait()
	if got := f.links.names(); len(got) != 2 {
		t.Errorf("bridges %v: want the taken one and a replacement", got)
	}
	if !f.fw.has(n.Key) {
		t.Error("the spare's rules are gone")
	}
}

// A range with no free /30 left fails in words, classed unavailable.
func TestRangeExhausted(t *testing.T) {
	f := newFixture(t, Options{Range: netip.MustParsePrefix("10.99.0.0/29")}, "10.99.0.0/30")
	if _, err := f.pool.Take("s1", "p"); err != nil {
		t.Fatal(err)
	}
	_, err := f.pool.Take("s2", "p")
	if !errdefs.IsUnavailable(err) {
		t.Fatalf("a full range: %v, want unavailable", err)
	}
	if got := f.links.names(); len(got) != 1 {
		t.Errorf("bridges %v after the failure: want only s1's", got)
	}
}

// A network that cannot be finished leaves nothing behind: no bridge, no
// rules, no gateway listening.
func TestMakeFailureLeavesNothing(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		fail func(f *fixture)
	}{
		{"bridge", func(f *fixture) { f.links.failAdd = boom }},
		{"gateway", func(f *fixture) { f.startErr = boom }},
		{"firewall", func(f *fixture) { f.fw.failAdd = boom }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			c.fail(f)
			if _, err := f.pool.Take("s1", "p"); !errdefs.IsUnavailable(err) {
				t.Fatalf("error %v, want unavailable", err)
			}
			if got := f.links.names(); len(got) != 0 {
				t.Errorf("bridges left: %v", got)
			}
			if f.fw.has("s1") {
				t.Error("rules left")
			}
			for _, g := range f.started {
				if !g.closed {
					t.Error("a gateway left running")
				}
			}
		})
	}
}

// Attach plugs a container in with the /30's other address, routed
// through the gateway.
func TestAttach(t *testing.T) {
	f := newFixture(t, Options{})
	n, err := f.pool.Take("abcdef123456", "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.pool.Attach(n.Key, 4242); err != nil {
		t.Fatal(err)
	}
	got := f.links.plugged["alvabcdef123456"]
	want := plug{bridge: "al-abcdef123456", pid: 4242, addr: netip.MustParsePrefix("10.213.0.2/30"), gw: netip.MustParseAddr("10.213.0.1")}
	if got != want {
		t.Errorf("plugged %+v, want %+v", got, want)
	}
	if err := f.pool.Attach("gone", 1); !errdefs.IsUnavailable(err) {
		t.Errorf("attach to a missing network: %v, want unavailable", err)
	}
}

// After a restart a session's network is found again and its gateway
// started; rules still in place are not installed a second time.
func TestOpen(t *testing.T) {
	f := newFixture(t, Options{})
	n, err := f.pool.Take("s1", "p")
	if err != nil {
		t.Fatal(err)
	}
	f.pool.Stop(n) // the engine went away: gateway and rules gone
	if f.fw.has("s1") || !n.Gateway.closed {
		t.Fatal("Stop left the rules or the gateway")
	}
	adds := f.fw.adds
	for _, inPlace := range []bool{false, true} {
		m, err := f.pool.Open("s1", "s1", "p2", inPlace)
		if err != nil {
			t.Fatal(err)
		}
		if m.GW != n.GW || m.Prefix != n.Prefix || m.Gateway.session != "s1" || m.Gateway.policy != "p2" {
			t.Errorf("reopened %+v, gateway %+v", m.Net, m.Gateway)
		}
		adds++
		if inPlace {
			adds--
		}
		if f.fw.adds != adds || !f.fw.has("s1") {
			t.Errorf("rules in place %v: %d adds, want %d", inPlace, f.fw.adds, adds)
		}
	}
	if _, err := f.pool.Open("gone", "gone", "p", false); err == nil {
		t.Error("opened a network with no bridge")
	}
}

// Close removes the spares and makes no more; Unused lists this engine's
// networks nobody holds (for Release), and never another engine's.
func TestCloseAndUnused(t *testing.T) {
	f := newFixture(t, Options{Spares: 2, Owner: "airlock:/a"})
	other := f.links
	other.AddBridge("al-othersession", "airlock:/b", netip.MustParsePrefix("10.213.200.1/30"))
	f.pool.Fill()
	f.pool.bg.Wait()
	held, err := f.pool.Take("held", "p")
	if err != nil {
		t.Fatal(err)
	}
	f.pool.bg.Wait()
	other.AddBridge("al-crashed", "airlock:/a", netip.MustParsePrefix("10.213.100.1/30"))
	unused, err := f.pool.Unused(map[string]bool{held.Key: true})
	if err != nil || !slices.Equal(unused, []string{"crashed"}) {
		t.Fatalf("unused %v, %v: want the crashed create's network alone", unused, err)
	}
	f.pool.Release("crashed")
	names := f.links.names()
	if slices.Contains(names, "al-crashed") || !slices.Contains(names, "al-othersession") || !slices.Contains(names, held.Bridge) || len(names) != 4 {
		t.Errorf("bridges %v: want the held one, two spares and the other engine's", names)
	}
	f.pool.Close()
	f.pool.Fill()
	f.pool.bg.Wait()
	names = f.links.names()
	if len(names) != 2 || !slices.Contains(names, held.Bridge) {
		t.Errorf("bridges after Close: %v, want the held one and the other engine's", names)
	}
	keys, _ := OwnedKeys(f.links, "airlock:/a")
	if !slices.Equal(keys, []string{held.Key}) {
		t.Errorf("owned keys %v", keys)
	}
	f.pool.Stop(held)
	f.pool.Release(held.Key)
	if got := f.links.names(); len(got) != 1 || f.fw.has(held.Key) {
		t.Errorf("after Release: bridges %v, rules %v", got, f.fw.Installed())
	}
}

// TestReleaseLater: networks left to release in the background go, and a
// session that takes its old network's key back meanwhile gets a new
// network under it rather than "file exists" (or its new bridge removed).
func TestReleaseLater(t *testing.T) {
	f := newFixture(t, Options{Owner: "airlock:/a"})
	for i, key := range []string{"old1", "old2", "old3"} {
		f.links.AddBridge("al-"+key, "airlock:/a", netip.MustParsePrefix(fmt.Sprintf("10.213.%d.1/30", 100+i)))
	}
	// The background release stays on old1 until the take is done.
	gate := make(chan struct{})
	f.links.deleting = func(name string) {
		if name == "al-old1" {
			<-gate
		}
	}
	f.pool.ReleaseLater([]string{"old1", "old2", "old3"})
	n, err := f.pool.Take("old3", "p")
	close(gate)
	if err != nil {
		t.Fatalf("take a key being released: %v", err)
	}
	f.pool.bg.Wait()
	names := f.links.names()
	if !slices.Equal(names, []string{n.Bridge}) || n.Bridge != "al-old3" {
		t.Errorf("bridges %v: want only the new al-old3", names)
	}
}
