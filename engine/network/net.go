package network

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"strings"
)

// Net is a session's network, made by the engine rather than by Docker: a
// Linux bridge holding the gateway address of a /30, and a veth pair
// whose other end is the container's eth0. Docker starts the container
// with no network at all (the fastest start it has); the engine then
// plugs it in, which takes milliseconds where a Docker network costs the
// session's start 70-100 ms here. Nothing routes from the bridge: the
// firewall drops forwarding, so the gateway's services are the only way
// out.
type Net struct {
	Key    string // the session id, or a random one for a spare
	Bridge string // BridgeName(Key)
	GW     netip.Addr
	Prefix netip.Prefix // the /30
}

// Container is the container's address on the network: the /30's other
// host address.
func (n *Net) Container() netip.Prefix { return netip.PrefixFrom(n.GW.Next(), 30) }

// DefaultRange is where session networks take their /30 from.
var DefaultRange = netip.MustParsePrefix("10.213.0.0/16")

// Ports the engine serves on a session network's gateway: the only host
// ports the firewall lets the session reach.
const (
	ProxyPort       = 3128 // HTTP proxy (HTTP_PROXY, HTTPS_PROXY)
	TransparentPort = 3129 // every other TCP connection, redirected here
	DNSPort         = 53
)

// Name is how a session's record names network key: airlock-KEY.
func Name(key string) string { return "airlock-" + key }

// KeyOf is the key of the network a record names.
func KeyOf(name string) string { return strings.TrimPrefix(name, "airlock-") }

// BridgeName is the host interface of network key (at most 15
// characters, the kernel's limit).
func BridgeName(key string) string { return "al-" + short(key) }

// hostVeth is the host's end of the veth pair of network key.
func hostVeth(key string) string { return "alv" + short(key) }

func short(key string) string { return key[:min(12, len(key))] }

func randomKey() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// freePrefix is the first /30 of rng that overlaps none of used.
func freePrefix(rng netip.Prefix, used []netip.Prefix) (netip.Prefix, bool) {
	for a := rng.Masked().Addr(); rng.Contains(a); {
		p := netip.PrefixFrom(a, 30)
		if !overlaps(p, used) {
			return p, true
		}
		for i := 0; i < 4; i++ {
			a = a.Next()
		}
	}
	return netip.Prefix{}, false
}

func overlaps(p netip.Prefix, used []netip.Prefix) bool {
	for _, u := range used {
		if u.Overlaps(p) {
			return true
		}
	}
	return false
}
