package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scriptedAsker answers questions from a channel the test feeds, and
// counts them; an AllowAlways answer adds the destination as a rule.
type scriptedAsker struct {
	x       *Proxy
	answers chan string
	asked   atomic.Int64
	mu      sync.Mutex
	last    Question
}

func (a *scriptedAsker) Ask(ctx context.Context, q Question) (string, error) {
	a.asked.Add(1)
	a.mu.Lock()
	a.last = q
	a.mu.Unlock()
	select {
	case ans := <-a.answers:
		if ans == AllowAlways {
			s := a.x.Policy().Spec()
			s.Allow = append(s.Allow, q.Destination())
			p, err := Compile(s)
			if err != nil {
				return "", err
			}
			a.x.SetPolicy(p)
		}
		return ans, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Under the ask mode, what no rule decides waits for the user: allowed
// once it is asked again, allowed always it is not, denied or unanswered
// it is refused with the reason logged, and with no one to ask (ci) it
// is denied.
func TestAskMode(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream ok") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	x, purl, logs := testProxy(t, Spec{Mode: Ask, Allow: []string{"known.test"}, Private: true})
	c := viaProxy(purl)
	get := func(host string) (int, string) {
		t.Helper()
		resp, err := c.Get("http://" + host + ":" + port + "/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// No one to ask: denied, and the log says so.
	if status, body := get("new.test"); status != 403 || !strings.Contains(body, "no one is asked") {
		t.Fatalf("ask mode without an asker: %d %q", status, body)
	}

	a := &scriptedAsker{x: x, answers: make(chan string, 1)}
	x.Asker = a
	// A rule decides: nobody is asked.
	if status, _ := get("known.test"); status != 200 || a.asked.Load() != 0 {
		t.Fatalf("a host a rule allows: %d, asked %d times", status, a.asked.Load())
	}
	// Allow once, then asked again.
	for i := 1; i <= 2; i++ {
		a.answers <- AllowOnce
		if status, body := get("new.test"); status != 200 || body != "upstream ok" {
			t.Fatalf("allowed once: %d %q", status, body)
		}
		if n := a.asked.Load(); n != int64(i) {
			t.Fatalf("asked %d times after %d requests allowed once", n, i)
		}
	}
	if a.last.Method != "GET" || a.last.Path != "/x" || a.last.Host != "new.test" {
		t.Errorf("the question: %+v", a.last)
	}
	// Deny.
	a.answers <- DenyAnswer
	if status, body := get("new.test"); status != 403 || !strings.Contains(body, "the user denied") {
		t.Fatalf("denied: %d %q", status, body)
	}
	// Allow always: not asked again.
	a.answers <- AllowAlways
	for range 3 {
		if status, _ := get("always.test"); status != 200 {
			t.Fatalf("allowed always: %d", status)
		}
	}
	if n := a.asked.Load(); n != 4 {
		t.Errorf("asked %d times, want 4 (allow always asks once)", n)
	}
	// No answer: denied once the policy's timeout passes, with the reason.
	spec := x.Policy().Spec()
	spec.AskTimeout = 50 * time.Millisecond
	x.SetPolicy(mustCompile(t, spec))
	t0 := time.Now()
	if status, body := get("silent.test"); status != 403 || !strings.Contains(body, "no answer within 50ms") {
		t.Fatalf("unanswered: %d %q", status, body)
	}
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("an unanswered question held its request %s under a 50ms ask timeout", took)
	}
	var rules []string
	for _, l := range logs() {
		if strings.HasPrefix(l.Rule, "ask") {
			rules = append(rules, l.Rule)
		}
	}
	if want := "ask asked: allow-once asked: allow-once asked: deny asked: allow-always ask"; strings.Join(rules, " ") != want {
		t.Errorf("the log's rules: %q, want %q", rules, want)
	}
}

// One question per destination: requests to a destination being asked
// about wait for that answer instead of asking again.
func TestAskOncePerDestination(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream ok") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	x, purl, _ := testProxy(t, Spec{Mode: Ask, Private: true})
	a := &scriptedAsker{x: x, answers: make(chan string)}
	x.Asker = a
	c := viaProxy(purl)
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get("http://hammer.test:" + port + "/x")
			if err == nil {
				if resp.StatusCode == 200 {
					ok.Add(1)
				}
				resp.Body.Close()
			}
		}()
	}
	// Answer once the other four are held on the open question.
	for held := 0; held < 4; {
		time.Sleep(5 * time.Millisecond)
		x.asking.mu.Lock()
		if q := x.asking.open["hammer.test:"+port]; q != nil {
			held = q.waiting
		}
		x.asking.mu.Unlock()
	}
	a.answers <- AllowOnce
	wg.Wait()
	if ok.Load() != 5 {
		t.Fatalf("%d of 5 requests allowed", ok.Load())
	}
	if n := a.asked.Load(); n != 1 {
		t.Errorf("asked %d times for 5 concurrent requests to one destination, want once", n)
	}
}

// Only connections through the proxy and its requests are asked about:
// a lookup or a denied destination never is.
func TestAskDecisions(t *testing.T) {
	p := mustCompile(t, Spec{Mode: Ask, Deny: []string{"bad.test"}})
	for _, tc := range []struct {
		name string
		d    Decision
		ask  bool
	}{
		{"a new host", p.Name("new.test", 443), true},
		{"a lookup", p.NameAnyPort("new.test"), false},
		{"a denied host", p.Name("bad.test", 443), false},
		{"a public address", p.Name("198.51.100.7", 443), true},
		{"a private address", p.Name("10.0.0.1", 443), false},
		{"a request", p.Request(Host{Name: "new.test"}, 80, "GET", "/"), true},
	} {
		if tc.d.Allowed || tc.d.Ask != tc.ask {
			t.Errorf("%s: %+v, want ask=%v", tc.name, tc.d, tc.ask)
		}
	}
	if d := mustCompile(t, Spec{Mode: Custom}).Name("new.test", 443); d.Ask {
		t.Errorf("custom mode asks: %+v", d)
	}
}

// instantAsker answers allow-once at once: what holding a request costs
// without the human's time.
type instantAsker struct{}

func (instantAsker) Ask(context.Context, Question) (string, error) { return AllowOnce, nil }

// BenchmarkAskHeld compares a plain HTTP request a rule allows with one
// held and allowed once, on loopback.
func BenchmarkAskHeld(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	for _, bc := range []struct {
		name string
		spec Spec
	}{
		{"host-rule", Spec{Mode: Custom, Private: true, Allow: []string{"example.com"}}},
		{"held-allowed-once", Spec{Mode: Ask, Private: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			x := NewProxy(mustCompileB(b, bc.spec))
			x.Resolve, x.Asker = loopbackResolve, instantAsker{}
			srv := httptest.NewServer(x)
			defer srv.Close()
			c := viaProxy(srv.URL)
			getP50(b, c, "http://example.com:"+port+"/x")
		})
	}
}

// The ask timeout is part of the policy: kept by Spec, and bounded.
func TestAskTimeoutInPolicy(t *testing.T) {
	p := mustCompile(t, Spec{Mode: Ask, AskTimeout: 90 * time.Second})
	if got := p.Spec().AskTimeout; got != 90*time.Second {
		t.Errorf("Spec().AskTimeout = %s, want 1m30s", got)
	}
	for _, bad := range []time.Duration{-time.Second, MaxAskTimeout + time.Second} {
		if _, err := Compile(Spec{Mode: Ask, AskTimeout: bad}); err == nil || !strings.Contains(err.Error(), "ask timeout") {
			t.Errorf("ask timeout %s: err %v, want a refusal naming the ask timeout", bad, err)
		}
	}
}
