package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Net is a session's network, made by the engine rather than by Docker:
// a Linux bridge holding the gateway address of a /30, and a veth pair
// whose other end is the container's eth0. Docker starts the container
// with no network at all (the fastest start it has); the engine then
// plugs it in, which takes milliseconds where a Docker network costs the
// session's start 70-100 ms here. Nothing routes from the bridge: the
// firewall drops forwarding, so the proxy on the gateway is the only way
// out.
type Net struct {
	Key    string
	Bridge string
	GW     netip.Addr
	Prefix netip.Prefix
}

// Pool is the range session networks take their /30 from.
var Pool = netip.MustParsePrefix("10.213.0.0/16")

var allocMu sync.Mutex

// allocLock is a host-wide lock file: engines in other processes (the
// daemon, `airlock ci` runs) pick /30s from the same pool, and two must
// not take the same one.
const allocLock = "/run/airlock-netalloc.lock"

// lockHost takes the host-wide allocation lock; the returned func frees
// it. Without /run (an unusual host) only this process is serialized.
func lockHost() func() {
	f, err := os.OpenFile(allocLock, os.O_CREATE|os.O_RDWR, 0o600)
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

// BridgeName is the host interface of network key (at most 15
// characters, the kernel's limit).
func BridgeName(key string) string { return "al-" + key[:min(12, len(key))] }

// CreateNet makes network key, owned by owner (a label kept as the
// bridge's alias): a bridge on a free /30 of Pool.
func CreateNet(key, owner string) (*Net, error) {
	allocMu.Lock()
	defer allocMu.Unlock()
	defer lockHost()()
	used, err := usedPrefixes()
	if err != nil {
		return nil, err
	}
	var pfx netip.Prefix
	for a := Pool.Addr(); Pool.Contains(a); {
		p := netip.PrefixFrom(a, 30)
		if !overlaps(p, used) {
			pfx = p
			break
		}
		for i := 0; i < 4; i++ {
			a = a.Next()
		}
	}
	if !pfx.IsValid() {
		return nil, fmt.Errorf("no free /30 left in %s for another session network", Pool)
	}
	n := &Net{Key: key, Bridge: BridgeName(key), GW: pfx.Addr().Next(), Prefix: pfx}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: n.Bridge}}
	if err := netlink.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("create bridge %s: %w", n.Bridge, err)
	}
	if err := netlink.LinkSetAlias(br, owner); err != nil {
		netlink.LinkDel(br)
		return nil, fmt.Errorf("label bridge %s: %w", n.Bridge, err)
	}
	// No IPv6 at all on the session's side of the host.
	os.WriteFile("/proc/sys/net/ipv6/conf/"+n.Bridge+"/disable_ipv6", []byte("1"), 0o644)
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: ipnet(n.GW, 30)}); err != nil {
		netlink.LinkDel(br)
		return nil, fmt.Errorf("address bridge %s: %w", n.Bridge, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		netlink.LinkDel(br)
		return nil, fmt.Errorf("bring up bridge %s: %w", n.Bridge, err)
	}
	return n, nil
}

// OpenNet finds network key again (after an engine restart).
func OpenNet(key string) (*Net, error) {
	l, err := netlink.LinkByName(BridgeName(key))
	if err != nil {
		return nil, fmt.Errorf("the session's bridge %s is gone: %w", BridgeName(key), err)
	}
	addrs, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_V4) })
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("the session's bridge %s has no address", BridgeName(key))
	}
	gw, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	ones, _ := addrs[0].Mask.Size()
	return &Net{Key: key, Bridge: BridgeName(key), GW: gw, Prefix: netip.PrefixFrom(gw, ones).Masked()}, nil
}

// Remove deletes the bridge (the container's end of the veth goes with
// its network namespace).
func (n *Net) Remove() {
	if l, err := netlink.LinkByName(n.Bridge); err == nil {
		netlink.LinkDel(l)
	}
	if l, err := netlink.LinkByName(hostVeth(n.Key)); err == nil {
		netlink.LinkDel(l)
	}
}

// Nets lists the keys of the networks owner made.
func Nets(owner string) []string {
	links, _ := dump(netlink.LinkList)
	var out []string
	for _, l := range links {
		a := l.Attrs()
		if l.Type() == "bridge" && a.Alias == owner && len(a.Name) > 3 && a.Name[:3] == "al-" {
			out = append(out, a.Name[3:])
		}
	}
	return out
}

func hostVeth(key string) string { return "alv" + key[:min(12, len(key))] }

// Attach plugs the network namespace of process pid (a container's) into
// the bridge: eth0 with the /30's other address, loopback up, and a
// default route through the gateway, added last (its presence says the
// network is ready).
func (n *Net) Attach(pid int) error {
	host, peer := hostVeth(n.Key), "alp"+n.Key[:min(12, len(n.Key))]
	if l, err := netlink.LinkByName(host); err == nil {
		netlink.LinkDel(l) // a previous container's
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host, MTU: 1500}, PeerName: peer}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth: %w", err)
	}
	br, err := netlink.LinkByName(n.Bridge)
	if err != nil {
		return fmt.Errorf("the session's bridge: %w", err)
	}
	hl, err := netlink.LinkByName(host)
	if err != nil {
		return err
	}
	os.WriteFile("/proc/sys/net/ipv6/conf/"+host+"/disable_ipv6", []byte("1"), 0o644)
	if err := netlink.LinkSetMaster(hl, br); err != nil {
		return fmt.Errorf("attach veth: %w", err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return err
	}
	pl, err := netlink.LinkByName(peer)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetNsPid(pl, pid); err != nil {
		return fmt.Errorf("move veth into the container: %w", err)
	}
	target, err := netns.GetFromPid(pid)
	if err != nil {
		return fmt.Errorf("the container's network namespace: %w", err)
	}
	defer target.Close()
	h, err := netlink.NewHandleAt(target)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(peer)
	if err != nil {
		return err
	}
	if err := h.LinkSetName(l, "eth0"); err != nil {
		return err
	}
	container := n.GW.Next()
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(container, 30)}); err != nil {
		return fmt.Errorf("address eth0: %w", err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return err
	}
	if lo, err := h.LinkByName("lo"); err == nil {
		h.LinkSetUp(lo)
	}
	route := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.IP(n.GW.AsSlice()), Dst: nil}
	if err := h.RouteAdd(route); err != nil {
		return fmt.Errorf("route through the gateway: %w", err)
	}
	runtime.KeepAlive(target)
	return nil
}

func ipnet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// usedPrefixes are the host's IPv4 networks: addresses and routes.
func usedPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip, ones).Masked())
	}
	routes, err := dump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		ip, _ := netip.AddrFromSlice(r.Dst.IP.To4())
		ones, _ := r.Dst.Mask.Size()
		if ones == 0 {
			continue // a default route
		}
		out = append(out, netip.PrefixFrom(ip, ones).Masked())
	}
	return out, nil
}

func overlaps(p netip.Prefix, used []netip.Prefix) bool {
	for _, u := range used {
		if u.Overlaps(p) {
			return true
		}
	}
	return false
}

// dump reads a netlink table again when the kernel interrupted the read
// because the table changed meanwhile (other sessions' networks coming
// and going, in this process or another): such a read is incomplete.
func dump[T any](read func() (T, error)) (T, error) {
	var v T
	var err error
	for i := 0; i < 20; i++ {
		if v, err = read(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
	return v, err
}
