package engine_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
)

// Request rules in a real session: its requests go through the engine's
// proxy on its own network to a server in a network namespace of this
// test (named outside.test by the proxy's resolver). Plain HTTP is
// always read; a method/path rule for HTTPS on a host whose TLS the
// proxy does not end is refused when the policy is set. (The HTTPS
// requests inside an inspected connection: engine/egress's
// TestProxyRequestRules, against a real proxy and real TLS servers.)
func TestEgressRequestRules(t *testing.T) {
	out := enginetest.NewOutside(t)
	e := enginetest.Start(t, func(o *engine.Options) {
		o.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
			if host == "outside.test" {
				return []netip.Addr{netip.MustParseAddr(out.IPv4)}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		}
	})
	ctx := context.Background()

	// On a host not inspected, a method/path rule for HTTPS is an error
	// at policy time, at create and on a running session alike.
	_, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "custom", Allow: []string{"GET outside.test/repos/**"}}})
	if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "cannot be enforced") || !strings.Contains(err.Error(), "--inspect outside.test") {
		t.Fatalf("create with a request rule on a host not inspected: %v", err)
	}
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "custom",
		Allow: []string{"GET outside.test:80/repos/**"}, Deny: []string{"POST outside.test:80/**", "outside.test:80/repos/*/admin/**"}}})
	must(t, err)
	if _, err := e.Policy(ctx, s.ID, api.PolicyChange{Deny: []string{"DELETE outside.test/**"}}); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "cannot be enforced") {
		t.Errorf("a request rule for HTTPS on a host not inspected, on a running session: %v", err)
	}
	if _, err := e.Policy(ctx, s.ID, api.PolicyChange{Inspect: []string{"outside.test"}, Deny: []string{"DELETE outside.test/**"}}); err != nil {
		t.Errorf("the same rule with the host inspected: %v", err)
	}

	gw := "$(ip route | awk '/default/{print $3}')"
	for _, tc := range []struct {
		method, path string
		allowed      bool
		rule         string
	}{
		{"GET", "/repos/octo/hello", true, "allow GET outside.test:80/repos/**"},
		{"GET", "/repos/octo/hello?admin=1", true, "allow GET outside.test:80/repos/**"},
		{"POST", "/repos/octo/hello", false, "deny POST outside.test:80/**"},
		{"GET", "/admin", false, "no rule"},
		{"GET", "/repos/../admin", false, "no rule"},
		{"GET", "/repos/%2e%2e/admin", false, "no rule"},
		{"GET", "/repos/octo/admin/keys", false, "deny outside.test:80/repos/*/admin/**"},
		{"DELETE", "/repos/octo", false, "deny DELETE outside.test/**"},
	} {
		before := out.HTTP.Load()
		req := tc.method + " http://outside.test" + tc.path + " HTTP/1.0"
		_, text := run(t, e, s.ID, "sh", "-c", "printf '%s\\r\\n\\r\\n' '"+req+"' | nc -w 3 "+gw+" 3128")
		served := out.HTTP.Load() - before
		if tc.allowed != (served == 1) || tc.allowed != strings.Contains(text, "the outside answers") {
			t.Errorf("%s: served %d, answer %q; want allowed=%v", req, served, text, tc.allowed)
		}
		if !tc.allowed && (!strings.Contains(text, "403") || !strings.Contains(text, tc.rule)) {
			t.Errorf("%s: the refusal does not name the rule %q: %q", req, tc.rule, text)
		}
	}
	log, err := e.EgressLog(ctx, s.ID, false, 0)
	must(t, err)
	var requests []string
	for _, l := range log {
		if l.Method != "" {
			requests = append(requests, fmt.Sprintf("%s %s %v %s", l.Method, l.Path, l.Allowed, l.Rule))
		}
	}
	want := []string{
		"GET /repos/octo/hello true allow GET outside.test:80/repos/**",
		"GET /repos/octo/hello true allow GET outside.test:80/repos/**",
		"POST /repos/octo/hello false deny POST outside.test:80/**",
		"GET /admin false no rule",
		"GET /admin false no rule",
		"GET /admin false no rule",
		"GET /repos/octo/admin/keys false deny outside.test:80/repos/*/admin/**",
		"DELETE /repos/octo false deny DELETE outside.test/**",
	}
	if strings.Join(requests, "\n") != strings.Join(want, "\n") {
		t.Errorf("the log's requests:\n%s\nwant:\n%s", strings.Join(requests, "\n"), strings.Join(want, "\n"))
	}
}

// Under --net ask, a request no rule decides waits in `net pending`
// until it is decided: allowed once it is asked again, denied it is
// refused, allowed always it is not asked again.
func TestEgressAsk(t *testing.T) {
	out := enginetest.NewOutside(t)
	e := enginetest.Start(t, func(o *engine.Options) {
		o.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(out.IPv4)}, nil
		}
	})
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "ask"}})
	must(t, err)
	gw := "$(ip route | awk '/default/{print $3}')"
	// ask makes a request from the session and answers the question it
	// raises (none: it must not raise one).
	ask := func(host, answer string) string {
		t.Helper()
		text := make(chan string, 1)
		go func() {
			_, got := run(t, e, s.ID, "sh", "-c", "printf 'GET http://"+host+"/x HTTP/1.0\\r\\n\\r\\n' | nc -w 90 "+gw+" 3128")
			text <- got
		}()
		if answer == "" {
			return <-text
		}
		var q api.PendingQuestion
		for q.ID == 0 {
			time.Sleep(20 * time.Millisecond)
			list, err := e.Pending(ctx)
			must(t, err)
			for _, p := range list {
				if p.Session == s.ID && p.Host == host {
					q = p
				}
			}
		}
		if q.Method != "GET" || q.Path != "/x" || q.Port != 80 || q.Kind != "http" {
			t.Errorf("the question: %+v", q)
		}
		must(t, e.Decide(ctx, api.Decide{ID: q.ID, Answer: answer}))
		return <-text
	}
	for _, tc := range []struct{ host, answer, want string }{
		{"once.test", "allow-once", "the outside answers"},
		{"once.test", "allow-once", "the outside answers"}, // asked again
		{"once.test", "deny", "the user denied"},
		{"always.test", "allow-always", "the outside answers"},
		{"always.test", "", "the outside answers"}, // not asked again
	} {
		if got := ask(tc.host, tc.answer); !strings.Contains(got, tc.want) {
			t.Errorf("%s answered %q: %q, want %q", tc.host, tc.answer, got, tc.want)
		}
	}
	if err := e.Decide(ctx, api.Decide{ID: 999, Answer: "deny"}); !errdefs.IsNotFound(err) {
		t.Errorf("deciding a question nobody asked: %v", err)
	}
	if err := e.Decide(ctx, api.Decide{ID: 1, Answer: "maybe"}); !errdefs.IsInvalid(err) {
		t.Errorf("an answer that is none: %v", err)
	}
	got, err := e.Get(ctx, s.ID)
	must(t, err)
	if !contains(got.Egress.Allow, "always.test:80") || contains(got.Egress.Allow, "once.test:80") {
		t.Errorf("the policy after the answers: %+v", got.Egress)
	}
}

// An engine that never asks (airlock ci) denies what no rule decides, at
// once and with the reason.
func TestEgressNeverAsk(t *testing.T) {
	out := enginetest.NewOutside(t)
	e := enginetest.Start(t, func(o *engine.Options) {
		o.NeverAsk = true
		o.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(out.IPv4)}, nil
		}
	})
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "ask"}})
	must(t, err)
	gw := "$(ip route | awk '/default/{print $3}')"
	_, text := run(t, e, s.ID, "sh", "-c", "printf 'GET http://new.test/x HTTP/1.0\\r\\n\\r\\n' | nc -w 10 "+gw+" 3128")
	if !strings.Contains(text, "403") || !strings.Contains(text, "no one is asked") {
		t.Errorf("an undecided request where no one is asked: %q", text)
	}
	if list, err := e.Pending(ctx); err != nil || len(list) != 0 {
		t.Errorf("pending: %+v, %v", list, err)
	}
	if n := out.HTTP.Load(); n != 0 {
		t.Errorf("the outside served %d requests", n)
	}
}
