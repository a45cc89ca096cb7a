package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Links is what the pool asks of the host's network stack, declared by
// its consumer; the real one is Netlink. Every method is safe to call
// from several goroutines; the pool serializes the choice of a /30.
type Links interface {
	// Prefixes lists the IPv4 networks the host uses: the prefixes of
	// its addresses and of its routes (default routes left out). It
	// never returns a partial list: a read the kernel interrupted is read
	// again or fails.
	Prefixes() ([]netip.Prefix, error)
	// AddBridge makes bridge name, labelled owner (kept as its alias),
	// holding addr (the gateway in its /30), up and with no IPv6. On an
	// error no bridge is left.
	AddBridge(name, owner string, addr netip.Prefix) error
	// BridgeAddr is the IPv4 address of bridge name, or an error when the
	// bridge or its address is gone.
	BridgeAddr(name string) (netip.Prefix, error)
	// Bridges lists the names of the bridges labelled owner.
	Bridges(owner string) ([]string, error)
	// Plug makes a veth pair: hostEnd on bridge, up, and its peer moved
	// into the network namespace of process pid as eth0 with addr,
	// loopback up, and a default route through gw added last (its
	// presence says the network is ready). A previous link named hostEnd
	// (a previous container's) is replaced.
	Plug(bridge, hostEnd string, pid int, addr netip.Prefix, gw netip.Addr) error
	// Delete removes link name; one that is gone already is fine.
	Delete(name string)
	// GatewayBound says whether something on the host still listens on
	// gw's proxy port though no bridge holds gw: an engine killed, or
	// closed in-process, while serving a network whose bridge was then
	// removed. A bridge made there again could not be served.
	GatewayBound(gw netip.Addr) bool
}

// GatewayBound tries to bind gw's proxy port with IP_FREEBIND (the
// address need not be the host's yet): only a socket bound there already
// refuses it.
func (Netlink) GatewayBound(gw netip.Addr) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_FREEBIND, 1); err != nil {
		return false
	}
	return errors.Is(unix.Bind(fd, &unix.SockaddrInet4{Port: ProxyPort, Addr: gw.As4()}), unix.EADDRINUSE)
}

// Netlink is Links on Linux, through netlink.
type Netlink struct{}

var _ Links = Netlink{}

// Prefixes implements Links.
func (Netlink) Prefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		out = append(out, prefixOf(a.IPNet))
	}
	routes, err := dump(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		if p := prefixOf(r.Dst); p.Bits() > 0 { // not a default route
			out = append(out, p)
		}
	}
	return out, nil
}

// AddBridge implements Links.
func (Netlink) AddBridge(name, owner string, addr netip.Prefix) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("create bridge %s: %w", name, err)
	}
	if err := netlink.LinkSetAlias(br, owner); err != nil {
		netlink.LinkDel(br)
		return fmt.Errorf("label bridge %s: %w", name, err)
	}
	noIPv6(name)
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: ipnet(addr)}); err != nil {
		netlink.LinkDel(br)
		return fmt.Errorf("address bridge %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		netlink.LinkDel(br)
		return fmt.Errorf("bring up bridge %s: %w", name, err)
	}
	return nil
}

// BridgeAddr implements Links.
func (Netlink) BridgeAddr(name string) (netip.Prefix, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("the session's bridge %s is gone: %w", name, err)
	}
	addrs, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_V4) })
	if err != nil || len(addrs) == 0 {
		return netip.Prefix{}, fmt.Errorf("the session's bridge %s has no address", name)
	}
	gw, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	ones, _ := addrs[0].Mask.Size()
	return netip.PrefixFrom(gw, ones), nil
}

// Bridges implements Links.
func (Netlink) Bridges(owner string) ([]string, error) {
	links, err := dump(netlink.LinkList)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range links {
		if a := l.Attrs(); l.Type() == "bridge" && a.Alias == owner {
			out = append(out, a.Name)
		}
	}
	return out, nil
}

// Delete implements Links.
func (Netlink) Delete(name string) {
	if l, err := netlink.LinkByName(name); err == nil {
		netlink.LinkDel(l)
	}
}

// Plug implements Links.
func (Netlink) Plug(bridge, hostEnd string, pid int, addr netip.Prefix, gw netip.Addr) error {
	peer := "alp" + hostEnd[min(3, len(hostEnd)):]
	if l, err := netlink.LinkByName(hostEnd); err == nil {
		netlink.LinkDel(l) // a previous container's
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostEnd, MTU: 1500}, PeerName: peer}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth: %w", err)
	}
	br, err := netlink.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("the session's bridge: %w", err)
	}
	hl, err := netlink.LinkByName(hostEnd)
	if err != nil {
		return err
	}
	noIPv6(hostEnd)
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
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(addr)}); err != nil {
		return fmt.Errorf("address eth0: %w", err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return err
	}
	if lo, err := h.LinkByName("lo"); err == nil {
		h.LinkSetUp(lo)
	}
	route := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.IP(gw.AsSlice()), Dst: nil}
	if err := h.RouteAdd(route); err != nil {
		return fmt.Errorf("route through the gateway: %w", err)
	}
	runtime.KeepAlive(target)
	return nil
}

// noIPv6 turns IPv6 off on a host interface: none on the session's side
// of the host.
func noIPv6(link string) {
	os.WriteFile("/proc/sys/net/ipv6/conf/"+link+"/disable_ipv6", []byte("1"), 0o644)
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}

func prefixOf(n *net.IPNet) netip.Prefix {
	ip, _ := netip.AddrFromSlice(n.IP.To4())
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(ip, ones).Masked()
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
