package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
)

// upgradeScript answers an HTTP upgrade as a WebSocket server's handshake
// does, then echoes the bytes: busybox has no WebSocket server.
const upgradeScript = `#!/bin/sh
cr=$(printf '\r')
while IFS= read -r l; do
	l=${l%"$cr"}
	[ -z "$l" ] && break
done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'
exec cat
`

// startServers starts, in session id, busybox httpd on 8000 (a page), an
// echo on 7000 and the upgrade answerer on 7001, all in the background.
func startServers(t *testing.T, e *enginetest.Engine, id string) {
	t.Helper()
	if code, out := run(t, e, id, "sh", "-c", "mkdir -p /tmp/www && echo '"+strings.TrimSpace(page)+"' > /tmp/www/index.html && httpd -p 8000 -h /tmp/www"); code != 0 {
		t.Fatalf("httpd: %d %s", code, out)
	}
	script := "cat > /tmp/ws.sh <<'EOF'\n" + upgradeScript + "EOF\nchmod +x /tmp/ws.sh\n" +
		"(nc -ll -p 7000 -e cat >/dev/null 2>&1 &)\n(nc -ll -p 7001 -e /tmp/ws.sh >/dev/null 2>&1 &)\ntrue"
	if code, out := run(t, e, id, "sh", "-c", script); code != 0 {
		t.Fatalf("nc: %d %s", code, out)
	}
}

// get fetches url with c, retrying a refused or reset connection (a
// server started in the background may not listen yet); the deadline
// only bounds a hang.
func get(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || time.Now().After(deadline) {
				return resp.StatusCode, string(b)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("%s: %v", req.URL, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getURL(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	must(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return get(t, &http.Client{Timeout: time.Minute}, req) // the timeout bounds a hang only
}

// wantPage fails the test unless url (with the header pairs) answers
// the page startServers wrote; what names the way it was fetched.
func wantPage(t *testing.T, what, url string, header ...string) {
	t.Helper()
	if code, body := getURL(t, url, header...); code != 200 || body != page {
		t.Fatalf("%s: %d %q", what, code, body)
	}
}

// page is what httpd serves in the session.
const page = "hello from the session\n"

// echo dials addr and checks that lines come back, several each way on
// one connection (the plumbing a WebSocket needs), and that an end of
// stream from the client is passed on.
func echo(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		r := bufio.NewReader(c)
		fmt.Fprintf(c, "ping 0\n")
		line, err := r.ReadString('\n')
		if err != nil { // not listening yet in the session
			c.Close()
			if time.Now().After(deadline) {
				t.Fatalf("no echo from %s: %v", addr, err)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i := 1; line == fmt.Sprintf("ping %d\n", i-1) && i < 5; i++ {
			fmt.Fprintf(c, "ping %d\n", i)
			line, _ = r.ReadString('\n')
		}
		if line != "ping 4\n" {
			t.Fatalf("echo through the forward: %q", line)
		}
		c.(*net.TCPConn).CloseWrite()
		if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
			t.Fatalf("after the end of stream: %q %v", rest, err)
		}
		c.Close()
		return
	}
}

// hostPort is the host:port of a forward's URL.
func hostPort(p api.Port) string {
	return strings.TrimSuffix(strings.TrimPrefix(p.URL, "http://"), "/")
}

// A session's ports reach the host: an HTTP page and a TCP echo through
// plain forwards, a paused session woken by a request, port rm closing
// the listener and its connections, and removal of the session ending
// the rest.
func TestPorts(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	startServers(t, e, s.ID)

	web, err := e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8000})
	must(t, err)
	if !strings.HasPrefix(web.URL, "http://127.0.0.1:") || web.Token != "" {
		t.Fatalf("forward %+v", web)
	}
	wantPage(t, "the page through the forward", web.URL+"index.html")
	again, err := e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8000})
	if err != nil || again.URL != web.URL {
		t.Fatalf("the same forward asked again: %+v %v", again, err)
	}
	if _, err := e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8000, Auth: "bearer"}); !errdefs.IsConflict(err) {
		t.Fatalf("another forward of the same port: %v", err)
	}

	tcp, err := e.OpenPort(ctx, s.ID, api.PortRequest{Port: 7000})
	must(t, err)
	echo(t, hostPort(tcp))

	// A paused session is woken by a request.
	must(t, e.Pause(ctx, s.ID))
	wantPage(t, "the page of a paused session", web.URL+"index.html")
	if st := state(t, e, s.ID); st != api.StateRunning {
		t.Fatalf("a request left the session %s", st)
	}

	list, err := e.Ports(ctx, s.ID)
	if err != nil || len(list) != 2 || list[0].Port != 7000 || list[1].Port != 8000 {
		t.Fatalf("ports: %+v %v", list, err)
	}

	// port rm closes the listener and the connections through it.
	open, err := net.Dial("tcp", hostPort(tcp))
	must(t, err)
	defer open.Close()
	fmt.Fprintf(open, "still here\n")
	if line, err := bufio.NewReader(open).ReadString('\n'); err != nil || line != "still here\n" {
		t.Fatalf("echo: %q %v", line, err)
	}
	must(t, e.ClosePort(ctx, s.ID, 7000))
	if _, err := net.Dial("tcp", hostPort(tcp)); err == nil {
		t.Fatalf("the forward still listens after port rm")
	}
	open.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a hang only
	if n, err := open.Read(make([]byte, 10)); err == nil {
		t.Fatalf("a connection outlived port rm: read %d bytes", n)
	}
	if err := e.ClosePort(ctx, s.ID, 7000); !errdefs.IsNotFound(err) {
		t.Fatalf("port rm twice: %v", err)
	}

	// Removing the session ends its forwards.
	must(t, e.Remove(ctx, s.ID))
	if _, err := net.Dial("tcp", hostPort(web)); err == nil {
		t.Fatalf("the forward still listens after the session was removed")
	}
}

// A forward with bearer auth: refused without the token, passed with the
// header or the cookie ?token= sets, an HTTP upgrade carried through
// with the bytes after it, and listening beyond loopback without auth
// refused with a sentence saying how; one with basic auth on every
// interface, passed with the user name and password.
func TestPortAuth(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	startServers(t, e, s.ID)

	_, err = e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8000, Listen: "0.0.0.0:0"})
	if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "--auth bearer") {
		t.Fatalf("listening on every interface without auth: %v", err)
	}

	p, err := e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8000, Auth: "bearer"})
	must(t, err)
	if len(p.Token) < 32 {
		t.Fatalf("token %q", p.Token)
	}
	if code, body := getURL(t, p.URL+"index.html"); code != 401 || !strings.Contains(body, "?token=") {
		t.Fatalf("without the token: %d %q", code, body)
	}
	if code, _ := getURL(t, p.URL+"index.html", "Authorization", "Bearer "+strings.Repeat("0", len(p.Token))); code != 401 {
		t.Fatalf("with a wrong token: %d", code)
	}
	wantPage(t, "with the token", p.URL+"index.html", "Authorization", "Bearer "+p.Token)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: time.Minute}
	req, _ := http.NewRequest("GET", p.URL+"index.html?token="+p.Token, nil)
	if code, body := get(t, browser, req); code != 200 || body != page {
		t.Fatalf("?token= then its cookie: %d %q", code, body)
	}
	req, _ = http.NewRequest("GET", p.URL+"index.html", nil)
	if code, _ := get(t, browser, req); code != 200 {
		t.Fatalf("the cookie alone: %d", code)
	}

	// Basic auth: the browser's user name and password.
	b, err := e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8000, Auth: "basic", Listen: "0.0.0.0:0"})
	if !errdefs.IsConflict(err) {
		t.Fatalf("basic auth on a port forwarded with bearer: %+v %v", b, err)
	}
	must(t, e.ClosePort(ctx, s.ID, 8000))
	b, err = e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8000, Auth: "basic", Listen: "0.0.0.0:0"})
	must(t, err)
	if code, _ := getURL(t, b.URL+"index.html"); code != 401 {
		t.Fatalf("basic auth, none given: %d", code)
	}
	req, _ = http.NewRequest("GET", b.URL+"index.html", nil)
	req.SetBasicAuth("airlock", b.Token)
	if code, body := get(t, &http.Client{Timeout: time.Minute}, req); code != 200 || body != page {
		t.Fatalf("basic auth: %d %q", code, body)
	}

	ws, err := e.OpenPort(ctx, s.ID, api.PortRequest{Port: 7001, Auth: "bearer"})
	must(t, err)
	if code := upgrade(t, hostPort(ws), ""); code != 401 {
		t.Fatalf("an upgrade without the token: %d", code)
	}
	if code := upgrade(t, hostPort(ws), ws.Token); code != 101 {
		t.Fatalf("an upgrade with the token: %d", code)
	}
}

// upgrade asks addr for a WebSocket upgrade; once switched, it checks
// that bytes go both ways, several times. It returns the status.
func upgrade(t *testing.T, addr, token string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		defer c.Close()
		fmt.Fprintf(c, "GET /hmr HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", addr)
		if token != "" {
			fmt.Fprintf(c, "Authorization: Bearer %s\r\n", token)
		}
		fmt.Fprintf(c, "\r\n")
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		must(t, err)
		if resp.StatusCode == http.StatusBadGateway && time.Now().Before(deadline) { // not listening yet
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			return resp.StatusCode
		}
		for i := 0; i < 3; i++ {
			fmt.Fprintf(c, "frame %d\n", i)
			if line, err := r.ReadString('\n'); err != nil || line != fmt.Sprintf("frame %d\n", i) {
				t.Fatalf("after the upgrade: %q %v", line, err)
			}
		}
		return resp.StatusCode
	}
}

// Forwards are listened on again by an engine started over the same
// state, at the same address and with the same token.
func TestPortsAfterRestart(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	startServers(t, e, s.ID)
	p, err := e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8000, Auth: "bearer"})
	must(t, err)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	e.Close(cctx)
	cancel()
	e2 := enginetest.Reopen(t, e.Docker, e.StateDir)
	defer enginetest.RemoveAll(t, e2)
	list, err := e2.Ports(ctx, s.ID)
	if err != nil || len(list) != 1 || list[0] != p {
		t.Fatalf("after a restart: %+v %v, want %+v", list, err, p)
	}
	wantPage(t, "the page after a restart", p.URL+"index.html", "Authorization", "Bearer "+p.Token)
}

// The ports a session listens on are detected, with the address they are
// bound to, until forwarded; listing them leaves a paused session paused.
func TestListeningPorts(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	if code, out := run(t, e, s.ID, "sh", "-c", "(nc -l -p 8123 </dev/null >/dev/null 2>&1 &)\nhttpd -p 127.0.0.1:8124 -h /tmp"); code != 0 {
		t.Fatalf("nc: %d %s", code, out)
	}
	find := func(port int) *api.ListeningPort {
		list, err := e.ListeningPorts(ctx, s.ID)
		must(t, err)
		for i := range list {
			if list[i].Port == port {
				return &list[i]
			}
		}
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	start := time.Now()
	for find(8123) == nil || find(8124) == nil {
		if time.Now().After(deadline) {
			list, err := e.ListeningPorts(ctx, s.ID)
			t.Fatalf("nc on 8123 and httpd on 127.0.0.1:8124 not detected: %+v %v", list, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("detected after %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	for i := 0; i < 100; i++ {
		find(8123)
	}
	t.Logf("a listing: %s", time.Since(start)/100)
	if l := find(8124); len(l.Addresses) != 1 || l.Addresses[0] != "127.0.0.1" {
		t.Errorf("8124 bound to 127.0.0.1: %+v", l)
	}

	_, err = e.OpenPort(ctx, s.ID, api.PortRequest{Port: 8123})
	must(t, err)
	if l := find(8123); l != nil {
		t.Errorf("a forwarded port is listed as not forwarded: %+v", l)
	}

	must(t, e.Pause(ctx, s.ID))
	if find(8124) == nil {
		t.Errorf("the paused session's port is not listed")
	}
	if st := state(t, e, s.ID); st != api.StatePaused {
		t.Fatalf("listing the ports left the session %s", st)
	}
}
