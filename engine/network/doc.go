// Package network owns the host side of session networks: a Linux bridge
// per session holding the gateway address of a /30 taken from a range
// (10.213.0.0/16), the veth pair that plugs a container into it, the
// host firewall rules that leave the network no way out but the
// gateway's ports, and a pool of spare networks kept ready so that a
// session's start waits for none of this.
//
// It reaches the host through two small interfaces, Links (netlink) and
// Firewall (iptables), and starts whatever serves on a gateway (the
// engine's egress proxy and DNS) through a function it is given, so the
// pool's logic is tested without root. It imports nothing of the engine.
package network
