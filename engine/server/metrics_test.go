package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/meter"
)

// sampleLine is one sample of Prometheus's text format: a name, labels
// with quoted values, and a number.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*\})? (\S+)$`)

// scrape reads /metrics as a series -> value map, failing on any line that
// is not the text format, or a sample of a family not declared before it.
func scrape(t *testing.T, get func() answer) map[string]float64 {
	t.Helper()
	a := get()
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d %s %q", a.status, a.header.Get("Content-Type"), a.body)
	}
	series := map[string]float64{}
	typed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(a.body, "\n"), "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			typed[name] = typ
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a sample of the text format: %q", line)
		}
		name := m[1]
		family := name
		if typed[name] == "" {
			family = regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(name, "")
		}
		if typed[family] == "" {
			t.Errorf("%s has no # TYPE before it", name)
		}
		v, err := strconv.ParseFloat(m[len(m)-1], 64)
		if err != nil {
			t.Errorf("%q: %v", line, err)
		}
		key := strings.TrimSuffix(line, " "+m[len(m)-1])
		if _, dup := series[key]; dup {
			t.Errorf("%s twice", key)
		}
		series[key] = v
	}
	return series
}

// usageEngine has sessions with known use, and answers diffs and accepts.
type usageEngine struct {
	quiet
	use []engine.SessionUse
}

func (u usageEngine) Usage(context.Context) ([]engine.SessionUse, error) { return u.use, nil }
func (usageEngine) DiffEach(context.Context, string, api.DiffQuery, func(api.FileDiff) error) (api.Diff, error) {
	return api.Diff{}, nil
}
func (usageEngine) AcceptEach(context.Context, string, api.Selection, func(api.Outcome) error) (api.Outcomes, error) {
	return api.Outcomes{}, nil
}

func TestMetrics(t *testing.T) {
	eng := usageEngine{use: []engine.SessionUse{
		{ID: "aaaaaaaaaaaa", State: api.StateRunning, CPU: 1500 * time.Millisecond, Memory: meter.Memory{Current: 40 << 20, Peak: 64 << 20}, EgressOut: 300, EgressIn: 7000},
		{ID: "bbbbbbbbbbbb", State: api.StateRunning, CPU: 0},
		{ID: "cccccccccccc", State: api.StatePaused, CPU: 2 * time.Second},
	}}
	s, _ := newServer(eng)
	ts := tcpServer(t, s)
	bearer := "Authorization: Bearer " + testToken
	get := func() answer { return call(t, ts, "GET", "/metrics", "", bearer) }

	before := scrape(t, get)
	for series, want := range map[string]float64{
		`airlock_sessions{state="running"}`:                                          2,
		`airlock_sessions{state="paused"}`:                                           1,
		`airlock_sessions{state="stopped"}`:                                          0,
		`airlock_sessions{state="failed"}`:                                           0,
		`airlock_sessions{state="creating"}`:                                         0,
		`airlock_session_cpu_seconds_total{session="aaaaaaaaaaaa"}`:                  1.5,
		`airlock_session_cpu_seconds_total{session="bbbbbbbbbbbb"}`:                  0,
		`airlock_session_cpu_seconds_total{session="cccccccccccc"}`:                  2,
		`airlock_session_memory_bytes{session="aaaaaaaaaaaa"}`:                       40 << 20,
		`airlock_session_memory_peak_bytes{session="aaaaaaaaaaaa"}`:                  64 << 20,
		`airlock_session_egress_bytes_total{session="aaaaaaaaaaaa",direction="out"}`: 300,
		`airlock_session_egress_bytes_total{session="aaaaaaaaaaaa",direction="in"}`:  7000,
		`airlock_review_duration_seconds_count{op="diff"}`:                           0,
		`airlock_review_duration_seconds_bucket{op="accept",le="+Inf"}`:              0,
		fmt.Sprintf(`airlock_engine_info{version="",api="%s"}`, api.Version):         1,
	} {
		if got, ok := before[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if _, ok := before[`airlock_session_memory_bytes{session="bbbbbbbbbbbb"}`]; ok {
		t.Error("a session whose memory is unknown shows 0 bytes: want no sample")
	}

	for range 2 {
		if a := call(t, ts, "GET", "/v1/sessions/aaaaaaaaaaaa/diff", "", bearer); a.status != 200 {
			t.Fatalf("diff: %d %s", a.status, a.body)
		}
	}
	if a := call(t, ts, "POST", "/v1/sessions/aaaaaaaaaaaa/accept", "{}", bearer, "Content-Type: application/json"); a.status != 200 {
		t.Fatalf("accept: %d %s", a.status, a.body)
	}
	after := scrape(t, get)
	for op, n := range map[string]float64{"diff": 2, "accept": 1, "patch": 0, "discard": 0} {
		if got := after[`airlock_review_duration_seconds_count{op="`+op+`"}`]; got != n {
			t.Errorf("%s count %v after %v calls", op, got, n)
		}
		if got := after[`airlock_review_duration_seconds_bucket{op="`+op+`",le="+Inf"}`]; got != n {
			t.Errorf("%s +Inf bucket %v after %v calls", op, got, n)
		}
		// Buckets are cumulative.
		prev := 0.0
		for _, le := range latencyBuckets {
			v := after[`airlock_review_duration_seconds_bucket{op="`+op+`",le="`+formatFloat(le)+`"}`]
			if v < prev || v > n {
				t.Errorf("%s bucket le=%v is %v after %v (of %v calls)", op, le, v, prev, n)
			}
			prev = v
		}
	}
}

// /metrics and the profiler answer only with the listener's token.
func TestOpsNeedTheToken(t *testing.T) {
	s, _ := newServer(usageEngine{})
	ts := tcpServer(t, s)
	cookie := login(t, ts)
	for _, tc := range []struct {
		path string
		want string // in the answer with the token
	}{
		{"/metrics", "# TYPE airlock_sessions gauge"},
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile:"},
		{"/debug/pprof/heap?debug=1", "heap profile:"},
		{"/debug/pprof/cmdline", ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			for _, bad := range [][]string{
				nil,
				{"Authorization: Bearer not-the-token"},
				{"Cookie: airlock_token_" + portOf(ts) + "=" + testToken},
			} {
				a := call(t, ts, "GET", tc.path, "", bad...)
				if a.status != 403 || a.err.Class != "forbidden" || tc.want != "" && strings.Contains(a.body, tc.want) {
					t.Errorf("GET %s with %q: %d %q, want refused", tc.path, bad, a.status, a.body)
				}
			}
			for _, good := range []string{"Authorization: Bearer " + testToken, cookie} {
				a := call(t, ts, "GET", tc.path, "", good)
				if a.status != 200 || !strings.Contains(a.body, tc.want) {
					t.Errorf("GET %s with the token: %d, want 200 with %q: %.200q", tc.path, a.status, tc.want, a.body)
				}
			}
		})
	}
	// The unix socket has no token: it serves none of it.
	h := httptest.NewServer(s.Handler())
	defer h.Close()
	if a := call(t, h, "GET", "/metrics", ""); a.status != 404 {
		t.Errorf("/metrics on the socket's handler: %d", a.status)
	}
}

// /metrics of a real engine moves with its sessions: a new session counts
// as running, a busy command's CPU shows, a pause moves it to paused, a
// diff counts in the histogram; the profiler serves the engine's
// goroutines.
func TestMetricsOfARealEngine(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, _ := newServer(e.Engine)
	ts := tcpServer(t, s)
	bearer := "Authorization: Bearer " + testToken
	get := func() answer { return call(t, ts, "GET", "/metrics", "", bearer) }

	proj := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(proj, "README.md"), []byte("# demo\n"), 0o644)
	sess, err := e.Create(ctx, api.CreateRequest{Project: proj, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	cpu := `airlock_session_cpu_seconds_total{session="` + sess.ID + `"}`
	first := scrape(t, get)
	if first[`airlock_sessions{state="running"}`] != 1 || first[`airlock_sessions{state="paused"}`] != 0 {
		t.Errorf("one running session: %v running, %v paused", first[`airlock_sessions{state="running"}`], first[`airlock_sessions{state="paused"}`])
	}
	if _, ok := first[cpu]; !ok {
		t.Fatalf("no %s", cpu)
	}
	code, err := e.Exec(ctx, sess.ID, api.ExecRequest{Argv: []string{"sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"}}, engine.ExecIO{})
	if err != nil || code != 0 {
		t.Fatalf("busy command: %d, %v", code, err)
	}
	if a := call(t, ts, "GET", "/v1/sessions/"+sess.ID+"/diff", "", bearer); a.status != 200 {
		t.Fatalf("diff: %d %s", a.status, a.body)
	}
	if err := e.Pause(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	second := scrape(t, get)
	if second[cpu] <= 0 || second[cpu] <= first[cpu] {
		t.Errorf("CPU seconds %v after a busy command, %v before", second[cpu], first[cpu])
	}
	if second[`airlock_sessions{state="running"}`] != 0 || second[`airlock_sessions{state="paused"}`] != 1 {
		t.Errorf("after a pause: %v running, %v paused", second[`airlock_sessions{state="running"}`], second[`airlock_sessions{state="paused"}`])
	}
	if n := second[`airlock_review_duration_seconds_count{op="diff"}`]; n != 1 {
		t.Errorf("%v diffs counted after one", n)
	}
	if second[`airlock_session_memory_peak_bytes{session="`+sess.ID+`"}`] <= 0 {
		t.Errorf("no memory peak for the session")
	}
	t.Logf("the session used %.3f CPU seconds; memory peak %v bytes", second[cpu], second[`airlock_session_memory_peak_bytes{session="`+sess.ID+`"}`])
	if a := call(t, ts, "GET", "/debug/pprof/goroutine?debug=1", "", bearer); a.status != 200 || !strings.Contains(a.body, "watchIdle") {
		t.Errorf("the engine's goroutines: %d, want the idle watcher among them: %.300q", a.status, a.body)
	}
}
