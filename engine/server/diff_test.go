package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/airlock/airlock/engine/api"
)

// streaming is an engine whose diff hands on n files, then fails with
// failAfter's error if set.
type streaming struct {
	quiet
	n        int
	failWith error
}

func (s streaming) DiffEach(_ context.Context, id string, _ api.DiffQuery, each func(api.FileDiff) error) (api.Diff, error) {
	for i := range s.n {
		f := api.FileDiff{Change: api.Change{Path: fmt.Sprintf("f%05d", i), Kind: api.KindAdded, Type: api.TypeFile}}
		f.Hunks = []api.Hunk{{Lines: []string{"+a\n", "+b\n"}}}
		if err := each(f); err != nil {
			return api.Diff{}, err
		}
	}
	if s.failWith != nil {
		return api.Diff{}, s.failWith
	}
	return api.Diff{Session: id, Workspace: api.Workspace{Files: int64(s.n)}}, nil
}

func (s streaming) DiffStatLines(ctx context.Context, id string, q api.DiffQuery, each func([]byte) error) (api.Diff, error) {
	return s.DiffEach(ctx, id, q, func(f api.FileDiff) error { return each(api.AppendStatLine(nil, api.Stats([]api.FileDiff{f})[0])) })
}

func getDiff(t *testing.T, url string) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// A diff is written as the engine hands its files on, as one JSON object:
// the files (or their stats) and the rest.
func TestDiffStreams(t *testing.T) {
	ts := tcpServer(t, func() *Server { s, _ := newServer(streaming{n: 3000}); return s }())
	_, body, err := getDiff(t, ts.URL+"/v1/sessions/s1/diff")
	if err != nil {
		t.Fatal(err)
	}
	var d api.Diff
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("not one JSON object: %v", err)
	}
	if d.Session != "s1" || len(d.Files) != 3000 || d.Files[2999].Path != "f02999" || len(d.Files[0].Hunks) != 1 || d.Workspace.Files != 3000 {
		t.Errorf("diff: session %q, %d files, workspace %+v", d.Session, len(d.Files), d.Workspace)
	}
	_, body, err = getDiff(t, ts.URL+"/v1/sessions/s1/diff?stat=1")
	if err != nil {
		t.Fatal(err)
	}
	d = api.Diff{}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("stat: not one JSON object: %v", err)
	}
	if d.Session != "s1" || d.Files != nil || len(d.Stats) != 3000 || d.Stats[7].Added != 2 || d.Stats[7].Path != "f00007" {
		t.Errorf("stat: session %q, %d files, %d stats", d.Session, len(d.Files), len(d.Stats))
	}
}

// A diff that fails after its first byte is cut short: the client sees an
// error, never a diff that looks whole. One that fails before is an error
// response.
func TestDiffFailingMidStreamIsCutShort(t *testing.T) {
	ts := tcpServer(t, func() *Server {
		s, _ := newServer(streaming{n: 5000, failWith: errors.New("the disk went away")})
		return s
	}())
	_, body, err := getDiff(t, ts.URL+"/v1/sessions/s1/diff")
	var d api.Diff
	if err == nil && json.Unmarshal(body, &d) == nil {
		t.Fatalf("a failed diff reads as a whole one: %d files", len(d.Files))
	}
	ts = tcpServer(t, func() *Server {
		s, _ := newServer(streaming{n: 0, failWith: errors.New("the disk went away")})
		return s
	}())
	resp, body, err := getDiff(t, ts.URL+"/v1/sessions/s1/diff")
	if err != nil || resp.StatusCode != 500 {
		t.Fatalf("failure before the first file: status %d, %v, %s", resp.StatusCode, err, body)
	}
}
