package egress

import (
	"context"
	"net"
	"testing"

	"github.com/miekg/dns"
)

func TestDNS(t *testing.T) {
	x, _, logs := testProxy(t, Spec{Mode: Custom, Allow: []string{"ok.test:443"}, Private: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, _ := net.ListenPacket("udp", "127.0.0.1:0")
	addr := l.LocalAddr().String()
	l.Close()
	if err := (&DNS{Proxy: x}).ServeDNSOn(ctx, addr); err != nil {
		t.Fatal(err)
	}
	ask := func(name string, typ uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), typ)
		r, err := dns.Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	if r := ask("ok.test", dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
		t.Fatalf("allowed name: %v", r)
	}
	if r := ask("other.test", dns.TypeA); r.Rcode != dns.RcodeRefused {
		t.Fatalf("a name no rule allows: %v", r)
	}
	if r := ask("ok.test", dns.TypeTXT); r.Rcode != dns.RcodeRefused {
		t.Fatalf("TXT (tunnelling): %v", r)
	}
	l2 := logs()
	if len(l2) != 3 || !l2[0].Allowed || l2[1].Allowed || l2[2].Allowed {
		t.Fatalf("log %+v", l2)
	}
	// Without the opt-in a private answer is withheld.
	x.SetPolicy(mustCompile(t, Spec{Mode: AllowAll}))
	if r := ask("ok.test", dns.TypeA); len(r.Answer) != 0 {
		t.Fatalf("a loopback answer without the opt-in: %v", r)
	}
}
