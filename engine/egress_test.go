package engine_test

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/errdefs"
)

func engineNetworks(t *testing.T, e *enginetest.Engine) []string {
	t.Helper()
	keys, err := network.OwnedKeys(network.Netlink{}, "airlock:"+e.StateDir)
	must(t, err)
	var names []string
	for _, k := range keys {
		names = append(names, network.Name(k))
	}
	return names
}

// A session takes a spare network when one is ready, with its own policy
// and log, and the engine leaves no network behind when it stops.
func TestSpareNetworks(t *testing.T) {
	e := enginetest.Start(t, func(o *engine.Options) { o.SpareNetworks = 1 })
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for len(engineNetworks(t, e)) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	spare := engineNetworks(t, e)
	if len(spare) != 1 {
		t.Fatalf("networks %v: want one spare", spare)
	}
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "custom", Allow: []string{"allowed.invalid"}}})
	must(t, err)
	code, out := run(t, e, s.ID, "wget", "-q", "-O-", "http://blocked.invalid/")
	if code == 0 || !strings.Contains(out, "403") {
		t.Fatalf("a blocked request: exit %d, %q", code, out)
	}
	log, err := e.EgressLog(ctx, s.ID, true, 0)
	must(t, err)
	if len(log) == 0 || log[len(log)-1].Host != "blocked.invalid" || log[len(log)-1].Rule != "no rule" {
		t.Fatalf("the session's log: %+v", log)
	}
	got, _ := e.Get(ctx, s.ID)
	if got.Egress == nil || got.Egress.Allow[0] != "allowed.invalid" {
		t.Errorf("policy %+v", got.Egress)
	}
	nets := engineNetworks(t, e)
	if len(nets) < 1 || !contains(nets, spare[0]) {
		t.Errorf("networks %v: the session should be on the spare %s", nets, spare[0])
	}
	must(t, e.Remove(ctx, s.ID))
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	e.Close(cctx)
	if left := engineNetworks(t, e); len(left) != 0 {
		t.Errorf("networks left after the engine stopped: %v", left)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// hostAddrs are this machine's IPv4 addresses (where its services listen).
func hostAddrs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	must(t, err)
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !strings.HasPrefix(n.IP.String(), "198.51.100.") {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// Every way out but the engine's proxy fails, and the proxy follows the
// policy. The outside is a network namespace of this test: no packet
// leaves the machine.
func TestEgressBypassAttempts(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	out := enginetest.NewOutside(t)
	// A service on every host address.
	hostSvc, err := net.Listen("tcp", "0.0.0.0:0")
	must(t, err)
	defer hostSvc.Close()
	var hostHits atomic.Int64
	go func() {
		for {
			c, err := hostSvc.Accept()
			if err != nil {
				return
			}
			hostHits.Add(1)
			c.Close()
		}
	}()
	hostPort := strconv.Itoa(hostSvc.Addr().(*net.TCPAddr).Port)

	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "custom", Allow: []string{"allowed.invalid"}}})
	must(t, err)
	other, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "allow-all"}})
	must(t, err)
	_, ipOut := run(t, e, other.ID, "sh", "-c", "ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1")
	otherIP := strings.TrimSpace(ipOut)
	go run(t, e, other.ID, "sh", "-c", "for i in 1 2 3 4 5; do printf 'HTTP/1.0 200 OK\\r\\n\\r\\nthe other session answers' | timeout 10 nc -l -p 8080; done")

	// (busybox's static wget crashes here: requests are written by hand.)
	get := func(addr, port string) string {
		return "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 " + addr + " " + port
	}
	gw := "$(ip route | awk '/default/{print $3}')"
	viaProxy := func(url string) string {
		return "printf 'GET " + url + " HTTP/1.0\\r\\n\\r\\n' | nc -w 3 " + gw + " 3128"
	}
	// Until the service listens (its exec may start late on a loaded
	// machine): a refused connection does not use up one of its answers.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		_, text := run(t, e, other.ID, "sh", "-c", get("127.0.0.1", "8080"))
		if strings.Contains(text, "the other session answers") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other session's service does not answer even locally: %q", text)
		}
	}
	attempts := []struct{ name, cmd string }{
		{"direct IP connect", get(out.IPv4, "80")},
		{"the proxy, to an IP no rule allows", viaProxy("http://" + out.IPv4 + "/")},
		{"IPv6", get(out.IPv6, "80")},
		{"DNS to an outside resolver", "nslookup -timeout=2 example.com " + out.IPv4},
		{"DNS TXT (tunnelling)", "nslookup -type=TXT allowed.invalid"},
		{"raw sockets (ping)", "ping -c 1 -W 2 " + out.IPv4},
		{"the Docker socket", "test -e /var/run/docker.sock && echo answers"},
		{"another session's container", get(otherIP, "8080")},
		{"a host service on the gateway", get(gw, hostPort)},
	}
	for _, a := range hostAddrs(t) {
		attempts = append(attempts, struct{ name, cmd string }{"a host service on " + a, get(a, hostPort)})
	}
	for _, a := range attempts {
		_, text := run(t, e, s.ID, "sh", "-c", a.cmd)
		if strings.Contains(text, "answers") || strings.Contains(text, "Address 1:") || strings.Contains(text, "bytes from") {
			t.Errorf("%s: went through (%q)", a.name, text)
		}
	}
	// From the allow-all session (no private opt-in), every spelling of
	// the host's own addresses through the proxy is refused.
	for _, target := range []string{"[::1%25lo]", "[::1%25eth0]", "[::ffff:127.0.0.1]", "0.0.0.0", "[::]", "2130706433", "0x7f.1", "127.1", "localhost", "LOCALHOST."} {
		for _, req := range []string{"GET http://" + target + ":" + hostPort + "/ HTTP/1.0", "CONNECT " + target + ":" + hostPort + " HTTP/1.0"} {
			_, text := run(t, e, other.ID, "sh", "-c", "printf '%s\\r\\n\\r\\n' '"+req+"' | nc -w 3 "+gw+" 3128")
			if !strings.Contains(text, "403") {
				t.Errorf("%s: %q", req, text)
			}
		}
	}
	if n := out.HTTP.Load(); n != 0 {
		t.Errorf("the outside served %d requests", n)
	}
	if n := out.DNS.Load(); n != 0 {
		t.Errorf("the outside resolver got %d datagrams", n)
	}
	if n := hostHits.Load(); n != 0 {
		t.Errorf("the host service took %d connections", n)
	}
	log, err := e.EgressLog(ctx, s.ID, true, 0)
	must(t, err)
	kinds := map[string]bool{}
	for _, l := range log {
		kinds[l.Kind] = true
	}
	for _, k := range []string{"tcp", "http", "dns"} {
		if !kinds[k] {
			t.Errorf("no blocked %s connection in the log: %+v", k, log)
		}
	}

	// Allowed by a rule, the same address is reached through the proxy
	// and, redirected, directly.
	_, err = e.Policy(ctx, s.ID, api.PolicyChange{Allow: []string{out.IPv4 + ":80"}})
	must(t, err)
	for _, cmd := range []string{viaProxy("http://" + out.IPv4 + "/"), get(out.IPv4, "80")} {
		if _, text := run(t, e, s.ID, "sh", "-c", cmd); !strings.Contains(text, "the outside answers") {
			t.Errorf("%s, once allowed: %q", cmd, text)
		}
	}
	if n := out.HTTP.Load(); n != 2 {
		t.Errorf("the outside served %d requests, want 2", n)
	}
}

// fakeAgent puts a "claude" into the session that writes its environment
// to /tmp/agent-env: what a real CLI (or anything it runs) could read.
func fakeAgent(t *testing.T, e *enginetest.Engine, id string) {
	t.Helper()
	if code, out := run(t, e, id, "sh", "-c", `rm -f /tmp/agent-env; printf '#!/bin/sh\nenv > /tmp/agent-env\n' > /bin/claude && chmod +x /bin/claude`); code != 0 {
		t.Fatalf("install the fake agent: %s", out)
	}
}

// agentEnv is what the fake agent saw, "" if it never ran.
func agentEnv(t *testing.T, e *enginetest.Engine, id string) string {
	t.Helper()
	_, out := run(t, e, id, "sh", "-c", "cat /tmp/agent-env 2>/dev/null")
	return out
}

// An agent's API key never reaches the session, and a private model
// endpoint opens that one host and port, not private access: the key is
// injected in transit over TLS, and when it cannot be (a plain-HTTP
// endpoint, a session whose proxy is gone) the turn fails in words
// instead of handing the key to the agent.
func TestAgentKeyStaysOnTheHost(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	_, base := enginetest.Model(t, e.Docker)
	u, err := url.Parse(base)
	must(t, err)
	hostPort := u.Host
	gw, _, _ := net.SplitHostPort(hostPort)
	tlsBase, plainBase := "https://"+hostPort, "http://"+hostPort

	// Another service on the same host address, which the session must
	// not reach because its model endpoint is there.
	other, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	must(t, err)
	defer other.Close()
	var otherHits atomic.Int64
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			otherHits.Add(1)
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nthe host answers"))
			c.Close()
		}
	}()
	otherPort := strconv.Itoa(other.Addr().(*net.TCPAddr).Port)

	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "allow-all"}})
	must(t, err)
	fakeAgent(t, e, s.ID)

	// Plain HTTP: the key would travel readable; the turn fails first.
	_, err = e.Agent(ctx, s.ID, api.AgentRequest{Agent: "claude", Prompt: "hi", BaseURL: plainBase, APIKey: testKey}, nil)
	if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "plain HTTP") || !strings.Contains(err.Error(), "https://") {
		t.Errorf("a plain-HTTP endpoint: %v, want an error that says to use https", err)
	}
	if env := agentEnv(t, e, s.ID); env != "" {
		t.Errorf("the agent ran with a plain-HTTP endpoint: %q", env)
	}

	// TLS: the agent has a placeholder, the proxy the key.
	tr, err := e.Agent(ctx, s.ID, api.AgentRequest{Agent: "claude", Prompt: "hi", BaseURL: tlsBase, APIKey: testKey}, nil)
	must(t, err)
	env := agentEnv(t, e, s.ID)
	if tr.State != "done" || !strings.Contains(env, "ANTHROPIC_API_KEY=") || strings.Contains(env, testKey) {
		t.Errorf("turn %+v; the agent's environment:\n%s", tr, env)
	}
	got, err := e.Get(ctx, s.ID)
	must(t, err)
	if got.Egress.Private || !contains(got.Egress.Allow, "private:"+hostPort) {
		t.Errorf("the session's policy after a turn with a private endpoint: %+v: want one private: rule, not private access", got.Egress)
	}
	proxy := "$(ip route | awk '/default/{print $3}')"
	_, text := run(t, e, s.ID, "sh", "-c", "printf 'GET http://"+gw+":"+otherPort+"/ HTTP/1.0\\r\\n\\r\\n' | nc -w 3 "+proxy+" 3128")
	if strings.Contains(text, "the host answers") || !strings.Contains(text, "private") {
		t.Errorf("another port of the endpoint's host: %q", text)
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the host's other service took %d connections", n)
	}

	// A session whose proxy did not come back (here: its stored policy
	// no longer compiles) cannot have the key injected.
	must(t, e.Store.SetEgress(ctx, s.ID, `{"mode":"from-the-future"}`))
	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	run(t, e2, s.ID, "rm", "-f", "/tmp/agent-env")
	_, err = e2.Agent(ctx, s.ID, api.AgentRequest{Agent: "claude", Prompt: "hi", BaseURL: tlsBase, APIKey: testKey}, nil)
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "proxy") {
		t.Errorf("a session without its proxy: %v, want an error that says the key cannot be injected", err)
	}
	if env := agentEnv(t, e2, s.ID); env != "" {
		t.Errorf("the agent ran in a session without its proxy: %q", env)
	}
}
