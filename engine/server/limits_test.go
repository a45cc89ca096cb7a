package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// reading is an engine whose import reads the whole tar and reports the
// read error the way a library would: as text, not wrapped.
type reading struct{ quiet }

func (reading) Import(_ context.Context, r io.Reader) (api.Snapshot, []string, error) {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return api.Snapshot{}, nil, fmt.Errorf("read the image tar: %v", err)
	}
	return api.Snapshot{ID: "imported"}, nil, nil
}

func (reading) AcceptEach(_ context.Context, _ string, sel api.Selection, each func(api.Outcome) error) (api.Outcomes, error) {
	return api.Outcomes{}, each(api.Outcome{Path: fmt.Sprintf("%d pinned", len(sel.Digests))})
}

// pinned is an accept's selection pinning n files by digest, as the UI
// sends after a review of n files.
func pinned(n int) string {
	var b strings.Builder
	b.WriteString(`{"digests":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"dir%03d/file%06d.txt":"sha256:%064d"`, i/1000, i, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

func TestRequestBodies(t *testing.T) {
	s, _ := newServer(reading{})
	s.bounds.importBody = 64 << 10
	ts := tcpServer(t, s)
	bearer := "Authorization: Bearer " + testToken
	jsonCT := "Content-Type: application/json"
	huge := `{"value":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		want                     int
		says                     string
	}{
		{"a JSON body over the limit", "PUT", "/v1/secrets/K", huge, []string{bearer, jsonCT}, 400, "larger than 1 MiB"},
		{"bad JSON", "PUT", "/v1/secrets/K", `{"value":`, []string{bearer, jsonCT}, 400, "bad request body"},
		{"an unknown field", "PUT", "/v1/secrets/K", `{"valu":"v"}`, []string{bearer, jsonCT}, 400, "unknown field"},
		{"two JSON values", "PUT", "/v1/secrets/K", `{"value":"v"} {"value":"w"}`, []string{bearer, jsonCT}, 400, "one JSON value"},
		{"a wrong type", "PUT", "/v1/secrets/K", `{"value":1}`, []string{bearer, jsonCT}, 400, "bad request body"},
		{"an import within the limit", "POST", "/v1/snapshots/import", strings.Repeat("t", 60<<10), []string{bearer, "Content-Type: application/x-tar"}, 201, ""},
		{"an accept pinning 200,000 reviewed files", "POST", "/v1/sessions/s1/accept", pinned(200000), []string{bearer, jsonCT}, 200, ""},
		{"an accept over its limit", "POST", "/v1/sessions/s1/accept", `{"patch":"` + strings.Repeat("x", 65<<20) + `"}`, []string{bearer, jsonCT}, 400, "larger than 64 MiB"},
		{"an import over the limit", "POST", "/v1/snapshots/import", strings.Repeat("t", 70<<10), []string{bearer, "Content-Type: application/x-tar"}, 400, "larger than 64 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, ts, tc.method, tc.path, tc.body, tc.headers...)
			if a.status != tc.want {
				t.Fatalf("answered %d %q, want %d", a.status, a.body, tc.want)
			}
			if tc.says != "" && (a.err.Class != "invalid" || !strings.Contains(a.err.Message, tc.says)) {
				t.Errorf("the error is %+v: want invalid, saying %q", a.err, tc.says)
			}
		})
	}
}

// TestImportStalls: an import whose sender stops sending is failed, not
// waited for while it holds a connection and a snapshot import.
func TestImportStalls(t *testing.T) {
	s, _ := newServer(reading{})
	s.bounds.importIdle = 300 * time.Millisecond
	ts := tcpServer(t, s)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/snapshots/import HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/x-tar\r\nContent-Length: 100000\r\n\r\nsome bytes",
		strings.TrimPrefix(ts.URL, "http://"), testToken)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the engine still waits for a stalled import")
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "stopped sending") {
		t.Errorf("a stalled import: %d %s", resp.StatusCode, b)
	}
}
