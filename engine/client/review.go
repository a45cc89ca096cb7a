package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/airlock/airlock/engine/api"
)

func pathsQuery(paths []string) url.Values {
	if len(paths) == 0 {
		return nil
	}
	return url.Values{"path": paths}
}

// diffValues is a diff query in a URL's terms.
func diffValues(q api.DiffQuery) url.Values {
	v := url.Values{}
	if len(q.Paths) > 0 {
		v["path"] = q.Paths
	}
	if q.Ignored != "" {
		v.Set("ignored", q.Ignored)
	}
	return v
}

// Diff returns the session's changes with hunks, and their stats (which
// the engine leaves to the client: a summary of the files).
func (c *Client) Diff(ctx context.Context, id string, paths []string) (api.Diff, error) {
	return c.DiffOf(ctx, id, api.DiffQuery{Paths: paths})
}

// DiffOf is Diff of a query: paths, and what becomes of the changes
// ignore rules cover (summarised in Diff.Ignored by default).
func (c *Client) DiffOf(ctx context.Context, id string, q api.DiffQuery) (api.Diff, error) {
	var out api.Diff
	if err := c.do(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/diff", diffValues(q), nil, &out); err != nil {
		return out, err
	}
	if out.Stats == nil {
		out.Stats = api.Stats(out.Files)
	}
	return out, nil
}

// DiffEachJSON is DiffOf handing each file to each as the engine wrote
// it (one api.FileDiff's JSON) as it comes, neither decoded nor kept: a
// large session's diff is tens of megabytes of JSON, which decoding into
// structs and encoding again costs seconds. The api.Diff returned has
// everything but Files and Stats. A response cut short is an error.
func (c *Client) DiffEachJSON(ctx context.Context, id string, q api.DiffQuery, each func(file []byte) error) (api.Diff, error) {
	resp, err := c.send(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/diff", diffValues(q), nil)
	if err != nil {
		return api.Diff{}, err
	}
	defer resp.Body.Close()
	var out api.Diff
	if err := readFilesJSON(resp.Body, &out, each); err != nil {
		return out, fmt.Errorf("the engine's diff: %w", err)
	}
	return out, nil
}

// readFilesJSON reads a JSON object whose "files" array is handed to
// each an element at a time; its other fields are decoded into d. The
// object's end missing is io.ErrUnexpectedEOF.
func readFilesJSON(r io.Reader, d *api.Diff, each func(file []byte) error) error {
	err := readObjectJSON(json.NewDecoder(r), d, each)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func readObjectJSON(dec *json.Decoder, d *api.Diff, each func(file []byte) error) error {
	if err := wantDelim(dec, '{'); err != nil {
		return err
	}
	rest := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		if key != "files" {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return err
			}
			rest[key] = v
			continue
		}
		if t, err = dec.Token(); err != nil {
			return err
		}
		if t == nil {
			continue // null: no files
		}
		if t != json.Delim('[') {
			return fmt.Errorf("files is %v, not an array", t)
		}
		for dec.More() {
			var f json.RawMessage
			if err := dec.Decode(&f); err != nil {
				return err
			}
			if err := each(f); err != nil {
				return err
			}
		}
		if err := wantDelim(dec, ']'); err != nil {
			return err
		}
	}
	if err := wantDelim(dec, '}'); err != nil {
		return err
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, d)
}

func wantDelim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != d {
		return fmt.Errorf("%v where %v was expected", t, d)
	}
	return nil
}

// DiffStat is Diff without the hunks: files, line counts, conflicts,
// holds and findings.
func (c *Client) DiffStat(ctx context.Context, id string, paths []string) (api.Diff, error) {
	var stats []api.Stat
	d, err := c.DiffStatEach(ctx, id, api.DiffQuery{Paths: paths}, nil, func(s api.Stat) error {
		stats = append(stats, s)
		return nil
	})
	d.Stats = stats
	return d, err
}

// DiffStatEach is DiffStat handing each path's stat to each as it comes,
// without keeping them; width, when not nil, is told the longest path's
// length in bytes before the first stat where the engine knows it (a
// summary it kept), so that a printer can align lines as they come. The
// api.Diff returned has no stats.
func (c *Client) DiffStatEach(ctx context.Context, id string, dq api.DiffQuery, width func(int), each func(api.Stat) error) (api.Diff, error) {
	q := diffValues(dq)
	q.Set("stat", "1")
	resp, err := c.sendAccepting(ctx, "GET", "/sessions/"+url.PathEscape(id)+"/diff", q, nil, api.StatLines+", application/json")
	if err != nil {
		return api.Diff{}, err
	}
	defer resp.Body.Close()
	var out api.Diff
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), api.StatLines) {
		// An engine before the lines.
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return out, err
		}
		stats := out.Stats
		out.Stats = nil
		for _, s := range stats {
			if err := each(s); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return out, readStatLines(resp.Body, &out, width, each)
}

// readStatLines reads api.StatLines: the stats to each, then the rest
// into d. A response without its closing JSON line was cut short.
func readStatLines(r io.Reader, d *api.Diff, width func(int), each func(api.Stat) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("the engine's diff summary has a line over 64 KiB")
		}
		if err != nil {
			return fmt.Errorf("the engine's diff summary was cut short (%v): run the command again; `airlock diff` without --stat says why if it fails again", err)
		}
		line = line[:len(line)-1]
		if len(line) > 0 && line[0] == '{' {
			if err := json.Unmarshal(line, d); err != nil {
				return fmt.Errorf("the engine's diff summary: %w", err)
			}
			return nil
		}
		if w, ok := api.ParseStatWidth(line); ok && first {
			if width != nil {
				width(w)
			}
			continue
		}
		st, err := api.ParseStatLine(line)
		if err != nil {
			return fmt.Errorf("the engine's diff summary: %w", err)
		}
		if err := each(st); err != nil {
			return err
		}
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
