package egress

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// maxHello bounds what is read of a connection before its ClientHello is
// whole: crypto/tls's own limit on a handshake message (64 KiB), plus the
// record headers of a message split over many records.
const maxHello = 64<<10 + 4<<10

// helloTimeout is how long a client has to send its whole ClientHello. A
// package manager on a loaded machine opens its tunnels well before it
// gets to each handshake: `npm install` of a real project lost two thirds of
// its tunnels (1,032 of 1,591) to a 10 s limit on a 2-core machine at load 16.
const helloTimeout = 60 * time.Second

// extECH is the Encrypted Client Hello extension: the server name the
// client really wants travels encrypted inside it.
const extECH = 0xfe0d

// hello is what a ClientHello says that the proxy checks.
type hello struct {
	ServerName string // "" when the client sent none
	ECH        bool
}

// readClientHello reads a TLS ClientHello from r (c's reader, for the
// read deadline) with crypto/tls's own parser, however it is split into
// records, up to maxHello bytes and for at most timeout. It returns what
// the hello says and a reader that replays every byte read, then goes on
// with r. An error says in words why the connection is not one the proxy
// can check: not TLS, malformed, too large, too slow.
func readClientHello(c net.Conn, r io.Reader, timeout time.Duration) (hello, io.Reader, error) {
	if timeout <= 0 {
		timeout = helloTimeout
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	rec := &recorder{r: r, max: maxHello}
	var h hello
	var got bool
	srv := tls.Server(&replayConn{r: rec}, &tls.Config{
		GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			got = true
			h.ServerName = chi.ServerName
			for _, e := range chi.Extensions {
				h.ECH = h.ECH || e == extECH
			}
			return nil, errHelloRead
		},
	})
	err := srv.Handshake()
	replay := io.MultiReader(bytes.NewReader(rec.buf.Bytes()), r)
	switch {
	case got:
		return h, replay, nil
	case rec.buf.Len() == 0 && rec.timeout:
		return h, replay, fmt.Errorf("the client sent nothing for %s (a CONNECT must start TLS)", timeout)
	case rec.buf.Len() == 0:
		return h, replay, errors.New("the client sent nothing before it closed the connection (a CONNECT must start TLS)")
	case rec.buf.Len() > 0 && rec.buf.Bytes()[0] != 0x16:
		return h, replay, errors.New("the connection is not TLS (a CONNECT through Airlock's proxy carries TLS only; send plain HTTP as a proxy request, http://...)")
	case rec.full:
		return h, replay, fmt.Errorf("the TLS ClientHello is larger than %d KiB", maxHello>>10)
	case rec.timeout:
		return h, replay, fmt.Errorf("the TLS ClientHello did not arrive whole within %s", timeout)
	}
	return h, replay, fmt.Errorf("the TLS ClientHello does not parse (%v)", err)
}

var errHelloRead = errors.New("the ClientHello is read")

// recorder reads from r, keeping what it read, up to max bytes.
type recorder struct {
	r       io.Reader
	buf     bytes.Buffer
	max     int
	full    bool
	timeout bool
}

func (rc *recorder) Read(p []byte) (int, error) {
	room := rc.max - rc.buf.Len()
	if room <= 0 {
		rc.full = true
		return 0, errors.New("ClientHello too large")
	}
	if len(p) > room {
		p = p[:room]
	}
	n, err := rc.r.Read(p)
	rc.buf.Write(p[:n])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		rc.timeout = true
	}
	return n, err
}

// replayConn is a net.Conn that reads from r and discards writes (the
// alert crypto/tls sends when the hello is refused never reaches the
// client).
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *replayConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *replayConn) Close() error                     { return nil }
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }
func (c *replayConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *replayConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
