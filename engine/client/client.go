// Package client is the Go client of the engine's local API. The CLI and
// the desktop app use it; it depends only on the API contract.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
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
func (c *Client) Hibernate(ctx context.Context, id string, req api.HibernateRequest) (api.Session, error) {
	var out api.Session
	return out, c.do(ctx, "POST", "/sessions/"+url.PathEscape(id)+"/hibernate", nil, req, &out)
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
