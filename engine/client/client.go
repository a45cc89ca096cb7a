// Package client is the Go client of the engine's local API. The CLI and
// the desktop app use it; it depends only on the API contract.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// Client talks to one engine over its unix socket.
type Client struct {
	socket string
	http   *http.Client
}

// New returns a client for the engine listening on socket.
func New(socket string) *Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	return &Client{socket: socket, http: &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConns: 4}}}
}

func (c *Client) url(p string, q url.Values) string {
	u := "http://airlock/" + api.Version + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// unreachable says the engine is not answering, classed Unavailable.
func (c *Client) unreachable(err error) error {
	return errdefs.Unavailablef("the Airlock engine does not answer on %s (%v): start it with `sudo airlock serve`", c.socket, err)
}

func (c *Client) do(ctx context.Context, method, p string, q url.Values, body, out any) error {
	resp, err := c.send(ctx, method, p, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// send makes a request and turns a non-2xx answer into a classed error.
func (c *Client) send(ctx context.Context, method, p string, q url.Values, body any) (*http.Response, error) {
	return c.sendAccepting(ctx, method, p, q, body, "")
}

// sendAccepting is send with an Accept header (none when accept is "").
func (c *Client) sendAccepting(ctx context.Context, method, p string, q url.Values, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	contentType := "application/json"
	if raw, ok := body.(json.RawMessage); ok {
		rd = bytes.NewReader(raw)
	} else if r, ok := body.(io.Reader); ok {
		rd, contentType = r, "application/x-tar"
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(p, q), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.unreachable(err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	var e api.Error
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &e) != nil || e.Message == "" {
		return fmt.Errorf("engine answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return errdefs.New(errdefs.Class(e.Class), "%s", e.Message)
}

// Ping checks that the engine answers and returns its version.
func (c *Client) Ping(ctx context.Context) (api.VersionInfo, error) {
	var v api.VersionInfo
	err := c.do(ctx, "GET", "/version", nil, nil, &v)
	return v, err
}

// WaitReady polls until the engine answers or timeout passes.
func (c *Client) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sessions lists sessions.
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var out []api.Session
	return out, c.do(ctx, "GET", "/sessions", nil, nil, &out)
}

// Session returns one session.
func (c *Client) Session(ctx context.Context, id string) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id), nil, nil, &out)
}

// Create creates a session.
func (c *Client) Create(ctx context.Context, req api.CreateRequest) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "POST", "/sessions", nil, req, &out)
}

// Remove ends a session.
func (c *Client) Remove(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/sessions/"+url.PathEscape(id), nil, nil, nil)
}

func pathsQuery(paths []string) url.Values {
	if len(paths) == 0 {
		return nil
	}
	return url.Values{"path": paths}
}

// Diff returns the session's changes with hunks, and their stats (which
// the engine leaves to the client: a summary of the files).
func (c *Client) Diff(ctx context.Context, id string, paths []string) (api.Diff, error) {
	var out api.Diff
	if err := c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/diff", pathsQuery(paths), nil, &out); err != nil {
		return out, err
	}
	if out.Stats == nil {
		out.Stats = api.Stats(out.Files)
	}
	return out, nil
}

// DiffStat is Diff without the hunks: files, line counts, conflicts,
// holds and findings.
func (c *Client) DiffStat(ctx context.Context, id string, paths []string) (api.Diff, error) {
	q := pathsQuery(paths)
	if q == nil {
		q = url.Values{}
	}
	q.Set("stat", "1")
	resp, err := c.sendAccepting(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/diff", q, nil, api.StatLines+", application/json")
	if err != nil {
		return api.Diff{}, err
	}
	defer resp.Body.Close()
	var out api.Diff
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), api.StatLines) {
		return out, json.NewDecoder(resp.Body).Decode(&out) // an engine before the lines
	}
	return out, readStatLines(resp.Body, &out)
}

// readStatLines reads api.StatLines into d: its stats, then the rest. A
// response without its closing JSON line was cut short.
func readStatLines(r io.Reader, d *api.Diff) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("the engine's diff summary has a line over 64 KiB")
		}
		if err != nil {
			return fmt.Errorf("the engine's diff summary was cut short (%v): run the command again; `airlock diff` without --stat says why if it fails again", err)
		}
		line = line[:len(line)-1]
		if len(line) > 0 && line[0] == '{' {
			stats := d.Stats
			if err := json.Unmarshal(line, d); err != nil {
				return fmt.Errorf("the engine's diff summary: %w", err)
			}
			d.Stats = stats
			return nil
		}
		st, err := api.ParseStatLine(line)
		if err != nil {
			return fmt.Errorf("the engine's diff summary: %w", err)
		}
		d.Stats = append(d.Stats, st)
	}
}

// Patch writes the session's changes as a git-apply patch to w.
func (c *Client) Patch(ctx context.Context, id string, paths []string, w io.Writer) error {
	resp, err := c.send(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/patch", pathsQuery(paths), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// Accept writes the selected changes (all for an empty selection) into
// the project, all or nothing.
func (c *Client) Accept(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error) {
	var out api.Outcomes
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/accept", nil, sel, &out)
}

// Discard drops the selected changes (all for an empty selection) from the
// session.
func (c *Client) Discard(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error) {
	var out api.Outcomes
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/discard", nil, sel, &out)
}

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

// Images lists local images.
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	var out []api.Image
	return out, c.do(ctx, "GET", "/images", nil, nil, &out)
}

// BuildImage builds an image, calling progress for each update, and
// returns the image once built.
func (c *Client) BuildImage(ctx context.Context, req api.ImageBuildRequest, progress func(api.Progress)) (*api.Image, error) {
	resp, err := c.send(ctx, "POST", "/images/build", nil, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var p api.Progress
		if err := dec.Decode(&p); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("the engine ended the build without a result: see its log")
			}
			return nil, err
		}
		if progress != nil {
			progress(p)
		}
		if p.Error != nil {
			return nil, errdefs.New(errdefs.Class(p.Error.Class), "%s", p.Error.Message)
		}
		if p.Done {
			return p.Image, nil
		}
	}
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
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return -1, c.unreachable(err)
	}
	defer conn.Close()
	b, _ := json.Marshal(body)
	hreq, _ := http.NewRequest("POST", c.url(path, nil), bytes.NewReader(b))
	hreq.Header.Set("Connection", "Upgrade")
	hreq.Header.Set("Upgrade", api.UpgradeProtocol)
	hreq.Header.Set("Content-Type", "application/json")
	if err := hreq.Write(conn); err != nil {
		return -1, c.unreachable(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, hreq)
	if err != nil {
		return -1, c.unreachable(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return -1, decodeError(resp)
	}
	x := &Exec{conn: conn}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if control != nil {
		control(x)
	}
	if req.Stdin && sio.Stdin != nil {
		go func() {
			buf := make([]byte, 32*1024)
			for {
				n, err := sio.Stdin.Read(buf)
				if n > 0 {
					x.wmu.Lock()
					werr := api.WriteFrame(conn, api.FrameStdin, buf[:n])
					x.wmu.Unlock()
					if werr != nil {
						return
					}
				}
				if err != nil {
					x.wmu.Lock()
					api.WriteFrame(conn, api.FrameEOF, nil)
					x.wmu.Unlock()
					return
				}
			}
		}()
	}
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

// SetSecret stores a secret in the engine.
func (c *Client) SetSecret(ctx context.Context, name, value string) error {
	return c.do(ctx, "PUT", "/secrets/"+url.PathEscape(name), nil, api.SecretRequest{Value: value}, nil)
}

// Secrets lists the stored secrets' names.
func (c *Client) Secrets(ctx context.Context) ([]api.Secret, error) {
	var out []api.Secret
	return out, c.do(ctx, "GET", "/secrets", nil, nil, &out)
}

// DeleteSecret removes a stored secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/secrets/"+url.PathEscape(name), nil, nil, nil)
}

// Policy changes a running session's egress policy and returns it.
func (c *Client) Policy(ctx context.Context, id string, ch api.PolicyChange) (api.EgressPolicy, error) {
	var out api.EgressPolicy
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/policy", nil, ch, &out)
}

// SavePolicy writes a session's policy into its project's
// .airlock/policy.yaml.
func (c *Client) SavePolicy(ctx context.Context, id string) (api.SavedPolicy, error) {
	var out api.SavedPolicy
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/policy/save", nil, nil, &out)
}

// NetLog lists a session's connections (blocked ones only if asked; the
// last limit if limit > 0).
func (c *Client) NetLog(ctx context.Context, id string, blocked bool, limit int) ([]api.EgressEntry, error) {
	q := url.Values{}
	if blocked {
		q.Set("blocked", "1")
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []api.EgressEntry
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/net", q, nil, &out)
}

// Pending lists the questions of sessions under the ask mode that wait
// for an answer.
func (c *Client) Pending(ctx context.Context) ([]api.PendingQuestion, error) {
	var out []api.PendingQuestion
	return out, c.do(ctx, "GET", "/net/pending", nil, nil, &out)
}

// Decide answers pending question d.ID.
func (c *Client) Decide(ctx context.Context, d api.Decide) error {
	return c.do(ctx, "POST", "/net/decide", nil, d, nil)
}

// Pause freezes a session.
func (c *Client) Pause(ctx context.Context, id string) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/pause", nil, nil, &out)
}

// Resume thaws a paused session.
func (c *Client) Resume(ctx context.Context, id string) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/resume", nil, nil, &out)
}

// Hibernate records a session's checkpoint and releases its memory: no
// container, no tmpfs. New work wakes it.
func (c *Client) Hibernate(ctx context.Context, id string) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/hibernate", nil, nil, &out)
}

// Wake brings a hibernated session back from its checkpoint.
func (c *Client) Wake(ctx context.Context, id string) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/wake", nil, nil, &out)
}

// Meter reports what a session used.
func (c *Client) Meter(ctx context.Context, id string) (api.Meter, error) {
	var out api.Meter
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/meter", nil, nil, &out)
}

// Lifecycle lists a session's pauses and resumes.
func (c *Client) Lifecycle(ctx context.Context, id string) ([]api.LifecycleEvent, error) {
	var out []api.LifecycleEvent
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/lifecycle", nil, nil, &out)
}

// SetBudgets changes a session's budgets.
func (c *Client) SetBudgets(ctx context.Context, id string, b api.Budgets) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/budget", nil, b, &out)
}

// SetLimits changes a running session's limits (zero fields unchanged).
func (c *Client) SetLimits(ctx context.Context, id string, l api.Limits) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/limits", nil, l, &out)
}

// Snapshot captures a session.
func (c *Client) Snapshot(ctx context.Context, id string, req api.SnapshotRequest) (api.Snapshot, error) {
	var out api.Snapshot
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/snapshots", nil, req, &out)
}

// Snapshots lists the snapshots.
func (c *Client) Snapshots(ctx context.Context) ([]api.Snapshot, error) {
	var out []api.Snapshot
	return out, c.do(ctx, "GET", "/snapshots", nil, nil, &out)
}

// GetSnapshot finds a snapshot by id, id prefix or name.
func (c *Client) GetSnapshot(ctx context.Context, ref string) (api.Snapshot, error) {
	var out api.Snapshot
	return out, c.do(ctx, "GET", "/snapshots/"+url.PathEscape(ref), nil, nil, &out)
}

// RemoveSnapshot deletes a snapshot.
func (c *Client) RemoveSnapshot(ctx context.Context, ref string) error {
	return c.do(ctx, "DELETE", "/snapshots/"+url.PathEscape(ref), nil, nil, nil)
}

// Restore makes sessions from a snapshot.
func (c *Client) Restore(ctx context.Context, ref string, req api.RestoreRequest) (api.Restored, error) {
	var out api.Restored
	return out, c.do(ctx, "POST", "/snapshots/"+url.PathEscape(ref)+"/restore", nil, req, &out)
}

// ExportSnapshot streams a snapshot as an OCI image tar; withBase includes
// the image it runs on. The stream fails, rather than ends early, when the
// engine fails part-way.
func (c *Client) ExportSnapshot(ctx context.Context, ref string, withBase bool) (io.ReadCloser, error) {
	q := url.Values{}
	if !withBase {
		q.Set("base", "0")
	}
	resp, err := c.send(ctx, "GET", "/snapshots/"+url.PathEscape(ref)+"/export", q, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ImportSnapshot reads an image tar into a snapshot.
func (c *Client) ImportSnapshot(ctx context.Context, tar io.Reader) (api.Imported, error) {
	var out api.Imported
	return out, c.do(ctx, "POST", "/snapshots/import", nil, tar, &out)
}

// Settings are the engine's defaults for new sessions.
func (c *Client) Settings(ctx context.Context) (api.Settings, error) {
	var out api.Settings
	return out, c.do(ctx, "GET", "/settings", nil, nil, &out)
}

// SetSettings changes the engine's defaults (zero fields unchanged).
func (c *Client) SetSettings(ctx context.Context, s api.Settings) (api.Settings, error) {
	var out api.Settings
	return out, c.do(ctx, "PUT", "/settings", nil, s, &out)
}

// Raw sends a request with a JSON body (path below /v1, with its query)
// and returns the answer's body; an error answer is a classed error. The
// desktop app forwards its frontend's calls through it.
func (c *Client) Raw(ctx context.Context, method, pathAndQuery string, body []byte) (io.ReadCloser, error) {
	p, query, _ := strings.Cut(pathAndQuery, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, errdefs.Invalidf("bad query in %q: %v", pathAndQuery, err)
	}
	var b any
	if body != nil {
		b = json.RawMessage(body)
	}
	resp, err := c.send(ctx, method, p, q, b)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// StartUI asks the engine to serve the browser UI and returns its address
// with the token.
func (c *Client) StartUI(ctx context.Context) (string, error) {
	var out struct {
		URL string `json:"url"`
	}
	err := c.do(ctx, "POST", "/ui", nil, nil, &out)
	return out.URL, err
}

// OpenPort forwards a session's port to the host.
func (c *Client) OpenPort(ctx context.Context, id string, req api.PortRequest) (api.Port, error) {
	var out api.Port
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/ports", nil, req, &out)
}

// Ports lists a session's forwarded ports.
func (c *Client) Ports(ctx context.Context, id string) ([]api.Port, error) {
	var out []api.Port
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/ports", nil, nil, &out)
}

// ListeningPorts lists the TCP ports a session listens on that are not
// forwarded.
func (c *Client) ListeningPorts(ctx context.Context, id string) ([]api.ListeningPort, error) {
	var out []api.ListeningPort
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/ports/listening", nil, nil, &out)
}

// Checkpoints lists a session's checkpoints (its timeline), oldest first.
func (c *Client) Checkpoints(ctx context.Context, id string) ([]api.Checkpoint, error) {
	var out []api.Checkpoint
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/checkpoints", nil, nil, &out)
}

// CheckpointDiff is what changed between two of a session's checkpoints:
// one turn's, or from turn q.From to turn q.To, or between two
// checkpoints by id.
func (c *Client) CheckpointDiff(ctx context.Context, id string, q api.CheckpointDiffQuery) (api.Diff, error) {
	v := url.Values{}
	for name, n := range map[string]int64{"turn": int64(q.Turn), "from": int64(q.From), "to": int64(q.To),
		"from_checkpoint": q.FromCheckpoint, "to_checkpoint": q.ToCheckpoint} {
		if n != 0 {
			v.Set(name, strconv.FormatInt(n, 10))
		}
	}
	var out api.Diff
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/checkpoints/diff", v, nil, &out)
}

// Undo puts a session's workspace back to a checkpoint, stopping its
// processes first.
func (c *Client) Undo(ctx context.Context, id string, req api.UndoRequest) (api.Undone, error) {
	var out api.Undone
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/undo", nil, req, &out)
}

// Blame is a session's diff (of paths, or all) with, for each hunk, the
// checkpoint that last changed it.
func (c *Client) Blame(ctx context.Context, id string, paths []string) (api.Blame, error) {
	var q url.Values
	if len(paths) > 0 {
		q = url.Values{"path": paths}
	}
	var out api.Blame
	return out, c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/blame", q, nil, &out)
}

// Fork makes new sessions from the state after a turn of a session.
func (c *Client) Fork(ctx context.Context, id string, req api.ForkRequest) (api.Restored, error) {
	var out api.Restored
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/fork", nil, req, &out)
}

// ClosePort ends the forward of a session's port.
func (c *Client) ClosePort(ctx context.Context, id string, port int) error {
	return c.do(ctx, "DELETE", "/sessions/"+url.PathEscape(id)+"/ports/"+strconv.Itoa(port), nil, nil, nil)
}

// AddSchedule records a schedule.
func (c *Client) AddSchedule(ctx context.Context, s api.Schedule) (api.Schedule, error) {
	var out api.Schedule
	return out, c.do(ctx, "POST", "/schedules", nil, s, &out)
}

// Schedules lists the schedules with their next time and last run.
func (c *Client) Schedules(ctx context.Context) ([]api.Schedule, error) {
	var out []api.Schedule
	return out, c.do(ctx, "GET", "/schedules", nil, nil, &out)
}

// Schedule returns one schedule.
func (c *Client) Schedule(ctx context.Context, name string) (api.Schedule, error) {
	var out api.Schedule
	return out, c.do(ctx, "GET", "/schedules/"+url.PathEscape(name), nil, nil, &out)
}

// RemoveSchedule forgets a schedule and its log (its sessions stay).
func (c *Client) RemoveSchedule(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/schedules/"+url.PathEscape(name), nil, nil, nil)
}

// RunSchedule runs a schedule now: the answer comes once its session
// runs, or with req.Wait once the run ended.
func (c *Client) RunSchedule(ctx context.Context, name string, req api.ScheduleRunRequest) (api.ScheduleRun, error) {
	var out api.ScheduleRun
	return out, c.do(ctx, "POST", "/schedules/"+url.PathEscape(name)+"/run", nil, req, &out)
}

// ScheduleRuns lists a schedule's runs, oldest first.
func (c *Client) ScheduleRuns(ctx context.Context, name string) ([]api.ScheduleRun, error) {
	var out []api.ScheduleRun
	return out, c.do(ctx, "GET", "/schedules/"+url.PathEscape(name)+"/runs", nil, nil, &out)
}
