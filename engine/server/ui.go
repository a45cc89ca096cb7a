package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// TCP is how the engine answers on a TCP listener: the same API as on
// the unix socket, the user interface for a browser, and /metrics and
// /debug/pprof/ for operators (metrics.go), all behind a token.
//
// A browser holds the token as a cookie bound to the listener. Since a
// browser sends cookies to every port of a host and lets any page post a
// form anywhere, a request that changes something (any method but GET,
// HEAD and OPTIONS, and a WebSocket) with the cookie must also come from
// one of this listener's own pages (its Origin), and a body must say it
// is what its route takes (JSON, or a tar for an import): neither is
// something a page elsewhere can send without the browser asking first.
// With the token in `Authorization: Bearer`, which a page elsewhere cannot
// set, the Origin is not needed.
type TCP struct {
	// Assets is the built user interface (nil or !Built: a page saying
	// how to build it).
	Assets fs.FS
	Built  bool
	// Token must come with every request: once as ?token= on a page
	// (which sets the cookie), or as `Authorization: Bearer TOKEN`.
	Token string
	// Loopback: the listener is on a loopback address, so the Host header
	// must name one too (a web page elsewhere cannot rebind a name to it).
	Loopback bool
}

// TCPHandler serves the API and the user interface on a TCP listener.
func (s *Server) TCPHandler(t TCP) http.Handler {
	api := s.routes()
	ops := s.opsHandler()
	var files http.Handler
	if t.Built {
		files = http.FileServerFS(t.Assets)
	}
	return s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// No address of the interface leaves it as a Referer, no other
		// site frames it, and no other site's page reads an answer of
		// this listener as a script, style or image.
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if t.Loopback && !loopbackHost(r.Host) {
			writeError(w, errdefs.Forbiddenf("this engine answers only to a loopback host name (127.0.0.1, localhost), not %q", r.Host))
			return
		}
		cookie := listenerCookie(r, t.Token)
		if q := r.URL.Query().Get("token"); q != "" && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/v1/") {
			h.Set("Cache-Control", "no-store")
			if !same(q, t.Token) {
				writeError(w, errdefs.Forbiddenf("the token in the address is not this engine's: run `airlock ui` again for a fresh address"))
				return
			}
			cookie.Secure = r.TLS != nil
			http.SetCookie(w, cookie)
			// The token leaves the address bar (and the history) at once.
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, (&url.URL{Path: u.Path, RawQuery: u.RawQuery}).String(), http.StatusSeeOther)
			return
		}
		bearer := hasBearer(r, t.Token)
		if !bearer && !hasCookie(r, cookie) {
			h.Set("WWW-Authenticate", "Bearer")
			writeError(w, errdefs.Forbiddenf("this engine needs its token: open the address `airlock ui` prints, or send `Authorization: Bearer TOKEN`"))
			return
		}
		if changes(r) {
			if !bearer {
				if err := fromOwnPage(r); err != nil {
					writeError(w, err)
					return
				}
			}
			if err := bodyType(r); err != nil {
				writeError(w, err)
				return
			}
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			api.ServeHTTP(w, r)
			return
		}
		if opsPath(r.URL.Path) {
			ops.ServeHTTP(w, r)
			return
		}
		if files == nil {
			h.Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("<!doctype html><title>Airlock</title><p>This airlock binary was built without its user interface. Build it with <code>make build</code> (it runs npm in frontend/), then run <code>airlock ui</code> again.</p>"))
			return
		}
		// A path that is not a file is a view of the app.
		if p := strings.TrimPrefix(r.URL.Path, "/"); p != "" {
			if _, err := fs.Stat(t.Assets, p); err != nil {
				r2 := r.Clone(r.Context())
				r2.URL.Path = "/"
				files.ServeHTTP(w, r2)
				return
			}
		}
		if r.URL.Path == "/" || r.URL.Path == "/index.html" {
			h.Set("Cache-Control", "no-store")
		}
		files.ServeHTTP(w, r)
	}))
}

// listenerCookie is the cookie that carries the token for the listener r
// came in on: named for its port, HttpOnly, SameSite=Strict, for every
// path. Its value is derived from the token and the port, so that what a
// browser sends to another port of this host (cookies do not keep to
// ports) is neither the token nor anything another listener takes.
func listenerCookie(r *http.Request, token string) *http.Cookie {
	port := "0"
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			port = p
		}
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("airlock ui cookie for port " + port))
	return &http.Cookie{Name: "airlock_token_" + port, Value: hex.EncodeToString(m.Sum(nil)),
		Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

func hasCookie(r *http.Request, want *http.Cookie) bool {
	for _, c := range r.CookiesNamed(want.Name) {
		if same(c.Value, want.Value) {
			return true
		}
	}
	return false
}

func hasBearer(r *http.Request, token string) bool {
	h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && same(h, token)
}

// same compares a secret in constant time, its length included.
func same(got, want string) bool {
	if want == "" {
		return false
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// changes reports whether r may change something: any method but GET,
// HEAD and OPTIONS, and a WebSocket (a terminal is a shell).
func changes(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return r.Header.Get("Upgrade") != ""
	}
	return true
}

// fromOwnPage checks that r comes from a page of this listener: its
// Origin is the listener's scheme, host and port. A browser sends the
// Origin with every such request, and cannot be made to send another.
func fromOwnPage(r *http.Request) error {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	want := scheme + "://" + r.Host
	o := r.Header.Get("Origin")
	if o != "" && strings.EqualFold(o, want) {
		return nil
	}
	from := "with no Origin"
	if o != "" {
		from = "from " + o
	}
	return errdefs.Forbiddenf("refused %s %s %s: with the browser's cookie this engine takes changes only from its own pages (%s). Use the interface at the address `airlock ui` prints; a script sends `Authorization: Bearer TOKEN` instead",
		r.Method, r.URL.Path, from, want)
}

// bodyType checks that r's body, if any, is what its route takes: JSON,
// or a tar for an import. A page elsewhere can post a form (text/plain,
// urlencoded, multipart) without the browser asking first, never JSON.
func bodyType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	want, also := "application/json", ""
	if r.Method == http.MethodPost && r.URL.Path == "/"+api.Version+"/snapshots/import" {
		want, also = "application/x-tar", "application/octet-stream"
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && (mt == want || mt == also) {
		return nil
	}
	got := "none"
	if ct != "" {
		got = ct
	}
	return errdefs.Invalidf("%s %s takes `Content-Type: %s` (this request's is %s): send the body as that", r.Method, r.URL.Path, want, got)
}

func loopbackHost(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}
