package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// login exchanges the token for the listener's cookie, as the address
// `airlock ui` prints does, and returns the cookie as a header line.
func login(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	a := call(t, ts, "GET", "/?token="+testToken, "")
	c := cookieOf(t, a)
	return "Cookie: " + c.Name + "=" + c.Value
}

func cookieOf(t *testing.T, a answer) *http.Cookie {
	t.Helper()
	cs := (&http.Response{Header: a.header}).Cookies()
	if len(cs) != 1 {
		t.Fatalf("the token exchange set %d cookies (%d %q)", len(cs), a.status, a.body)
	}
	return cs[0]
}

func TestTokenExchange(t *testing.T) {
	s, _ := newServer(quiet{})
	ts := tcpServer(t, s)
	port := portOf(ts)

	a := call(t, ts, "GET", "/sessions/abc?token="+testToken+"&tab=diff", "")
	if a.status != http.StatusSeeOther {
		t.Fatalf("the token exchange answered %d: %s", a.status, a.body)
	}
	if loc := a.header.Get("Location"); loc != "/sessions/abc?tab=diff" {
		t.Errorf("the exchange redirects to %q: want the same page without the token", loc)
	}
	c := cookieOf(t, a)
	if c.Name != "airlock_token_"+port {
		t.Errorf("the cookie is named %q: want it bound to the listener's port (airlock_token_%s)", c.Name, port)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Errorf("the cookie is %s: want HttpOnly, SameSite=Strict, Path=/", c)
	}
	if strings.Contains(c.Value, testToken) {
		t.Error("the cookie carries the token itself: a server on another port that receives it would hold the engine's token")
	}
	for _, h := range []struct{ name, want string }{{"Referrer-Policy", "no-referrer"}, {"Cache-Control", "no-store"}} {
		if got := a.header.Get(h.name); got != h.want {
			t.Errorf("the exchange's %s is %q, want %q", h.name, got, h.want)
		}
	}

	cookie := "Cookie: " + c.Name + "=" + c.Value
	page := call(t, ts, "GET", "/sessions/abc", "", cookie)
	if page.status != 200 || !strings.Contains(page.body, "<title>Airlock") {
		t.Fatalf("the page with the cookie: %d %q", page.status, page.body)
	}
	for _, h := range []struct{ name, want string }{
		{"Referrer-Policy", "no-referrer"},
		{"X-Frame-Options", "DENY"},
		{"Content-Security-Policy", "frame-ancestors 'none'"},
		{"X-Content-Type-Options", "nosniff"},
	} {
		if got := page.header.Get(h.name); got != h.want {
			t.Errorf("the page's %s is %q, want %q", h.name, got, h.want)
		}
	}

	if a := call(t, ts, "GET", "/?token=not-the-token", ""); a.status != 403 || a.err.Class != "forbidden" || len(a.header["Set-Cookie"]) != 0 {
		t.Errorf("a wrong token: %d %+v", a.status, a.err)
	}
}

func TestCookieBoundToListener(t *testing.T) {
	s, _ := newServer(quiet{})
	ts := tcpServer(t, s)
	other := tcpServer(t, s) // the same engine on a second port
	port, otherPort := portOf(ts), portOf(other)

	mine := cookieOf(t, call(t, ts, "GET", "/?token="+testToken, ""))
	theirs := cookieOf(t, call(t, other, "GET", "/?token="+testToken, ""))
	for _, tc := range []struct {
		name   string
		cookie string
		want   int
	}{
		{"this listener's cookie", mine.Name + "=" + mine.Value, 200},
		{"another port's cookie", theirs.Name + "=" + theirs.Value, 403},
		{"another port's value under this port's name", "airlock_token_" + port + "=" + theirs.Value, 403},
		{"this value under another port's name", "airlock_token_" + otherPort + "=" + mine.Value, 403},
		{"the token as a cookie of no port", "airlock_token=" + testToken, 403},
		{"the token itself under this port's name", "airlock_token_" + port + "=" + testToken, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, ts, "GET", "/v1/version", "", "Cookie: "+tc.cookie)
			if a.status != tc.want {
				t.Errorf("GET /v1/version with %s: %d %+v, want %d", tc.cookie, a.status, a.err, tc.want)
			}
			if tc.want == 403 && (a.err.Class != "forbidden" || !strings.Contains(a.err.Message, "airlock ui")) {
				t.Errorf("the refusal says %+v: want forbidden, with what to do", a.err)
			}
		})
	}
}

// wsUpgrade are the headers of a browser's WebSocket handshake.
var wsUpgrade = []string{"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="}

func TestCrossSiteRequestsRefused(t *testing.T) {
	s, _ := newServer(quiet{})
	ts := tcpServer(t, s)
	port := portOf(ts)
	self := "Origin: " + ts.URL
	cookie := login(t, ts)
	bearer := "Authorization: Bearer " + testToken
	jsonCT := "Content-Type: application/json"

	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		headers      []string
		want         int
		class, says  string
	}{
		// What a page on another site (or another port of this host) can make a browser send.
		{"a form post from another site", "POST", "/v1/sessions", `{"project":"/"}=`,
			[]string{cookie, "Origin: http://evil.example", "Content-Type: text/plain"}, 403, "forbidden", "Authorization: Bearer"},
		{"a form post with no Origin", "POST", "/v1/sessions", `{"project":"/"}=`,
			[]string{cookie, "Content-Type: text/plain"}, 403, "forbidden", "airlock ui"},
		{"a post from a sandboxed frame (Origin null)", "POST", "/v1/sessions", `{"project":"/"}`,
			[]string{cookie, "Origin: null", jsonCT}, 403, "forbidden", "airlock ui"},
		{"a post from another port of this host", "POST", "/v1/sessions", `{"project":"/"}`,
			[]string{cookie, "Origin: http://127.0.0.1:" + strconv.Itoa(atoi(port)+1), jsonCT}, 403, "forbidden", "airlock ui"},
		{"a post from another scheme", "POST", "/v1/sessions", `{"project":"/"}`,
			[]string{cookie, "Origin: https://" + strings.TrimPrefix(ts.URL, "http://"), jsonCT}, 403, "forbidden", "airlock ui"},
		{"a delete from another site", "DELETE", "/v1/secrets/OPENAI_API_KEY", "",
			[]string{cookie, "Origin: http://evil.example"}, 403, "forbidden", "airlock ui"},
		{"a put from another site", "PUT", "/v1/settings", `{"image":"evil"}`,
			[]string{cookie, "Origin: http://evil.example", jsonCT}, 403, "forbidden", "airlock ui"},
		{"a post with no body from another site", "POST", "/v1/ui", "",
			[]string{cookie, "Origin: http://evil.example"}, 403, "forbidden", "airlock ui"},
		{"a terminal from another site", "GET", "/v1/sessions/abc/terminal", "",
			append([]string{cookie, "Origin: http://evil.example"}, wsUpgrade...), 403, "forbidden", "airlock ui"},
		{"a terminal from another port of this host", "GET", "/v1/sessions/abc/terminal", "",
			append([]string{cookie, "Origin: http://localhost:" + port}, wsUpgrade...), 403, "forbidden", "airlock ui"},
		{"a terminal with the cookie and no Origin", "GET", "/v1/sessions/abc/terminal", "",
			append([]string{cookie}, wsUpgrade...), 403, "forbidden", "airlock ui"},

		// The body must say it is JSON.
		{"this page's post as text/plain", "POST", "/v1/sessions", `{"project":"/"}`,
			[]string{cookie, self, "Content-Type: text/plain"}, 400, "invalid", "application/json"},
		{"this page's post as a form", "POST", "/v1/sessions", `project=/`,
			[]string{cookie, self, "Content-Type: application/x-www-form-urlencoded"}, 400, "invalid", "application/json"},
		{"this page's post with no content type", "POST", "/v1/sessions", `{"project":"/"}`,
			[]string{cookie, self}, 400, "invalid", "application/json"},
		{"the bearer with text/plain", "PUT", "/v1/secrets/K", `{"value":"v"}`,
			[]string{bearer, "Content-Type: text/plain"}, 400, "invalid", "application/json"},
		{"an import as text/plain", "POST", "/v1/snapshots/import", "not a tar",
			[]string{bearer, "Content-Type: text/plain"}, 400, "invalid", "application/x-tar"},

		// What the interface and clients send.
		{"this page's post", "POST", "/v1/sessions", `{"project":"/"}`,
			[]string{cookie, self, jsonCT}, 404, "not_found", "no project here"},
		{"this page's post, with a charset", "PUT", "/v1/secrets/K", `{"value":"v"}`,
			[]string{cookie, self, "Content-Type: application/json; charset=utf-8"}, 204, "", ""},
		{"this page's delete", "DELETE", "/v1/secrets/K", "", []string{cookie, self}, 204, "", ""},
		{"this page's post with no body", "POST", "/v1/ui", "", []string{cookie, self}, 200, "", ""},
		{"this page's read, no Origin", "GET", "/v1/version", "", []string{cookie}, 200, "", ""},
		{"this page's bad JSON", "POST", "/v1/sessions", `{"project":`,
			[]string{cookie, self, jsonCT}, 400, "invalid", "bad request body"},
		{"the bearer, no Origin", "POST", "/v1/ui", "", []string{bearer}, 200, "", ""},
		{"the bearer with JSON", "PUT", "/v1/secrets/K", `{"value":"v"}`, []string{bearer, jsonCT}, 204, "", ""},
		{"an import", "POST", "/v1/snapshots/import", "a tar", []string{bearer, "Content-Type: application/x-tar"}, 201, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, ts, tc.method, tc.path, tc.body, tc.headers...)
			if a.status != tc.want {
				t.Fatalf("%s %s answered %d %q, want %d", tc.method, tc.path, a.status, a.body, tc.want)
			}
			if tc.class != "" && (a.err.Class != tc.class || !strings.Contains(a.err.Message, tc.says)) {
				t.Errorf("the error is %+v: want class %s saying %q", a.err, tc.class, tc.says)
			}
		})
	}

	// The terminal of this listener's own page upgrades.
	a := call(t, ts, "GET", "/v1/sessions/abc/terminal", "", append([]string{cookie, self}, wsUpgrade...)...)
	if a.status != http.StatusSwitchingProtocols {
		t.Errorf("this page's terminal: %d %q", a.status, a.body)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestHostCheckEveryRoute: a page that rebinds its own name to 127.0.0.1
// reaches no route, the token exchange and the terminal included, even
// with the token.
func TestHostCheckEveryRoute(t *testing.T) {
	s, _ := newServer(quiet{})
	ts := tcpServer(t, s)
	port := portOf(ts)
	for _, r := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/?token=" + testToken}, {"GET", "/assets/index.js"}, {"GET", "/sessions/abc"},
		{"GET", "/v1/version"}, {"GET", "/v1/sessions"}, {"POST", "/v1/sessions"}, {"DELETE", "/v1/sessions/abc"},
		{"POST", "/v1/sessions/abc/accept"}, {"POST", "/v1/sessions/abc/exec"}, {"POST", "/v1/run"},
		{"GET", "/v1/sessions/abc/terminal"}, {"PUT", "/v1/settings"}, {"PUT", "/v1/secrets/K"},
		{"POST", "/v1/snapshots/import"}, {"GET", "/v1/snapshots/x/export"}, {"POST", "/v1/ui"}, {"GET", "/v1/nowhere"},
	} {
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port} {
			h := append([]string{"Host: " + host, "Authorization: Bearer " + testToken, "Origin: http://" + host, "Content-Type: application/json"}, wsUpgrade...)
			a := call(t, ts, r.method, r.path, "", h...)
			if a.status != 403 || a.err.Class != "forbidden" || !strings.Contains(a.err.Message, "loopback") {
				t.Errorf("%s %s with Host %s: %d %q", r.method, r.path, host, a.status, a.body)
			}
		}
	}
}

// TestTokenNeverLogged: neither the token nor the cookie reaches the
// engine's log, whatever a request does.
func TestTokenNeverLogged(t *testing.T) {
	s, logs := newServer(panicky{})
	ts := tcpServer(t, s)
	cookie := login(t, ts)
	call(t, ts, "GET", "/?token=wrong-"+testToken, "")
	call(t, ts, "GET", "/v1/sessions?token="+testToken, "", cookie)
	call(t, ts, "GET", "/v1/sessions", "", "Authorization: Bearer "+testToken)
	value := strings.SplitN(cookie, "=", 2)[1]
	if l := logs.String(); strings.Contains(l, testToken) || strings.Contains(l, value) {
		t.Errorf("the log holds the token or the cookie:\n%s", l)
	}
	if !strings.Contains(logs.String(), "panic") {
		t.Errorf("the panics were not logged:\n%s", logs.String())
	}
}
