package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

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
