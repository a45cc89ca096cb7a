package server

import (
	"crypto/subtle"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/airlock/airlock/errdefs"
)

// TCP is how the engine answers on a TCP listener: the same API as on
// the unix socket, and the user interface for a browser, behind a token.
type TCP struct {
	// Assets is the built user interface (nil or !Built: a page saying
	// how to build it).
	Assets fs.FS
	Built  bool
	// Token must come with every request: once as ?token= on a page
	// (which sets a cookie), or as `Authorization: Bearer TOKEN`.
	Token string
	// Loopback: the listener is on a loopback address, so the Host header
	// must name one too (a web page elsewhere cannot rebind a name to it).
	Loopback bool
}

const tokenCookie = "airlock_token"

// TCPHandler serves the API and the user interface on a TCP listener.
func (s *Server) TCPHandler(t TCP) http.Handler {
	api := s.Handler()
	var files http.Handler
	if t.Built {
		files = http.FileServerFS(t.Assets)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t.Loopback && !loopbackHost(r.Host) {
			writeError(w, errdefs.Forbiddenf("this engine answers only to a loopback host name (127.0.0.1, localhost), not %q", r.Host))
			return
		}
		if q := r.URL.Query().Get("token"); q != "" && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/v1/") {
			if !same(q, t.Token) {
				writeError(w, errdefs.Forbiddenf("the token in the address is not this engine's: run `airlock ui` again for a fresh address"))
				return
			}
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: t.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, (&url.URL{Path: u.Path, RawQuery: u.RawQuery}).String(), http.StatusSeeOther)
			return
		}
		if !authorized(r, t.Token) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, errdefs.Forbiddenf("this engine needs its token: open the address `airlock ui` prints, or send `Authorization: Bearer TOKEN`"))
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			api.ServeHTTP(w, r)
			return
		}
		if files == nil {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
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
			w.Header().Set("Cache-Control", "no-store")
		}
		files.ServeHTTP(w, r)
	})
}

func authorized(r *http.Request, token string) bool {
	if c, err := r.Cookie(tokenCookie); err == nil && same(c.Value, token) {
		return true
	}
	if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && same(h, token) {
		return true
	}
	return false
}

func same(a, b string) bool {
	return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
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
