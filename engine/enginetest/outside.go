package enginetest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

// Outside is a network namespace the test makes to play the internet:
// it has 198.51.100.1 and fd00:198::1, reached from the host through a
// veth (198.51.100.254, fd00:198::fe), with an HTTP server on port 80 of
// both and a UDP listener on port 53 that counts what reaches it. Every
// packet a test sends stays on this machine.
type Outside struct {
	HTTP   atomic.Int64 // HTTP requests served
	DNS    atomic.Int64 // UDP datagrams received on port 53
	IPv4   string
	IPv6   string
	closer []func()
}

func sh(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// NewOutside makes the namespace and its servers; they go when the test
// ends.
func NewOutside(t testing.TB) *Outside {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	r := hex.EncodeToString(b)
	ns, host, peer := "al-out-"+r, "alo-"+r, "alx-"+r
	o := &Outside{IPv4: "198.51.100.1", IPv6: "fd00:198::1"}
	sh(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	sh(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { exec.Command("ip", "link", "del", host).Run() })
	sh(t, "ip", "link", "set", peer, "netns", ns)
	sh(t, "ip", "addr", "add", "198.51.100.254/24", "dev", host)
	sh(t, "ip", "-6", "addr", "add", "fd00:198::fe/64", "dev", host, "nodad")
	sh(t, "ip", "link", "set", host, "up")
	sh(t, "ip", "netns", "exec", ns, "ip", "addr", "add", "198.51.100.1/24", "dev", peer)
	sh(t, "ip", "netns", "exec", ns, "ip", "-6", "addr", "add", "fd00:198::1/64", "dev", peer, "nodad")
	sh(t, "ip", "netns", "exec", ns, "ip", "link", "set", peer, "up")
	sh(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	sh(t, "ip", "netns", "exec", ns, "ip", "route", "add", "default", "via", "198.51.100.254")

	// Sockets belong to the namespace they are made in.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	var listeners []net.Listener
	for _, a := range []string{"198.51.100.1:80", "[fd00:198::1]:80"} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			netns.Set(orig)
			t.Fatalf("listen on %s in the outside namespace: %v", a, err)
		}
		listeners = append(listeners, l)
	}
	udp, err := net.ListenPacket("udp", "198.51.100.1:53")
	netns.Set(orig)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.HTTP.Add(1)
		w.Write([]byte("the outside answers"))
	})}
	for _, l := range listeners {
		go srv.Serve(l)
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			o.DNS.Add(1)
		}
	}()
	t.Cleanup(func() { srv.Close(); udp.Close() })
	return o
}
