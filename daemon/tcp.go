package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/server"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/frontend"
)

// minToken is the shortest token a token file may hold.
const minToken = 16

// tcpListener is the engine's optional TCP side: the API and the browser
// UI behind a token, opened at start (--listen) or by `airlock ui`.
type tcpListener struct {
	srv   *server.Server
	addr  string
	token string
	log   *slog.Logger
	rel   *releaser

	mu  sync.Mutex
	url string
	hs  *http.Server
}

// newTCPListener prepares the listener on addr ("": a loopback port
// chosen when it opens); nothing listens until start.
func newTCPListener(srv *server.Server, addr, token string, log *slog.Logger, rel *releaser) *tcpListener {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return &tcpListener{srv: srv, addr: addr, token: token, log: log, rel: rel}
}

// loadToken reads the TCP listener's token from path (surrounding space
// ignored), or makes a new random one when path is "".
func loadToken(path string) (string, error) {
	if path == "" {
		b := make([]byte, 24)
		rand.Read(b)
		return hex.EncodeToString(b), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", errdefs.Invalidf("token file: %v", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minToken {
		return "", errdefs.Invalidf("token file %s: the token must have at least %d characters", path, minToken)
	}
	return token, nil
}

// start opens the listener once and returns the UI's address with the
// token.
func (t *tcpListener) start() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.url != "" {
		return t.url, nil
	}
	l, err := net.Listen("tcp", t.addr)
	if err != nil {
		return "", errdefs.Unavailablef("listen on %s: %v", t.addr, err)
	}
	assets, built := frontend.Dist()
	host, port, _ := net.SplitHostPort(l.Addr().String())
	ip := net.ParseIP(host)
	loopback := ip != nil && ip.IsLoopback()
	if !loopback {
		t.log.Warn("the engine answers on a non-loopback address: anyone who can reach it and has the token controls its sessions", "addr", l.Addr())
	}
	t.hs = server.HTTPServer(t.rel.wrap(t.srv.TCPHandler(server.TCP{Assets: assets, Built: built, Token: t.token, Loopback: loopback})), t.log)
	go t.hs.Serve(l)
	if ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	t.url = fmt.Sprintf("http://%s/?token=%s", net.JoinHostPort(host, port), t.token)
	t.log.Info("engine answering on TCP", "addr", l.Addr(), "ui", built)
	return t.url, nil
}

func (t *tcpListener) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		t.hs.Shutdown(ctx)
	}
}

// shareSocket gives group read and write on the engine's socket, so that
// its members (the desktop app's user) can use the engine.
func shareSocket(path, group string) error {
	g, err := user.LookupGroup(group)
	if err != nil {
		return errdefs.Invalidf("socket group %q: %v: create it with `groupadd %s` (or `airlock install-service`)", group, err, group)
	}
	gid, _ := strconv.Atoi(g.Gid)
	if err := os.Chown(path, 0, gid); err != nil {
		return err
	}
	return os.Chmod(path, 0o660)
}
