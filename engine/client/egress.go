package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/airlock/airlock/engine/api"
)

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

// ClosePort ends the forward of a session's port.
func (c *Client) ClosePort(ctx context.Context, id string, port int) error {
	return c.do(ctx, "DELETE", "/sessions/"+url.PathEscape(id)+"/ports/"+strconv.Itoa(port), nil, nil, nil)
}
