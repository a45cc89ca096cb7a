package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/server/servertest"
	"github.com/airlock/airlock/errdefs"
)

var _ Engine = (*servertest.Engine)(nil)
var _ Builder = servertest.Builder{}

// fakeServer serves the API over servertest's fake engine.
func fakeServer() (http.Handler, *servertest.Engine) {
	fake := &servertest.Engine{}
	s, _ := newServer(fake)
	s.images = servertest.Builder{}
	return s.Handler(), fake
}

func do(h http.Handler, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, path, nil)
	} else {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
	}
	for _, hd := range headers {
		k, v, _ := strings.Cut(hd, ": ")
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// A route of the API, as a request that succeeds against the fake.
type routeCase struct {
	method, path, body string
	status             int
	contentType        string
}

var routeCases = []routeCase{
	{"GET", "/v1/version", "", 200, "application/json"},
	{"GET", "/v1/events", "", 200, "text/event-stream"},
	{"POST", "/v1/ui", "", 200, "application/json"},
	{"GET", "/v1/sessions", "", 200, "application/json"},
	{"POST", "/v1/sessions", `{"project":"/src/p"}`, 201, "application/json"},
	{"GET", "/v1/sessions/s1", "", 200, "application/json"},
	{"DELETE", "/v1/sessions/s1", "", 204, ""},
	{"GET", "/v1/sessions/s1/diff", "", 200, "application/json"},
	{"GET", "/v1/sessions/s1/patch", "", 200, "text/x-diff"},
	{"POST", "/v1/sessions/s1/accept", `{"paths":["a"]}`, 200, "application/json"},
	{"POST", "/v1/sessions/s1/discard", `{}`, 200, "application/json"},
	{"GET", "/v1/sessions/s1/commands", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/exec", `{"argv":["true"]}`, 400, "application/json"}, // no Upgrade: see TestUpgradeNeeded
	{"POST", "/v1/run", `{"create":{"project":"/p"},"exec":{"argv":["true"]}}`, 400, "application/json"},
	{"GET", "/v1/sessions/s1/terminal", "", 426, "text/plain; charset=utf-8"}, // a WebSocket route asked without one
	{"POST", "/v1/sessions/s1/agent", `{"prompt":"p"}`, 200, "application/x-ndjson"},
	{"GET", "/v1/sessions/s1/turns", "", 200, "application/json"},
	{"GET", "/v1/sessions/s1/events", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/policy", `{"allow":["example.com"]}`, 200, "application/json"},
	{"POST", "/v1/sessions/s1/policy/save", ``, 200, "application/json"},
	{"GET", "/v1/sessions/s1/net", "", 200, "application/json"},
	{"GET", "/v1/net/pending", "", 200, "application/json"},
	{"POST", "/v1/net/decide", `{"id":1,"answer":"allow-once"}`, 204, ""},
	{"POST", "/v1/sessions/s1/pause", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/resume", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/hibernate", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/wake", "", 200, "application/json"},
	{"GET", "/v1/sessions/s1/meter", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/budget", `{"cost":1}`, 200, "application/json"},
	{"POST", "/v1/sessions/s1/limits", `{"cpus":2}`, 200, "application/json"},
	{"GET", "/v1/sessions/s1/lifecycle", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/ports", `{"port":5173}`, 201, "application/json"},
	{"GET", "/v1/sessions/s1/ports", "", 200, "application/json"},
	{"DELETE", "/v1/sessions/s1/ports/5173", "", 204, ""},
	{"GET", "/v1/sessions/s1/ports/listening", "", 200, "application/json"},
	{"GET", "/v1/sessions/s1/checkpoints", "", 200, "application/json"},
	{"GET", "/v1/sessions/s1/checkpoints/diff", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/undo", `{"turn":1}`, 200, "application/json"},
	{"GET", "/v1/sessions/s1/blame", "", 200, "application/json"},
	{"POST", "/v1/sessions/s1/fork", `{"turn":1,"n":2}`, 201, "application/json"},
	{"POST", "/v1/sessions/s1/snapshots", `{"name":"n"}`, 201, "application/json"},
	{"GET", "/v1/snapshots", "", 200, "application/json"},
	{"POST", "/v1/snapshots/import", "tar bytes", 201, "application/json"},
	{"GET", "/v1/snapshots/snap1", "", 200, "application/json"},
	{"DELETE", "/v1/snapshots/snap1", "", 204, ""},
	{"POST", "/v1/snapshots/snap1/restore", `{"n":1}`, 201, "application/json"},
	{"GET", "/v1/snapshots/snap1/export", "", 503, "application/json"}, // the fake exports nothing
	{"GET", "/v1/settings", "", 200, "application/json"},
	{"PUT", "/v1/settings", `{"image":"airlock/base"}`, 200, "application/json"},
	{"GET", "/v1/secrets", "", 200, "application/json"},
	{"PUT", "/v1/secrets/KEY", `{"value":"v"}`, 204, ""},
	{"DELETE", "/v1/secrets/KEY", "", 204, ""},
	{"GET", "/v1/images", "", 200, "application/json"},
	{"GET", "/v1/schedules", "", 200, "application/json"},
	{"POST", "/v1/schedules", `{"name":"nightly","cron":"@daily","project":"/p","command":["true"]}`, 201, "application/json"},
	{"GET", "/v1/schedules/KEY", "", 200, "application/json"},
	{"DELETE", "/v1/schedules/KEY", "", 204, ""},
	{"POST", "/v1/schedules/KEY/run", `{"wait":true}`, 200, "application/json"},
	{"GET", "/v1/schedules/KEY/runs", "", 200, "application/json"},
	{"POST", "/v1/images/build", `{"kind":"tiny","name":"t"}`, 200, "application/x-ndjson"},
}

// TestEveryRouteAnswers: each route answers its status and content type,
// and this table has every route server.go registers.
func TestEveryRouteAnswers(t *testing.T) {
	h, _ := fakeServer()
	tested := map[string]bool{}
	for _, rc := range routeCases {
		w := do(h, rc.method, rc.path, rc.body)
		if w.Code != rc.status || w.Header().Get("Content-Type") != rc.contentType {
			t.Errorf("%s %s: %d %q, want %d %q: %s", rc.method, rc.path, w.Code, w.Header().Get("Content-Type"), rc.status, rc.contentType, w.Body)
		}
		tested[rc.method+" "+rc.path] = true
	}
	src, err := os.ReadFile("server.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`HandleFunc\("(\w+) "\+p\+"([^"]+)"`)
	seen := regexp.MustCompile(`\{\w+\}`)
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		path := seen.ReplaceAllStringFunc(m[2], func(v string) string {
			return map[string]string{"{id}": "s1", "{ref}": "snap1", "{name}": "KEY", "{port}": "5173"}[v]
		})
		if !tested[m[1]+" /v1"+path] {
			t.Errorf("route %s %s has no case in routeCases", m[1], m[2])
		}
	}
}

// TestStatusOfEveryClass: each error class has its status, and the body
// names the class; anything unclassed is a 500.
func TestStatusOfEveryClass(t *testing.T) {
	want := map[errdefs.Class]int{errdefs.Invalid: 400, errdefs.NotFound: 404, errdefs.Conflict: 409,
		errdefs.Unavailable: 503, errdefs.Forbidden: 403, errdefs.Internal: 500, "something else": 500}
	for c, status := range want {
		if got := Status(c); got != status {
			t.Errorf("Status(%s) = %d, want %d", c, got, status)
		}
	}
	h, _ := fakeServer()
	for _, c := range servertest.Classes {
		w := do(h, "GET", "/v1/sessions/"+string(c), "")
		if w.Code != want[c] || !strings.Contains(w.Body.String(), `"class":"`+string(c)+`"`) {
			t.Errorf("a %s error: %d %s", c, w.Code, w.Body)
		}
	}
}

// TestBadJSON: a route that reads JSON refuses a body that is not one
// JSON value of its request's fields, with 400 and a sentence, before
// the engine hears of it.
func TestBadJSON(t *testing.T) {
	for _, rc := range routeCases {
		if rc.body == "" || !strings.HasPrefix(rc.body, "{") {
			continue
		}
		for _, body := range []string{`{"project":`, `{"no_such_field":1}`, `{} {}`, `[1,2]`, `"text"`} {
			h, fake := fakeServer()
			w := do(h, rc.method, rc.path, body, "Upgrade: "+api.UpgradeProtocol)
			if w.Code != 400 || !strings.Contains(w.Body.String(), `"class":"invalid"`) || !strings.Contains(w.Body.String(), "bad request body") {
				t.Errorf("%s %s with %s: %d %s", rc.method, rc.path, body, w.Code, w.Body)
			}
			if calls := fake.Calls(); len(calls) > 0 {
				t.Errorf("%s %s with %s: the engine was called: %+v", rc.method, rc.path, body, calls)
			}
		}
	}
}

// TestUnknownRoute: a path or a method the API lacks is a 404 that names
// it and where the endpoints are documented.
func TestUnknownRoute(t *testing.T) {
	h, _ := fakeServer()
	for _, r := range [][2]string{{"GET", "/v1/nothing"}, {"GET", "/v2/sessions"}, {"GET", "/"}, {"PATCH", "/v1/sessions/s1"}, {"DELETE", "/v1/version"}} {
		w := do(h, r[0], r[1], "")
		if w.Code != 404 || !strings.Contains(w.Body.String(), "no endpoint "+r[0]+" "+r[1]) || !strings.Contains(w.Body.String(), "docs/API.md") {
			t.Errorf("%s %s: %d %s", r[0], r[1], w.Code, w.Body)
		}
	}
}

// TestUnknownSession: a session the engine lacks is a 404 on every route
// that names one, the streaming ones included, before any stream starts.
func TestUnknownSession(t *testing.T) {
	h, _ := fakeServer()
	for _, rc := range routeCases {
		if !strings.Contains(rc.path, "/s1") && !strings.Contains(rc.path, "/snap1") && !strings.Contains(rc.path, "/KEY") {
			continue
		}
		path := strings.NewReplacer("/s1", "/"+servertest.Gone, "/snap1", "/"+servertest.Gone, "/KEY", "/"+servertest.Gone).Replace(rc.path)
		w := do(h, rc.method, path, rc.body, "Upgrade: "+api.UpgradeProtocol)
		if w.Code != 404 || !strings.Contains(w.Body.String(), `"class":"not_found"`) {
			t.Errorf("%s %s: %d %s", rc.method, path, w.Code, w.Body)
		}
	}
}

// TestUpgradeNeeded: exec and run say what header they need.
func TestUpgradeNeeded(t *testing.T) {
	h, _ := fakeServer()
	for _, p := range []string{"/v1/sessions/s1/exec", "/v1/run"} {
		w := do(h, "POST", p, `{}`)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "Upgrade: "+api.UpgradeProtocol) {
			t.Errorf("%s without Upgrade: %d %s", p, w.Code, w.Body)
		}
	}
}
