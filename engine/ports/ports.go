package ports

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// Sessions is the session core as forwards see it.
type Sessions interface {
	// Wake resumes the session if it is paused, counts it as used now
	// (the idle watcher leaves it running for its idle timeout), and
	// returns the path of its container's network namespace
	// (/proc/PID/ns/net). A session that does not exist is
	// errdefs.NotFound; one that cannot run now (stopped, over budget)
	// an error with its class and a sentence saying why.
	Wake(ctx context.Context, id string) (netns string, err error)
	// Proc returns the procfs directory (/proc/PID) of the session's
	// container's main process, without waking the session or counting
	// it as used (a paused session's kernel tables are read as they
	// are). A session that does not exist is errdefs.NotFound; one whose
	// container does not run (stopped), errdefs.Conflict.
	Proc(ctx context.Context, id string) (string, error)
}

// The auth modes of a forward: none ("") is plain TCP; the others are an
// HTTP front that checks the credentials before proxying.
const (
	// AuthBearer wants a token.
	AuthBearer = "bearer"
	// AuthBasic wants HTTP basic auth: a user name and a password.
	AuthBasic = "basic"
)

// basicUser is the user name of basic auth when none is given.
const basicUser = "airlock"

// Forwarder owns the forwards of one engine. Safe for concurrent use.
type Forwarder struct {
	sessions Sessions
	file     string
	log      *slog.Logger

	// dial connects to a port in a network namespace (dialIn; unit
	// tests dial a server of their own).
	dial func(ctx context.Context, netns string, port int) (net.Conn, error)

	mu  sync.Mutex
	fwd map[string]*forward // by key(session, port)
}

// New returns a forwarder that keeps its forwards in file ("" keeps
// none). Restore listens again on what the file holds.
func New(s Sessions, file string, log *slog.Logger) *Forwarder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Forwarder{sessions: s, file: file, log: log.With("component", "ports"), dial: dialIn, fwd: map[string]*forward{}}
}

func key(session string, port int) string { return session + "/" + strconv.Itoa(port) }

// Open forwards req.Port of session to the host and returns the
// forward. Asking again for a forward that exists with the same listen
// address (or none) and auth returns it; another one of the same port is
// a conflict.
func (f *Forwarder) Open(ctx context.Context, session string, req api.PortRequest) (api.Port, error) {
	if req.Port < 1 || req.Port > 65535 {
		return api.Port{}, errdefs.Invalidf("port %d: give the session's TCP port, 1-65535", req.Port)
	}
	if req.Auth != "" && req.Auth != AuthBearer && req.Auth != AuthBasic {
		return api.Port{}, errdefs.Invalidf("auth %q: the auth modes are none (leave it out), %q and %q", req.Auth, AuthBearer, AuthBasic)
	}
	if req.User != "" && req.Auth != AuthBasic {
		return api.Port{}, errdefs.Invalidf("a user name is for basic auth only: add `--auth basic`, or leave the user out")
	}
	if strings.ContainsAny(req.User, ":\x00\r\n") || len(req.User) > 64 {
		return api.Port{}, errdefs.Invalidf("user %q: give a name of at most 64 characters without a colon", req.User)
	}
	if req.Auth == AuthBasic && req.User == "" {
		req.User = basicUser
	}
	listen, err := listenAddr(req.Listen, req.Auth)
	if err != nil {
		return api.Port{}, err
	}
	if _, err := f.sessions.Wake(ctx, session); err != nil {
		return api.Port{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.fwd[key(session, req.Port)]; old != nil {
		if old.p.Auth == req.Auth && old.p.User == req.User && (req.Listen == "" || req.Listen == old.p.Listen) {
			return old.p, nil
		}
		return api.Port{}, errdefs.Conflictf("port %d of session %s is forwarded already, at %s: `airlock port rm %s %d` first", req.Port, session, old.p.URL, session, req.Port)
	}
	p := api.Port{Session: session, Port: req.Port, Listen: listen, Auth: req.Auth, User: req.User}
	if req.Auth != "" {
		p.Token = newToken()
	}
	fw, err := f.start(p)
	if err != nil {
		return api.Port{}, err
	}
	f.fwd[key(session, req.Port)] = fw
	f.saveLocked()
	f.log.Info("port forwarded", "session", session, "port", req.Port, "listen", fw.p.Listen, "auth", req.Auth)
	return fw.p, nil
}

// List returns a session's forwards, by port.
func (f *Forwarder) List(session string) []api.Port {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []api.Port{}
	for _, fw := range f.fwd {
		if fw.p.Session == session {
			out = append(out, fw.p)
		}
	}
	slices.SortFunc(out, func(a, b api.Port) int { return a.Port - b.Port })
	return out
}

// Close ends the forward of a session's port: its listener and every
// connection through it.
func (f *Forwarder) Close(session string, port int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fw := f.fwd[key(session, port)]
	if fw == nil {
		return errdefs.NotFoundf("port %d of session %s is not forwarded: `airlock port ls %s` lists what is", port, session, session)
	}
	delete(f.fwd, key(session, port))
	fw.stop()
	f.saveLocked()
	return nil
}

// Forget ends a removed session's forwards.
func (f *Forwarder) Forget(session string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, fw := range f.fwd {
		if fw.p.Session == session {
			delete(f.fwd, k)
			fw.stop()
			n++
		}
	}
	if n > 0 {
		f.saveLocked()
	}
}

// Stop ends every forward and keeps them in the file, for Restore in the
// next engine.
func (f *Forwarder) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fw := range f.fwd {
		fw.stop()
	}
	f.fwd = map[string]*forward{}
}

// Restore listens again on the forwards the file holds, of the sessions
// exists knows, at their addresses and with their tokens. A forward that
// cannot listen again (its port taken meanwhile) is dropped and logged.
func (f *Forwarder) Restore(exists func(session string) bool) {
	if f.file == "" {
		return
	}
	b, err := os.ReadFile(f.file)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			f.log.Warn("forwarded ports not read", "file", f.file, "err", err)
		}
		return
	}
	var saved []api.Port
	if err := json.Unmarshal(b, &saved); err != nil {
		f.log.Warn("forwarded ports not read", "file", f.file, "err", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range saved {
		if !exists(p.Session) {
			continue
		}
		fw, err := f.start(p)
		if err != nil {
			f.log.Warn("a forwarded port was not opened again", "session", p.Session, "port", p.Port, "listen", p.Listen, "err", err)
			continue
		}
		f.fwd[key(p.Session, p.Port)] = fw
	}
	f.saveLocked()
}

func (f *Forwarder) saveLocked() {
	if f.file == "" {
		return
	}
	list := []api.Port{}
	for _, fw := range f.fwd {
		list = append(list, fw.p)
	}
	b, _ := json.Marshal(list)
	if err := atomicfile.Write(f.file, b, 0o600); err != nil {
		f.log.Warn("forwarded ports not saved: they are not opened again after a restart", "file", f.file, "err", err)
	}
}

// listenAddr checks where a forward may listen: loopback, or anywhere
// with auth. "" is a free port of 127.0.0.1.
func listenAddr(listen, auth string) (string, error) {
	if listen == "" {
		return "127.0.0.1:0", nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", errdefs.Invalidf("listen address %q: give HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080 (PORT 0: a free one)", listen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", errdefs.Invalidf("listen address %q: the port must be a number, 0-65535", listen)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if host != "" && err != nil {
		return "", errdefs.Invalidf("listen address %q: give an IP address of this host (0.0.0.0 for every interface), not a name", listen)
	}
	if (host == "" || !ip.IsLoopback()) && auth == "" {
		return "", errdefs.Invalidf("listening on %s lets anyone who reaches this host into the session's port: add `--auth bearer` (a token is printed) or `--auth basic` (a password is printed), or listen on 127.0.0.1", listen)
	}
	return net.JoinHostPort(host, port), nil
}

func newToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// url is where a forward listening on addr is opened: for an address of
// every interface, the host's first global unicast IPv4 address.
func url(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String() + "/"
	}
	ip := ta.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
		if as, err := net.InterfaceAddrs(); err == nil {
			for _, a := range as {
				if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
					ip = n.IP
					break
				}
			}
		}
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port)) + "/"
}

// wakeEvery is how often traffic toward a session through an open
// connection counts as its use (and wakes it if it was paused meanwhile).
const wakeEvery = 10 * time.Second

func wakeErr(session string, err error) error {
	return fmt.Errorf("session %s: %w", session, err)
}
