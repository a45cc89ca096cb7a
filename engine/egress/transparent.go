package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// soOriginalDst is netfilter's getsockopt for a redirected connection's
// original destination.
const soOriginalDst = 80

// ServeTransparent takes TCP connections the firewall redirected (those
// that did not go through the proxy): it forwards one when the policy
// allows its address (a CIDR rule, or allow-all), and otherwise closes
// it and logs why.
func (x *Proxy) ServeTransparent(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go x.transparent(c.(*net.TCPConn))
	}
}

func (x *Proxy) transparent(c *net.TCPConn) {
	defer c.Close()
	start := time.Now()
	dst, err := originalDst(c)
	entry := Conn{Time: start, Kind: "tcp"}
	if err != nil {
		entry.Reason = "no original destination: " + err.Error()
		x.log(entry)
		return
	}
	entry.Host, entry.Port = dst.Addr().String(), int(dst.Port())
	d := x.policy.Load().Addr(dst.Addr(), int(dst.Port()))
	entry.Rule = d.Rule
	if !d.Allowed {
		entry.Reason = "direct connection refused (" + d.Reason + "): use the session's proxy, which HTTP_PROXY and HTTPS_PROXY name"
		entry.Duration = time.Since(start)
		x.log(entry)
		c.SetLinger(0) // a reset, not an orderly close: the client sees the refusal
		return
	}
	up, err := x.dialer.Dial("tcp", dst.String())
	if err != nil {
		entry.Allowed, entry.Reason = true, "upstream: "+err.Error()
		entry.Duration = time.Since(start)
		x.log(entry)
		return
	}
	entry.Allowed, entry.Addr = true, dst.String()
	entry.BytesOut, entry.BytesIn = splice(c, c, up)
	entry.Duration = time.Since(start)
	x.log(entry)
}

func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var sa syscall.RawSockaddrInet4
	var serr error
	err = raw.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(sa))
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.SOL_IP, soOriginalDst, uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&size)), 0)
		if e != 0 {
			serr = e
		}
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, serr
	}
	port := int(sa.Port>>8 | sa.Port<<8)
	a := netip.AddrFrom4(sa.Addr)
	if !a.IsValid() {
		return netip.AddrPort{}, fmt.Errorf("bad address")
	}
	return netip.MustParseAddrPort(net.JoinHostPort(a.String(), strconv.Itoa(port))), nil
}
