package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/server"
	"github.com/airlock/airlock/engine/server/servertest"
	"github.com/airlock/airlock/errdefs"
)

// statuses keeps the HTTP status of the engine's last answer (101 for an
// upgraded connection).
type statuses struct {
	mu   sync.Mutex
	last int
}

func (s *statuses) set(code int) {
	s.mu.Lock()
	s.last = code
	s.mu.Unlock()
}

func (s *statuses) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// recorded is a ResponseWriter that tells statuses what it answers.
type recorded struct {
	http.ResponseWriter
	st    *statuses
	wrote bool
}

func (r *recorded) WriteHeader(code int) {
	if !r.wrote {
		r.wrote = true
		r.st.set(code)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorded) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.ResponseWriter.Write(b)
}

func (r *recorded) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.wrote = true
	r.st.set(http.StatusSwitchingProtocols)
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

func (r *recorded) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// served runs the engine's API over a fake engine on a unix socket, as
// `airlock serve` does, and returns the real client of it.
func served(t *testing.T) (*client.Client, *servertest.Engine, *statuses) {
	t.Helper()
	fake := &servertest.Engine{}
	s := server.New(fake, servertest.Builder{}, nil, api.VersionInfo{Engine: "test", PID: 42})
	s.StartUI = func() (string, error) { return "http://127.0.0.1:1/?token=x", nil }
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := server.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	st := &statuses{}
	h := s.Handler()
	hs := server.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&recorded{ResponseWriter: w, st: st}, r)
	}), nil)
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return client.New(sock), fake, st
}

// execResult is what a command run through the client gave.
type execResult struct {
	Code           int
	Stdout, Stderr string
	Started        api.ExecStarted
	Session        string
}

// route is one endpoint as a client method calls it. name is what the
// call names (a session, snapshot, secret, project or image): the fake
// fails the call when it is an error class or servertest.Gone.
type route struct {
	what   string
	call   func(ctx context.Context, c *client.Client, name string) (any, error)
	want   func(name string) any // what the client returns
	status int
	engine func(name string) servertest.Call // what the engine got (nil: not checked)
}

var selection = api.Selection{Paths: []string{"hello.txt"}, Digests: map[string]string{"f1": "sha256:ff"}}

func outcome() api.Outcomes {
	return api.Outcomes{Outcomes: []api.Outcome{{Path: "hello.txt", Kind: api.KindModified, Applied: true, Digest: "sha256:ff"}}}
}

func named(method string, req any) func(string) servertest.Call {
	return func(name string) servertest.Call { return servertest.Call{Method: method, ID: name, Req: req} }
}

// routes are every route a client method reaches, with a name.
var routes = []route{
	{"GET /sessions/{id}", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Session(ctx, id) },
		func(id string) any { return servertest.Session(id) }, 200, named("Get", nil)},
	{"POST /sessions", func(ctx context.Context, c *client.Client, p string) (any, error) {
		return c.Create(ctx, api.CreateRequest{Project: p, Image: "airlock/tiny", Env: []string{"A=1"}})
	}, func(p string) any { s := servertest.Session("new"); s.Project = p; return s }, 201,
		func(p string) servertest.Call {
			return servertest.Call{Method: "Create", ID: p, Req: api.CreateRequest{Project: p, Image: "airlock/tiny", Env: []string{"A=1"}}}
		}},
	{"DELETE /sessions/{id}", func(ctx context.Context, c *client.Client, id string) (any, error) { return nil, c.Remove(ctx, id) },
		func(string) any { return nil }, 204, named("Remove", nil)},
	{"GET /sessions/{id}/diff", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Diff(ctx, id, []string{"hello.txt"})
	}, func(id string) any {
		f, d := servertest.Diff(id)
		d.Files = []api.FileDiff{f}
		d.Stats = api.Stats(d.Files)
		return d
	}, 200, named("DiffEach", api.DiffQuery{Paths: []string{"hello.txt"}})},
	{"GET /sessions/{id}/diff?stat=1", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.DiffStat(ctx, id, nil)
	}, func(id string) any {
		f, d := servertest.Diff(id)
		d.Stats = api.Stats([]api.FileDiff{f})
		return d
	}, 200, named("DiffStatLines", api.DiffQuery{})},
	{"GET /sessions/{id}/patch", func(ctx context.Context, c *client.Client, id string) (any, error) {
		var b bytes.Buffer
		err := c.Patch(ctx, id, []string{"a", "b"}, &b)
		return b.String(), err
	}, func(string) any { return servertest.Patch }, 200, named("Patch", []string{"a", "b"})},
	{"POST /sessions/{id}/accept", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Accept(ctx, id, selection)
	}, func(string) any { return outcome() }, 200, named("Accept", selection)},
	{"POST /sessions/{id}/discard", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Discard(ctx, id, api.Selection{})
	}, func(string) any { return api.Outcomes{Outcomes: []api.Outcome{}} }, 200, named("Discard", api.Selection{})},
	{"GET /sessions/{id}/commands", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.CommandsSince(ctx, id, 2, true)
	}, func(id string) any {
		return []api.Command{{ID: 2, Session: id, Argv: []string{"sleep", "9"}, Started: servertest.When, State: "running"}}
	}, 200, named("Commands", true)},
	{"POST /sessions/{id}/exec", func(ctx context.Context, c *client.Client, id string) (any, error) {
		var res execResult
		var out, errw bytes.Buffer
		sio := client.ExecIO{Stdin: strings.NewReader("in\n"), Stdout: &out, Stderr: &errw, Started: func(s api.ExecStarted) { res.Started = s }}
		code, err := c.Exec(ctx, id, api.ExecRequest{Argv: []string{"cat"}, Stdin: true, TTY: true}, sio, func(x *client.Exec) { x.Resize(100, 30) })
		res.Code, res.Stdout, res.Stderr = code, out.String(), errw.String()
		return res, err
	}, func(id string) any {
		return execResult{Code: 3, Stdout: "resized to 100x30\nin\nout\n", Stderr: "err\n", Started: api.ExecStarted{Session: id, Command: 7}}
	}, 101, named("Exec", api.ExecRequest{Argv: []string{"cat"}, Stdin: true, TTY: true})},
	{"POST /run", func(ctx context.Context, c *client.Client, p string) (any, error) {
		var res execResult
		var out, errw bytes.Buffer
		sio := client.ExecIO{Stdout: &out, Stderr: &errw, Started: func(s api.ExecStarted) { res.Started = s },
			Session: func(s api.Session) { res.Session = s.ID + " " + s.Project }}
		code, err := c.Run(ctx, api.RunRequest{Create: api.CreateRequest{Project: p}, Exec: api.ExecRequest{Argv: []string{"true"}}}, sio, nil)
		res.Code, res.Stdout, res.Stderr = code, out.String(), errw.String()
		return res, err
	}, func(p string) any {
		return execResult{Code: 3, Stdout: "out\n", Stderr: "err\n", Started: api.ExecStarted{Session: "new", Command: 7}, Session: "new " + p}
	}, 101, named("Run", api.ExecRequest{Argv: []string{"true"}})},
	{"POST /sessions/{id}/agent", func(ctx context.Context, c *client.Client, id string) (any, error) {
		var evs []api.Event
		turn, err := c.Agent(ctx, id, api.AgentRequest{Agent: "claude", Prompt: "p"}, func(ev api.Event) { evs = append(evs, ev) })
		return []any{evs, turn}, err
	}, func(id string) any { return []any{servertest.Events(), servertest.Turn(id)} }, 200,
		named("Agent", api.AgentRequest{Agent: "claude", Prompt: "p"})},
	{"GET /sessions/{id}/turns", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Turns(ctx, id) },
		func(id string) any { return []api.Turn{servertest.Turn(id)} }, 200, named("Turns", nil)},
	{"GET /sessions/{id}/events", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Events(ctx, id, 2) },
		func(string) any { return servertest.Events() }, 200, named("Events", 2)},
	{"POST /sessions/{id}/policy", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Policy(ctx, id, api.PolicyChange{Allow: []string{"example.com"}})
	}, func(string) any { return api.EgressPolicy{Mode: "custom", Allow: []string{"example.com"}} }, 200,
		named("Policy", api.PolicyChange{Allow: []string{"example.com"}})},
	{"POST /sessions/{id}/policy/save", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.SavePolicy(ctx, id) },
		func(string) any {
			return api.SavedPolicy{File: "/project/.airlock/policy.yaml", Policy: api.EgressPolicy{Mode: "ask"}}
		}, 200, named("SavePolicy", nil)},
	{"GET /sessions/{id}/net", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.NetLog(ctx, id, true, 5) },
		func(string) any {
			return []api.EgressEntry{{ID: 1, Time: servertest.When, Kind: "connect", Host: "example.com", Port: 443, Rule: "deny-all"}}
		}, 200, named("EgressLog", [2]any{true, 5})},
	{"POST /sessions/{id}/pause", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Pause(ctx, id) },
		func(id string) any { return servertest.Session(id) }, 200, named("Get", nil)},
	{"POST /sessions/{id}/resume", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Resume(ctx, id) },
		func(id string) any { return servertest.Session(id) }, 200, named("Get", nil)},
	{"POST /sessions/{id}/hibernate", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Hibernate(ctx, id, api.HibernateRequest{KeepProcesses: true})
	},
		func(id string) any {
			s := servertest.Session(id)
			s.State, s.ContainerID = api.StateHibernated, ""
			s.Hibernation = &api.Hibernation{Checkpoint: 1, Time: servertest.When, DiskBytes: 4096, Reason: "asked", Processes: true}
			return s
		}, 200, named("Hibernate", api.HibernateRequest{KeepProcesses: true})},
	{"POST /sessions/{id}/wake", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Wake(ctx, id) },
		func(id string) any { return servertest.Session(id) }, 200, named("Wake", nil)},
	{"GET /sessions/{id}/meter", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Meter(ctx, id) },
		func(id string) any {
			return api.Meter{Session: id, CPUSeconds: 1.5, MemoryPeak: 1 << 20, CostUSD: 0.01, Rate: 0.1,
				History: []api.CPUSample{{Time: servertest.When, CPUSeconds: 1.5}}}
		}, 200, named("Meter", nil)},
	{"GET /sessions/{id}/lifecycle", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Lifecycle(ctx, id) },
		func(string) any { return []api.LifecycleEvent{{Time: servertest.When, Kind: "paused", Reason: "idle"}} }, 200, named("Lifecycle", nil)},
	{"POST /sessions/{id}/budget", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.SetBudgets(ctx, id, api.Budgets{Cost: &cost})
	}, func(id string) any { return servertest.Session(id) }, 200, named("SetBudgets", api.Budgets{Cost: &cost})},
	{"POST /sessions/{id}/limits", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.SetLimits(ctx, id, api.Limits{CPUs: 4})
	}, func(id string) any { s := servertest.Session(id); s.Limits = api.Limits{CPUs: 4}; return s }, 200, named("SetLimits", api.Limits{CPUs: 4})},
	{"POST /sessions/{id}/ports", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.OpenPort(ctx, id, api.PortRequest{Port: 5173})
	}, func(id string) any { return servertest.Port(id, 5173) }, 201, named("OpenPort", api.PortRequest{Port: 5173})},
	{"GET /sessions/{id}/ports", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Ports(ctx, id) },
		func(id string) any { return []api.Port{servertest.Port(id, 5173)} }, 200, named("Ports", nil)},
	{"GET /sessions/{id}/checkpoints", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.Checkpoints(ctx, id) },
		func(id string) any { l, _ := new(servertest.Engine).Checkpoints(context.Background(), id); return l }, 200, named("Checkpoints", nil)},
	{"GET /sessions/{id}/checkpoints/diff", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.CheckpointDiff(ctx, id, api.CheckpointDiffQuery{From: 1, To: 3, ToCheckpoint: 9})
	}, func(id string) any { return api.Diff{Session: id, Files: []api.FileDiff{}, Stats: []api.Stat{}} }, 200,
		named("CheckpointDiff", api.CheckpointDiffQuery{From: 1, To: 3, ToCheckpoint: 9})},
	{"POST /sessions/{id}/undo", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Undo(ctx, id, api.UndoRequest{Turn: 2})
	}, func(id string) any {
		u, _ := new(servertest.Engine).Undo(context.Background(), id, api.UndoRequest{})
		return u
	}, 200,
		named("Undo", api.UndoRequest{Turn: 2})},
	{"GET /sessions/{id}/blame", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Blame(ctx, id, []string{"hello.txt"})
	}, func(id string) any { b, _ := new(servertest.Engine).Blame(context.Background(), id, nil); return b }, 200,
		named("Blame", []string{"hello.txt"})},
	{"POST /sessions/{id}/fork", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Fork(ctx, id, api.ForkRequest{Turn: 1, N: 3})
	}, func(id string) any { return api.Restored{Sessions: []api.Session{servertest.Session("f1")}} }, 201,
		named("Fork", api.ForkRequest{Turn: 1, N: 3})},
	{"DELETE /sessions/{id}/ports/{port}", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return nil, c.ClosePort(ctx, id, 5173)
	}, func(string) any { return nil }, 204, named("ClosePort", 5173)},
	{"GET /sessions/{id}/ports/listening", func(ctx context.Context, c *client.Client, id string) (any, error) { return c.ListeningPorts(ctx, id) },
		func(string) any { return []api.ListeningPort{{Port: 8123, Addresses: []string{"0.0.0.0"}}} }, 200, named("ListeningPorts", nil)},
	{"POST /sessions/{id}/snapshots", func(ctx context.Context, c *client.Client, id string) (any, error) {
		return c.Snapshot(ctx, id, api.SnapshotRequest{Name: "before"})
	}, func(id string) any { s := servertest.Snapshot("snap1"); s.Session, s.Name = id, "before"; return s }, 201,
		named("Snapshot", api.SnapshotRequest{Name: "before"})},
	{"GET /snapshots/{ref}", func(ctx context.Context, c *client.Client, ref string) (any, error) { return c.GetSnapshot(ctx, ref) },
		func(ref string) any { return servertest.Snapshot(ref) }, 200, named("GetSnapshot", nil)},
	{"DELETE /snapshots/{ref}", func(ctx context.Context, c *client.Client, ref string) (any, error) {
		return nil, c.RemoveSnapshot(ctx, ref)
	},
		func(string) any { return nil }, 204, named("RemoveSnapshot", nil)},
	{"POST /snapshots/{ref}/restore", func(ctx context.Context, c *client.Client, ref string) (any, error) {
		return c.Restore(ctx, ref, api.RestoreRequest{N: 2})
	}, func(string) any {
		return api.Restored{Sessions: []api.Session{servertest.Session("r0"), servertest.Session("r1")}, Warnings: []string{"the image was rebuilt"}}
	}, 201, named("Restore", api.RestoreRequest{N: 2})},
	{"POST /snapshots/import", func(ctx context.Context, c *client.Client, name string) (any, error) {
		return c.ImportSnapshot(ctx, strings.NewReader(name))
	}, func(name string) any {
		return api.Imported{Snapshot: servertest.Snapshot(name), Warnings: []string{"imported"}}
	}, 201, named("Import", nil)},
	{"PUT /settings", func(ctx context.Context, c *client.Client, image string) (any, error) {
		return c.SetSettings(ctx, api.Settings{Image: image})
	}, func(image string) any { return api.Settings{Image: image} }, 200, named("SetSettings", api.Settings{Image: image0})},
	{"PUT /secrets/{name}", func(ctx context.Context, c *client.Client, name string) (any, error) {
		return nil, c.SetSecret(ctx, name, "v4lue")
	}, func(string) any { return nil }, 204, named("SetSecret", "v4lue")},
	{"DELETE /secrets/{name}", func(ctx context.Context, c *client.Client, name string) (any, error) {
		return nil, c.DeleteSecret(ctx, name)
	},
		func(string) any { return nil }, 204, named("DeleteSecret", nil)},
	{"POST /schedules", func(ctx context.Context, c *client.Client, name string) (any, error) {
		return c.AddSchedule(ctx, scheduleNamed(name))
	}, func(name string) any { s := scheduleNamed(name); s.Created = servertest.When; return s }, 201,
		func(name string) servertest.Call {
			return servertest.Call{Method: "AddSchedule", ID: name, Req: scheduleNamed(name)}
		}},
	{"GET /schedules/{name}", func(ctx context.Context, c *client.Client, name string) (any, error) { return c.Schedule(ctx, name) },
		func(name string) any { return servertest.Schedule(name) }, 200, named("Schedule", nil)},
	{"DELETE /schedules/{name}", func(ctx context.Context, c *client.Client, name string) (any, error) {
		return nil, c.RemoveSchedule(ctx, name)
	}, func(string) any { return nil }, 204, named("RemoveSchedule", nil)},
	{"POST /schedules/{name}/run", func(ctx context.Context, c *client.Client, name string) (any, error) {
		return c.RunSchedule(ctx, name, api.ScheduleRunRequest{Wait: true})
	}, func(name string) any { return servertest.ScheduleRun(name) }, 200, named("RunSchedule", api.ScheduleRunRequest{Wait: true})},
	{"GET /schedules/{name}/runs", func(ctx context.Context, c *client.Client, name string) (any, error) {
		return c.ScheduleRuns(ctx, name)
	},
		func(name string) any { return []api.ScheduleRun{servertest.ScheduleRun(name)} }, 200, named("ScheduleRuns", nil)},
	{"POST /images/build", func(ctx context.Context, c *client.Client, name string) (any, error) {
		var stages []string
		img, err := c.BuildImage(ctx, api.ImageBuildRequest{Kind: "tiny", Name: name}, func(p api.Progress) { stages = append(stages, p.Stage) })
		return []any{stages, img}, err
	}, func(name string) any {
		return []any{[]string{"rootfs", "done"}, servertest.Image(api.ImageBuildRequest{Kind: "tiny", Name: name})}
	}, 200, nil},
	{"GET (raw) /sessions/{id}", func(ctx context.Context, c *client.Client, id string) (any, error) {
		body, err := c.Raw(ctx, "GET", "/sessions/"+id+"?x=1", nil)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		var s api.Session
		return s, json.NewDecoder(body).Decode(&s)
	}, func(id string) any { return servertest.Session(id) }, 200, named("Get", nil)},
}

var cost = 2.5

// scheduleNamed is the schedule the client adds under a name.
func scheduleNamed(name string) api.Schedule {
	return api.Schedule{Name: name, Cron: "@daily", Project: "/src/app", Agent: "claude", Prompt: "review yesterday's commits", CostBudget: 0.5, OnDone: "true"}
}

// image0 is the name TestEveryRoute gives each call.
const image0 = "s1"

// routesUnnamed are the routes that name nothing.
var routesUnnamed = []struct {
	what   string
	call   func(ctx context.Context, c *client.Client) (any, error)
	want   any
	status int
}{
	{"GET /version", func(ctx context.Context, c *client.Client) (any, error) { return c.Ping(ctx) },
		api.VersionInfo{API: api.Version, Level: api.Level, Engine: "test", PID: 42}, 200},
	{"GET /sessions", func(ctx context.Context, c *client.Client) (any, error) { return c.Sessions(ctx) },
		[]api.Session{servertest.Session("s1"), servertest.Session("s2")}, 200},
	{"GET /schedules", func(ctx context.Context, c *client.Client) (any, error) { return c.Schedules(ctx) },
		[]api.Schedule{servertest.Schedule("nightly")}, 200},
	{"GET /snapshots", func(ctx context.Context, c *client.Client) (any, error) { return c.Snapshots(ctx) },
		[]api.Snapshot{servertest.Snapshot("snap1")}, 200},
	{"GET /images", func(ctx context.Context, c *client.Client) (any, error) { return c.Images(ctx) },
		[]api.Image{{Name: "airlock/tiny", ID: "sha256:11", Size: 1 << 20, Created: servertest.When}}, 200},
	{"GET /settings", func(ctx context.Context, c *client.Client) (any, error) { return c.Settings(ctx) },
		api.Settings{Image: "airlock/base", IdleTimeout: 60e9, Limits: api.Limits{CPUs: 2}, Egress: api.EgressPolicy{Mode: "allow-all"}}, 200},
	{"GET /secrets", func(ctx context.Context, c *client.Client) (any, error) { return c.Secrets(ctx) },
		[]api.Secret{{Name: "ANTHROPIC_API_KEY", Updated: servertest.When}}, 200},
	{"POST /ui", func(ctx context.Context, c *client.Client) (any, error) { return c.StartUI(ctx) },
		"http://127.0.0.1:1/?token=x", 200},
}

// sameJSON compares as a client's user sees a value: its JSON.
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestEveryRoute: each client method reaches its route, the engine gets
// what the client sent, and the client returns what the engine answered,
// with the route's status.
func TestEveryRoute(t *testing.T) {
	c, fake, st := served(t)
	ctx := context.Background()
	for _, r := range routes {
		got, err := r.call(ctx, c, image0)
		if err != nil {
			t.Errorf("%s: %v", r.what, err)
			continue
		}
		if want := r.want(image0); !sameJSON(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Errorf("%s answered\n%s\nwant\n%s", r.what, g, w)
		}
		if st.get() != r.status {
			t.Errorf("%s: status %d, want %d", r.what, st.get(), r.status)
		}
		if r.engine != nil {
			if got, want := fake.Last(), r.engine(image0); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: the engine got %#v, want %#v", r.what, got, want)
			}
		}
	}
	for _, r := range routesUnnamed {
		got, err := r.call(ctx, c)
		if err != nil {
			t.Errorf("%s: %v", r.what, err)
			continue
		}
		if !sameJSON(got, r.want) {
			t.Errorf("%s answered %+v, want %+v", r.what, got, r.want)
		}
		if st.get() != r.status {
			t.Errorf("%s: status %d, want %d", r.what, st.get(), r.status)
		}
	}
}

// TestErrorClassesRoundTrip: an engine error's class becomes the HTTP
// status server.Status gives it, and the client's error has the class
// and the message again, on every route, streamed or not.
func TestErrorClassesRoundTrip(t *testing.T) {
	c, _, st := served(t)
	ctx := context.Background()
	for _, class := range servertest.Classes {
		for _, r := range routes {
			_, err := r.call(ctx, c, string(class))
			if errdefs.ClassOf(err) != class || !strings.Contains(err.Error(), "asked to fail as "+string(class)) {
				t.Errorf("%s failing as %s: the client got %v (class %s)", r.what, class, err, errdefs.ClassOf(err))
			}
			if r.what == "POST /images/build" {
				continue // the build failed after its first line: 200
			}
			if st.get() != server.Status(class) {
				t.Errorf("%s failing as %s: status %d, want %d", r.what, class, st.get(), server.Status(class))
			}
		}
	}
}

// TestUnknownSession: every route that names a session, snapshot or
// secret the engine lacks answers 404, and the client's error is
// NotFound with the engine's sentence.
func TestUnknownSession(t *testing.T) {
	c, _, st := served(t)
	ctx := context.Background()
	for _, r := range routes {
		_, err := r.call(ctx, c, servertest.Gone)
		if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "`airlock ls` lists them") {
			t.Errorf("%s of an unknown name: %v (class %s)", r.what, err, errdefs.ClassOf(err))
		}
		if r.what != "POST /images/build" && st.get() != http.StatusNotFound {
			t.Errorf("%s of an unknown name: status %d", r.what, st.get())
		}
	}
}

// An export the engine cannot make is an error before any byte, never an
// empty archive.
func TestExportFailsBeforeTheArchive(t *testing.T) {
	c, _, st := served(t)
	rc, err := c.ExportSnapshot(context.Background(), "snap1", false)
	if err == nil {
		b, _ := io.ReadAll(rc)
		t.Fatalf("an export that failed gave %d bytes", len(b))
	}
	if !errdefs.IsUnavailable(err) || st.get() != http.StatusServiceUnavailable {
		t.Errorf("export: %v (class %s), status %d", err, errdefs.ClassOf(err), st.get())
	}
	if _, err := c.ExportSnapshot(context.Background(), servertest.Gone, true); !errdefs.IsNotFound(err) {
		t.Errorf("export of an unknown snapshot: %v", err)
	}
}

// A route the engine does not have is NotFound, naming what was asked.
func TestUnknownRoute(t *testing.T) {
	c, _, st := served(t)
	_, err := c.Raw(context.Background(), "GET", "/sessions/s1/nothing", nil)
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "no endpoint GET /v1/sessions/s1/nothing") || st.get() != 404 {
		t.Errorf("unknown route: %v (class %s), status %d", err, errdefs.ClassOf(err), st.get())
	}
	if _, err := c.Raw(context.Background(), "GET", "/sessions?%zz", nil); !errdefs.IsInvalid(err) {
		t.Errorf("a bad query: %v", err)
	}
}

// With no engine on the socket every call is Unavailable and says how to
// start one.
func TestNoEngine(t *testing.T) {
	c := client.New(filepath.Join(t.TempDir(), "none.sock"))
	ctx := context.Background()
	if _, err := c.Ping(ctx); !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "airlock serve") {
		t.Errorf("ping: %v", err)
	}
	if _, err := c.Exec(ctx, "s1", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{}, nil); !errdefs.IsUnavailable(err) {
		t.Errorf("exec: %v", err)
	}
}
