package ports

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// forward is one listening forward.
type forward struct {
	p        api.Port
	f        *Forwarder
	ln       net.Listener
	ctx      context.Context // ends with the forward
	cancel   context.CancelFunc
	mu       sync.Mutex
	conns    map[net.Conn]struct{} // open connections, both ends
	stopOnce sync.Once
	http     *http.Server
}

// start listens at p.Listen and serves the forward; p comes back with
// the address bound and the URL.
func (f *Forwarder) start(p api.Port) (*forward, error) {
	ln, err := net.Listen("tcp", p.Listen)
	if err != nil {
		return nil, errdefs.Conflictf("listen on %s: %v: choose another address with --listen", p.Listen, err)
	}
	p.Listen, p.URL = ln.Addr().String(), url(ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	fw := &forward{p: p, f: f, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	if p.Auth != "" {
		fw.http = &http.Server{Handler: fw.front(), ReadHeaderTimeout: 30 * time.Second,
			ConnState: func(c net.Conn, s http.ConnState) {
				switch s {
				case http.StateNew:
					fw.track(c)
				case http.StateClosed, http.StateHijacked:
					fw.untrack(c)
				}
			}}
		go fw.http.Serve(ln)
	} else {
		go fw.serveTCP()
	}
	return fw, nil
}

// stop closes the listener and every connection through the forward.
func (fw *forward) stop() {
	fw.stopOnce.Do(func() {
		fw.cancel()
		fw.ln.Close()
		if fw.http != nil {
			fw.http.Close()
		}
		fw.mu.Lock()
		for c := range fw.conns {
			c.Close()
		}
		fw.mu.Unlock()
	})
}

// track keeps c to be closed by stop; false if the forward stopped.
func (fw *forward) track(c net.Conn) bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.ctx.Err() != nil {
		c.Close()
		return false
	}
	fw.conns[c] = struct{}{}
	return true
}

func (fw *forward) untrack(c net.Conn) {
	fw.mu.Lock()
	delete(fw.conns, c)
	fw.mu.Unlock()
}

// dial wakes the session and connects to its port, the connection
// counting as the session's use whenever bytes go toward it.
func (fw *forward) dial(ctx context.Context) (net.Conn, error) {
	ns, err := fw.f.sessions.Wake(ctx, fw.p.Session)
	if err != nil {
		return nil, wakeErr(fw.p.Session, err)
	}
	c, err := fw.f.dial(ctx, ns, fw.p.Port)
	if err != nil {
		return nil, err
	}
	if !fw.track(c) {
		return nil, errors.New("the forward was removed")
	}
	sc := &sessionConn{Conn: c, fw: fw}
	sc.lastWake.Store(time.Now().UnixNano()) // woken just now
	return sc, nil
}

// sessionConn is a connection to the session's port: writes toward the
// session count as its use, at most every wakeEvery (waking it if it was
// paused meanwhile, before the bytes are written).
type sessionConn struct {
	net.Conn
	fw       *forward
	lastWake atomic.Int64
	closed   sync.Once
}

func (c *sessionConn) Write(b []byte) (int, error) {
	now := time.Now().UnixNano()
	if last := c.lastWake.Load(); now-last > int64(wakeEvery) && c.lastWake.CompareAndSwap(last, now) {
		ctx, cancel := context.WithTimeout(c.fw.ctx, time.Minute)
		c.fw.f.sessions.Wake(ctx, c.fw.p.Session)
		cancel()
	}
	return c.Conn.Write(b)
}

func (c *sessionConn) Close() error {
	c.closed.Do(func() { c.fw.untrack(c.Conn) })
	return c.Conn.Close()
}

// serveTCP forwards each connection as bytes, both ways.
func (fw *forward) serveTCP() {
	for {
		c, err := fw.ln.Accept()
		if err != nil {
			if fw.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			fw.f.log.Warn("forwarded port stopped accepting", "session", fw.p.Session, "port", fw.p.Port, "err", err)
			return
		}
		if !fw.track(c) {
			return
		}
		go fw.pipe(c)
	}
}

func (fw *forward) pipe(c net.Conn) {
	defer func() { fw.untrack(c); c.Close() }()
	s, err := fw.dial(fw.ctx)
	if err != nil {
		fw.f.log.Info("a forwarded connection was refused", "session", fw.p.Session, "port", fw.p.Port, "err", err)
		if errdefs.IsNotFound(err) {
			fw.f.Close(fw.p.Session, fw.p.Port) // the session is gone
		}
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(s, c); closeWrite(s); done <- struct{}{} }()
	go func() { io.Copy(c, s); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

// closeWrite passes an end of stream on, keeping the other direction
// open (a client that shuts its sending side still reads the answer).
func closeWrite(c net.Conn) {
	if sc, ok := c.(*sessionConn); ok {
		c = sc.Conn
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
		return
	}
	c.Close()
}

// cookieName is the token's cookie, named for the listener's port
// (browsers send a host's cookies to all its ports).
func (fw *forward) cookieName() string {
	_, port, _ := net.SplitHostPort(fw.p.Listen)
	return "airlock_port_" + port
}

// front is the HTTP front of a forward with auth: the token (or the
// basic auth user and password) is checked in constant time, then the
// request (a WebSocket upgrade too) goes to the session's port without
// the credentials.
func (fw *forward) front() http.Handler {
	target := &neturl.URL{Scheme: "http", Host: "session:" + strconv.Itoa(fw.p.Port)}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			r.Out.Header.Del("Authorization")
			fw.dropCookie(r.Out)
		},
		Transport: &http.Transport{
			DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return fw.dial(ctx) },
			DisableKeepAlives: true, // every request dials, so every request wakes the session
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "airlock: port "+strconv.Itoa(fw.p.Port)+" of session "+fw.p.Session+" did not answer: "+err.Error(), http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ?token= with the forward's token sets the cookie; another one is
		// the app's own (Vite's hot reload WebSocket has one) and passes
		// on an authorized request.
		if t := r.URL.Query().Get("token"); t != "" && fw.p.Auth == AuthBearer && fw.tokenOK(t) {
			http.SetCookie(w, &http.Cookie{Name: fw.cookieName(), Value: fw.p.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if !fw.authorized(r) {
			fw.refuse(w)
			return
		}
		proxy.ServeHTTP(w, r)
	})
}

// refuse answers a request without the right credentials, saying what
// the forward wants.
func (fw *forward) refuse(w http.ResponseWriter) {
	if fw.p.Auth == AuthBasic {
		w.Header().Set("WWW-Authenticate", `Basic realm="airlock", charset="UTF-8"`)
		http.Error(w, "airlock: this port wants a user name and password (HTTP basic auth; `airlock port ls "+fw.p.Session+"` shows them)", http.StatusUnauthorized)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
	http.Error(w, "airlock: this port wants a token: send Authorization: Bearer TOKEN, or open the URL once with ?token=TOKEN (`airlock port ls "+fw.p.Session+"` shows it)", http.StatusUnauthorized)
}

func (fw *forward) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(fw.p.Token)) == 1
}

func (fw *forward) authorized(r *http.Request) bool {
	if fw.p.Auth == AuthBasic {
		user, pass, ok := r.BasicAuth()
		// Both compared, whichever is wrong: the time tells neither.
		u := subtle.ConstantTimeCompare([]byte(user), []byte(fw.p.User))
		return ok && u&subtle.ConstantTimeCompare([]byte(pass), []byte(fw.p.Token)) == 1
	}
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return fw.tokenOK(h[7:])
	}
	if c, err := r.Cookie(fw.cookieName()); err == nil {
		return fw.tokenOK(c.Value)
	}
	return false
}

// dropCookie removes the token's cookie from a request bound for the
// session: the session never sees the token.
func (fw *forward) dropCookie(r *http.Request) {
	cs := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cs {
		if c.Name != fw.cookieName() {
			r.AddCookie(c)
		}
	}
}
