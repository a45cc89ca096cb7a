package ports

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
)

// awake is a session core whose one session runs.
type awake struct{}

func (awake) Wake(ctx context.Context, id string) (string, error) { return "/proc/1/ns/net", nil }
func (awake) Proc(ctx context.Context, id string) (string, error) { return "/proc/1", nil }

// seen is what the session's server got: the headers that carry
// credentials.
type seen struct {
	Authorization string
	Cookie        string
	Query         string
}

// withSession returns a forwarder whose forwards reach a server that
// answers what it was sent (in place of the session's port).
func withSession(t *testing.T) *Forwarder {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(seen{r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.URL.RawQuery})
	}))
	t.Cleanup(srv.Close)
	f := New(awake{}, "", nil)
	f.dial = func(ctx context.Context, _ string, _ int) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}
	t.Cleanup(f.Stop)
	return f
}

// Basic and bearer auth: the right credentials pass and never reach the
// session (the session's own cookies do); wrong or missing ones are
// refused with a challenge naming the scheme.
func TestAuth(t *testing.T) {
	f := withSession(t)
	ctx := context.Background()
	basic, err := f.Open(ctx, "s1", api.PortRequest{Port: 80, Auth: AuthBasic, Listen: "0.0.0.0:0"})
	if err != nil {
		t.Fatal(err)
	}
	if basic.User != "airlock" || len(basic.Token) < 32 {
		t.Fatalf("basic forward %+v: want user airlock and a password", basic)
	}
	named, err := f.Open(ctx, "s1", api.PortRequest{Port: 81, Auth: AuthBasic, User: "phone"})
	if err != nil || named.User != "phone" {
		t.Fatalf("basic forward with a user: %+v %v", named, err)
	}
	bearer, err := f.Open(ctx, "s1", api.PortRequest{Port: 82, Auth: AuthBearer})
	if err != nil {
		t.Fatal(err)
	}
	addr := func(p api.Port) string {
		_, port, _ := net.SplitHostPort(p.Listen)
		return "http://127.0.0.1:" + port + "/"
	}
	wrong := strings.Repeat("0", len(basic.Token))
	type creds func(*http.Request)
	userPass := func(u, p string) creds { return func(r *http.Request) { r.SetBasicAuth(u, p) } }
	header := func(k, v string) creds { return func(r *http.Request) { r.Header.Set(k, v) } }
	for _, c := range []struct {
		name      string
		p         api.Port
		creds     []creds
		want      int
		challenge string // the WWW-Authenticate scheme of a refusal
		cookie    string // what the session sees of the cookies
	}{
		{"basic, right", basic, []creds{userPass("airlock", basic.Token)}, 200, "", ""},
		{"basic, right, the session's cookie kept", basic, []creds{userPass("airlock", basic.Token), header("Cookie", "sid=1")}, 200, "", "sid=1"},
		{"basic, a given user", named, []creds{userPass("phone", named.Token)}, 200, "", ""},
		{"basic, wrong password", basic, []creds{userPass("airlock", wrong)}, 401, "Basic", ""},
		{"basic, wrong user", basic, []creds{userPass("root", basic.Token)}, 401, "Basic", ""},
		{"basic, another forward's password", named, []creds{userPass("phone", basic.Token)}, 401, "Basic", ""},
		{"basic, none", basic, nil, 401, "Basic", ""},
		{"basic, the password as a bearer token", basic, []creds{header("Authorization", "Bearer "+basic.Token)}, 401, "Basic", ""},
		{"bearer, right", bearer, []creds{header("Authorization", "Bearer "+bearer.Token)}, 200, "", ""},
		{"bearer, cookie, the session's kept", bearer, []creds{header("Cookie", "airlock_port_"+strings.Split(bearer.Listen, ":")[1]+"="+bearer.Token+"; sid=2")}, 200, "", "sid=2"},
		{"bearer, wrong", bearer, []creds{header("Authorization", "Bearer "+wrong)}, 401, "Bearer", ""},
		{"bearer, none", bearer, nil, 401, "Bearer", ""},
		{"bearer, as basic", bearer, []creds{userPass("airlock", bearer.Token)}, 401, "Bearer", ""},
	} {
		req, _ := http.NewRequest("GET", addr(c.p), nil)
		for _, set := range c.creds {
			set(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got seen
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
			continue
		}
		if c.want != 200 {
			if h := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, c.challenge+" realm=") {
				t.Errorf("%s: challenge %q, want %s", c.name, h, c.challenge)
			}
			continue
		}
		if got.Authorization != "" || got.Cookie != c.cookie {
			t.Errorf("%s: the session saw Authorization %q, Cookie %q; want none and %q", c.name, got.Authorization, got.Cookie, c.cookie)
		}
	}
}

// ?token= with the forward's token sets its cookie and is taken out of
// the URL; another token in the query is the app's own (Vite's hot
// reload WebSocket has one): it reaches the session on a request with
// the cookie, and is refused without.
func TestTokenQuery(t *testing.T) {
	f := withSession(t)
	p, err := f.Open(context.Background(), "s1", api.PortRequest{Port: 80, Auth: AuthBearer})
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(p.URL, "/")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(base + "/page?a=1&token=" + p.Token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/page?a=1" || len(cookies) != 1 || cookies[0].Value != p.Token || !cookies[0].HttpOnly {
		t.Fatalf("?token=: %d, Location %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), cookies)
	}

	get := func(withCookie bool) (int, seen) {
		req, _ := http.NewRequest("GET", base+"/?token=apps-own", nil)
		if withCookie {
			req.AddCookie(cookies[0])
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s seen
		json.NewDecoder(resp.Body).Decode(&s)
		return resp.StatusCode, s
	}
	if code, s := get(true); code != 200 || s.Query != "token=apps-own" || s.Cookie != "" {
		t.Errorf("the app's token with the cookie: %d, the session saw %+v", code, s)
	}
	if code, _ := get(false); code != http.StatusUnauthorized {
		t.Errorf("the app's token without the cookie: %d", code)
	}
}
