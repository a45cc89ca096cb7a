package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// Commands lists what ran in a session.
func (c *Client) Commands(ctx context.Context, id string, withOutput bool) ([]api.Command, error) {
	return c.CommandsSince(ctx, id, 0, withOutput)
}

// CommandsSince lists a session's commands from command since on (an
// engine below API level 1 ignores since and lists them all).
func (c *Client) CommandsSince(ctx context.Context, id string, since int64, withOutput bool) ([]api.Command, error) {
	q := url.Values{}
	if withOutput {
		q.Set("output", "1")
	}
	if since > 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	var out []api.Command
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/commands", q, nil, &out)
}

// ExecIO connects a remote command to local streams.
type ExecIO struct {
	Stdin  io.Reader // sent when the request has Stdin
	Stdout io.Writer
	Stderr io.Writer
	// Started is called with the command's record once it runs.
	Started func(api.ExecStarted)
	// Session is called, by Run, with the session once it runs.
	Session func(api.Session)
}

// Exec is a running remote command.
type Exec struct {
	conn net.Conn
	wmu  sync.Mutex
}

// Resize tells the command's TTY its new size.
func (x *Exec) Resize(width, height uint) error {
	return x.send(api.FrameResize, api.Resize{Width: width, Height: height})
}

// Signal delivers sig to the command.
func (x *Exec) Signal(sig int) error {
	return x.send(api.FrameSignal, api.Signal{Signal: sig})
}

func (x *Exec) send(typ byte, v any) error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	return api.WriteJSONFrame(x.conn, typ, v)
}

// Exec runs a command in a session. control, if not nil, is called with
// the running Exec (for resizes and signals). It returns the command's
// exit code once it ends.
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest, sio ExecIO, control func(*Exec)) (int, error) {
	return c.stream(ctx, "/sessions/"+url.PathEscape(id)+"/exec", req, req, id, sio, control)
}

// Run creates a session and runs its first command in it, like Create
// then Exec but with the command starting as the container starts.
// sio.Session is called with the session before any output.
func (c *Client) Run(ctx context.Context, req api.RunRequest, sio ExecIO, control func(*Exec)) (int, error) {
	return c.stream(ctx, "/run", req, req.Exec, "", sio, control)
}

// stream posts body to path, upgrades the connection and runs the
// command over frames.
func (c *Client) stream(ctx context.Context, path string, body any, req api.ExecRequest, id string, sio ExecIO, control func(*Exec)) (int, error) {
	conn, br, err := c.upgrade(ctx, path, body)
	if err != nil {
		return -1, err
	}
	defer conn.Close()
	x := &Exec{conn: conn}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if control != nil {
		control(x)
	}
	if req.Stdin && sio.Stdin != nil {
		go x.sendStdin(sio.Stdin)
	}
	return readFrames(ctx, br, id, sio)
}

// upgrade posts body to path on a connection of its own and switches it
// to the framed exec protocol; an engine that refuses says why in its
// answer.
func (c *Client) upgrade(ctx context.Context, path string, body any) (net.Conn, *bufio.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, nil, c.unreachable(err)
	}
	b, _ := json.Marshal(body)
	hreq, _ := http.NewRequest("POST", c.url(path, nil), bytes.NewReader(b))
	hreq.Header.Set("Connection", "Upgrade")
	hreq.Header.Set("Upgrade", api.UpgradeProtocol)
	hreq.Header.Set("Content-Type", "application/json")
	if err := hreq.Write(conn); err != nil {
		conn.Close()
		return nil, nil, c.unreachable(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, hreq)
	if err != nil {
		conn.Close()
		return nil, nil, c.unreachable(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		defer resp.Body.Close()
		return nil, nil, decodeError(resp)
	}
	return conn, br, nil
}

// sendStdin copies stdin to the command as frames, then says its end.
func (x *Exec) sendStdin(stdin io.Reader) {
	buf := make([]byte, 32*1024)
	for {
		n, err := stdin.Read(buf)
		if n > 0 {
			x.wmu.Lock()
			werr := api.WriteFrame(x.conn, api.FrameStdin, buf[:n])
			x.wmu.Unlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			x.wmu.Lock()
			api.WriteFrame(x.conn, api.FrameEOF, nil)
			x.wmu.Unlock()
			return
		}
	}
}

// readFrames hands the command's output, session and start to sio as
// they come, and returns its exit code.
func readFrames(ctx context.Context, br *bufio.Reader, id string, sio ExecIO) (int, error) {
	for {
		typ, payload, err := api.ReadFrame(br)
		if err != nil {
			if ctx.Err() != nil {
				return -1, ctx.Err()
			}
			return -1, errdefs.Unavailablef("lost the connection to the engine while the command ran (%v): `airlock logs %s` shows what it recorded", err, id)
		}
		switch typ {
		case api.FrameStdout:
			if sio.Stdout != nil {
				sio.Stdout.Write(payload)
			}
		case api.FrameStderr:
			if sio.Stderr != nil {
				sio.Stderr.Write(payload)
			}
		case api.FrameSession:
			var sess api.Session
			if err := json.Unmarshal(payload, &sess); err != nil {
				return -1, err
			}
			id = sess.ID
			if sio.Session != nil {
				sio.Session(sess)
			}
		case api.FrameStarted:
			var st api.ExecStarted
			if json.Unmarshal(payload, &st) == nil && sio.Started != nil {
				sio.Started(st)
			}
		case api.FrameExit:
			var ex api.ExecExit
			if err := json.Unmarshal(payload, &ex); err != nil {
				return -1, err
			}
			return ex.ExitCode, nil
		case api.FrameError:
			var e api.Error
			json.Unmarshal(payload, &e)
			return -1, errdefs.New(errdefs.Class(e.Class), "%s", e.Message)
		}
	}
}

// Agent runs an agent turn in a session, calling event for each event as
// it happens, and returns the turn once it ends. A turn that ends failed
// is returned with its Error set, not as an error.
func (c *Client) Agent(ctx context.Context, id string, req api.AgentRequest, event func(api.Event)) (api.Turn, error) {
	resp, err := c.send(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/agent", nil, req)
	if err != nil {
		return api.Turn{}, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var l api.AgentLine
		if err := dec.Decode(&l); err != nil {
			if ctx.Err() != nil {
				return api.Turn{}, ctx.Err()
			}
			return api.Turn{}, errdefs.Unavailablef("lost the engine during the turn (%v): `airlock events %s` shows what was recorded", err, id)
		}
		switch {
		case l.Event != nil:
			if event != nil {
				event(*l.Event)
			}
		case l.Error != nil:
			return api.Turn{}, errdefs.New(errdefs.Class(l.Error.Class), "%s", l.Error.Message)
		case l.Turn != nil:
			return *l.Turn, nil
		}
	}
}

// Turns lists a session's agent turns.
func (c *Client) Turns(ctx context.Context, id string) ([]api.Turn, error) {
	var out []api.Turn
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/turns", nil, nil, &out)
}

// Events lists a session's agent events, of one turn if turn > 0.
func (c *Client) Events(ctx context.Context, id string, turn int) ([]api.Event, error) {
	var q url.Values
	if turn > 0 {
		q = url.Values{"turn": {strconv.Itoa(turn)}}
	}
	var out []api.Event
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/events", q, nil, &out)
}
