// Package servertest is a fake of the engine the API serves
// (server.Engine) and of its image builder, for the unit tests of
// engine/server and engine/client: every call answers canned values and is
// recorded, without Docker, mounts or a store.
package servertest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/errdefs"
)

// Gone is a session, snapshot or secret the fake does not have.
const Gone = "gone"

// Classes are the error classes a name can ask the fake for.
var Classes = []errdefs.Class{errdefs.Invalid, errdefs.NotFound, errdefs.Conflict, errdefs.Unavailable, errdefs.Forbidden, errdefs.Internal}

// When is the time of everything the fake answers (UTC, so that it comes
// back from JSON equal).
var When = time.Date(2026, 11, 2, 10, 4, 5, 0, time.UTC)

// Call is one call the fake got.
type Call struct {
	Method string
	ID     string // the session, snapshot or secret named
	Req    any    // the request as the engine got it (nil: none)
}

// Engine answers every call of server.Engine. A name (session id,
// snapshot ref, secret name) that is an error class fails the call with
// that class; Gone fails it as not found. A session's answers carry its
// id.
type Engine struct {
	mu    sync.Mutex
	calls []Call
}

// Calls returns the calls so far, in order.
func (f *Engine) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Last returns the last call (a zero Call if none).
func (f *Engine) Last() Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return Call{}
	}
	return f.calls[len(f.calls)-1]
}

// call records a call and returns the error its name asks for.
func (f *Engine) call(method, id string, req any) error {
	f.mu.Lock()
	f.calls = append(f.calls, Call{Method: method, ID: id, Req: req})
	f.mu.Unlock()
	return Fails(id)
}

// Fails is the error a call naming name fails with, nil for none.
func Fails(name string) error {
	if name == Gone {
		return errdefs.NotFoundf("no session, snapshot or secret %q: `airlock ls` lists them", name)
	}
	for _, c := range Classes {
		if name == string(c) {
			return errdefs.New(c, "%s asked to fail as %s", name, c)
		}
	}
	return nil
}

// Session is the session the fake answers for id.
func Session(id string) api.Session {
	return api.Session{ID: id, Project: "/src/p", Image: "airlock/tiny", State: api.StateRunning, Created: When, User: "1000:1000",
		Limits: api.Limits{CPUs: 2, Memory: 1 << 30}, Changed: 1, Workspace: &api.Workspace{Used: 4096, Size: 1 << 30, Files: 1}}
}

// Diff is the diff the fake answers for id: its one file, then the rest.
func Diff(id string) (api.FileDiff, api.Diff) {
	f := api.FileDiff{Change: api.Change{ID: "f1", Path: "hello.txt", Kind: api.KindAdded, Type: api.TypeFile, Mode: 0o644, Size: 6},
		Hunks:  []api.Hunk{{ID: "h1", NewStart: 1, NewLines: 1, Lines: []string{"+hello\n"}, Digest: "sha256:aa"}},
		Digest: "sha256:ff"}
	return f, api.Diff{Session: id, Commits: []api.Commit{{Hash: "0123456789abcdef", Author: "A", Email: "a@example.com", When: When, Subject: "s"}},
		Workspace: api.Workspace{Used: 4096, Size: 1 << 30, Files: 1}}
}

// Patch is the patch the fake writes.
const Patch = "diff --git a/hello.txt b/hello.txt\nnew file mode 100644\n--- /dev/null\n+++ b/hello.txt\n@@ -0,0 +1 @@\n+hello\n"

// Snapshot is the snapshot the fake answers for ref.
func Snapshot(ref string) api.Snapshot {
	return api.Snapshot{ID: ref, Session: "s1", Project: "/src/p", Image: "airlock/tiny", Created: When, Digest: "sha256:00",
		Layers: []api.SnapshotLayer{{What: "workspace", Digest: "sha256:01", Size: 1024, Files: 1}}}
}

func (f *Engine) List(ctx context.Context) ([]api.Session, error) {
	return []api.Session{Session("s1"), Session("s2")}, f.call("List", "", nil)
}

// Watch reports one change, of session s1, then ends.
func (f *Engine) Watch(ctx context.Context) <-chan []string {
	ch := make(chan []string, 1)
	ch <- []string{"s1"}
	close(ch)
	return ch
}

func (f *Engine) Get(ctx context.Context, id string) (api.Session, error) {
	return Session(id), f.call("Get", id, nil)
}

func (f *Engine) Exists(ctx context.Context, id string) error { return f.call("Exists", id, nil) }

func (f *Engine) Create(ctx context.Context, req api.CreateRequest) (api.Session, error) {
	s := Session("new")
	s.Project = req.Project
	return s, f.call("Create", req.Project, req)
}

func (f *Engine) Remove(ctx context.Context, id string) error { return f.call("Remove", id, nil) }

// Run creates a session for creq (failing as its project asks) and runs
// xreq in it as Exec does.
func (f *Engine) Run(ctx context.Context, creq api.CreateRequest, xreq api.ExecRequest, sio engine.ExecIO, created func(api.Session)) (int, error) {
	if err := f.call("Run", creq.Project, xreq); err != nil {
		return -1, err
	}
	s := Session("new")
	s.Project = creq.Project
	created(s)
	return f.exec(xreq, sio)
}

// Exec starts command 7, which echoes its stdin (when it has one) and the
// first resize (with a TTY), writes "out" and "err", and exits with 3.
func (f *Engine) Exec(ctx context.Context, id string, req api.ExecRequest, sio engine.ExecIO) (int, error) {
	if err := f.call("Exec", id, req); err != nil {
		return -1, err
	}
	return f.exec(req, sio)
}

func (f *Engine) exec(req api.ExecRequest, sio engine.ExecIO) (int, error) {
	sio.Started(7)
	if req.TTY {
		r := <-sio.Resize
		fmt.Fprintf(sio.Stdout, "resized to %dx%d\n", r.Width, r.Height)
	}
	if sio.Stdin != nil {
		io.Copy(sio.Stdout, sio.Stdin)
	}
	fmt.Fprint(sio.Stdout, "out\n")
	fmt.Fprint(sio.Stderr, "err\n")
	return 3, nil
}

func (f *Engine) Commands(ctx context.Context, id string, withOutput bool) ([]api.Command, error) {
	code := 0
	out := []api.Command{{ID: 1, Session: id, Argv: []string{"true"}, Started: When, ExitCode: &code, State: "exited"},
		{ID: 2, Session: id, Argv: []string{"sleep", "9"}, Started: When, State: "running"}}
	if withOutput {
		out[0].Output = "output\n"
	}
	return out, f.call("Commands", id, withOutput)
}

// DiffEach hands on Diff's file, then answers the rest.
func (f *Engine) DiffEach(ctx context.Context, id string, q api.DiffQuery, each func(api.FileDiff) error) (api.Diff, error) {
	if err := f.call("DiffEach", id, q); err != nil {
		return api.Diff{}, err
	}
	file, rest := Diff(id)
	if err := each(file); err != nil {
		return api.Diff{}, err
	}
	return rest, nil
}

// DiffStatLines hands on the line of Diff's file, then answers the rest.
func (f *Engine) DiffStatLines(ctx context.Context, id string, q api.DiffQuery, each func([]byte) error) (api.Diff, error) {
	if err := f.call("DiffStatLines", id, q); err != nil {
		return api.Diff{}, err
	}
	file, rest := Diff(id)
	if err := each(api.AppendStatLine(nil, api.Stats([]api.FileDiff{file})[0])); err != nil {
		return api.Diff{}, err
	}
	return rest, nil
}

func (f *Engine) Patch(ctx context.Context, id string, paths []string, w io.Writer) error {
	if err := f.call("Patch", id, paths); err != nil {
		return err
	}
	_, err := io.WriteString(w, Patch)
	return err
}

// Accept and Discard answer one outcome per selected path.
// AcceptEach hands on the outcomes Accept would return.
func (f *Engine) AcceptEach(ctx context.Context, id string, sel api.Selection, each func(api.Outcome) error) (api.Outcomes, error) {
	if err := f.call("Accept", id, sel); err != nil {
		return api.Outcomes{}, err
	}
	res := outcomes(sel)
	for _, o := range res.Outcomes {
		if err := each(o); err != nil {
			return api.Outcomes{}, err
		}
	}
	res.Outcomes = nil
	return res, nil
}

func (f *Engine) Discard(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error) {
	return outcomes(sel), f.call("Discard", id, sel)
}

func outcomes(sel api.Selection) api.Outcomes {
	var out api.Outcomes
	for _, p := range sel.Paths {
		out.Outcomes = append(out.Outcomes, api.Outcome{Path: p, Kind: api.KindModified, Applied: true, Digest: "sha256:ff"})
	}
	return out
}

// Agent reports two events, then the turn.
func (f *Engine) Agent(ctx context.Context, id string, req api.AgentRequest, sink func(api.Event)) (api.Turn, error) {
	if err := f.call("Agent", id, req); err != nil {
		return api.Turn{}, err
	}
	for _, ev := range Events() {
		sink(ev)
	}
	return Turn(id), nil
}

// Events are the events of the fake's one turn.
func Events() []api.Event {
	return []api.Event{{Type: api.EventMessage, Time: When, Turn: 1, Text: "working"},
		{Type: api.EventUsage, Time: When, Turn: 1, Usage: &api.Usage{InputTokens: 10, OutputTokens: 2}}}
}

// Turn is the fake's one turn.
func Turn(id string) api.Turn {
	return api.Turn{Session: id, N: 1, Agent: "claude", Prompt: "p", State: "done", Started: When, Final: "done",
		Usage: api.Usage{InputTokens: 10, OutputTokens: 2}}
}

func (f *Engine) Turns(ctx context.Context, id string) ([]api.Turn, error) {
	return []api.Turn{Turn(id)}, f.call("Turns", id, nil)
}

func (f *Engine) Events(ctx context.Context, id string, turn int) ([]api.Event, error) {
	return Events(), f.call("Events", id, turn)
}

func (f *Engine) Policy(ctx context.Context, id string, ch api.PolicyChange) (api.EgressPolicy, error) {
	return api.EgressPolicy{Mode: "custom", Allow: ch.Allow}, f.call("Policy", id, ch)
}

func (f *Engine) SavePolicy(ctx context.Context, id string) (api.SavedPolicy, error) {
	return api.SavedPolicy{File: "/project/.airlock/policy.yaml", Policy: api.EgressPolicy{Mode: "ask"}}, f.call("SavePolicy", id, nil)
}

func (f *Engine) EgressLog(ctx context.Context, id string, blockedOnly bool, limit int) ([]api.EgressEntry, error) {
	return []api.EgressEntry{{ID: 1, Time: When, Kind: "connect", Host: "example.com", Port: 443, Rule: "deny-all"}},
		f.call("EgressLog", id, [2]any{blockedOnly, limit})
}

func (f *Engine) Pending(ctx context.Context) ([]api.PendingQuestion, error) {
	return []api.PendingQuestion{{ID: 1, Session: "s1", Time: When, Kind: "connect", Host: "example.com", Port: 443}}, f.call("Pending", "", nil)
}

func (f *Engine) Decide(ctx context.Context, d api.Decide) error { return f.call("Decide", "", d) }

func (f *Engine) Pause(ctx context.Context, id string) error  { return f.call("Pause", id, nil) }
func (f *Engine) Resume(ctx context.Context, id string) error { return f.call("Resume", id, nil) }

func (f *Engine) Hibernate(ctx context.Context, id string, req api.HibernateRequest) (api.Session, error) {
	s := Session(id)
	s.State, s.ContainerID = api.StateHibernated, ""
	s.Hibernation = &api.Hibernation{Checkpoint: 1, Time: When, DiskBytes: 4096, Reason: "asked", Processes: req.KeepProcesses}
	return s, f.call("Hibernate", id, req)
}

func (f *Engine) Wake(ctx context.Context, id string) (api.Session, error) {
	return Session(id), f.call("Wake", id, nil)
}

func (f *Engine) Lifecycle(ctx context.Context, id string) ([]api.LifecycleEvent, error) {
	return []api.LifecycleEvent{{Time: When, Kind: "paused", Reason: "idle"}}, f.call("Lifecycle", id, nil)
}

func (f *Engine) Meter(ctx context.Context, id string) (api.Meter, error) {
	return api.Meter{Session: id, CPUSeconds: 1.5, MemoryPeak: 1 << 20, CostUSD: 0.01, Rate: 0.1,
		History: []api.CPUSample{{Time: When, CPUSeconds: 1.5}}}, f.call("Meter", id, nil)
}

func (f *Engine) Usage(ctx context.Context) ([]engine.SessionUse, error) {
	return nil, f.call("Usage", "", nil)
}

func (f *Engine) SetBudgets(ctx context.Context, id string, b api.Budgets) (api.Session, error) {
	return Session(id), f.call("SetBudgets", id, b)
}

func (f *Engine) SetLimits(ctx context.Context, id string, req api.Limits) (api.Session, error) {
	s := Session(id)
	s.Limits = req
	return s, f.call("SetLimits", id, req)
}

func (f *Engine) OpenPort(ctx context.Context, id string, req api.PortRequest) (api.Port, error) {
	return Port(id, req.Port), f.call("OpenPort", id, req)
}

func (f *Engine) Ports(ctx context.Context, id string) ([]api.Port, error) {
	return []api.Port{Port(id, 5173)}, f.call("Ports", id, nil)
}

func (f *Engine) ClosePort(ctx context.Context, id string, port int) error {
	return f.call("ClosePort", id, port)
}

func (f *Engine) ListeningPorts(ctx context.Context, id string) ([]api.ListeningPort, error) {
	return []api.ListeningPort{{Port: 8123, Addresses: []string{"0.0.0.0"}}}, f.call("ListeningPorts", id, nil)
}

func (f *Engine) Checkpoints(ctx context.Context, id string) ([]api.Checkpoint, error) {
	return []api.Checkpoint{
		{ID: 1, Kind: api.CheckpointTurn, Turn: 1, Time: When, Files: 2, Added: 3, Removed: 1, Usage: &api.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.01}},
		{ID: 2, Kind: api.CheckpointCommand, Command: 7, Time: When, From: 1, Files: 1, Added: 1},
	}, f.call("Checkpoints", id, nil)
}

func (f *Engine) CheckpointDiff(ctx context.Context, id string, q api.CheckpointDiffQuery) (api.Diff, error) {
	return api.Diff{Session: id, Files: []api.FileDiff{}, Stats: []api.Stat{}}, f.call("CheckpointDiff", id, q)
}

func (f *Engine) Undo(ctx context.Context, id string, req api.UndoRequest) (api.Undone, error) {
	return api.Undone{To: api.Checkpoint{ID: 1, Kind: api.CheckpointTurn, Turn: 1, Time: When}, Checkpoint: api.Checkpoint{ID: 3, Kind: api.CheckpointUndo, UndoTo: 1, Time: When}, Before: 2, Stopped: 1, Files: 2}, f.call("Undo", id, req)
}

func (f *Engine) Blame(ctx context.Context, id string, paths []string) (api.Blame, error) {
	return api.Blame{Session: id, Hunks: []api.HunkBlame{{Path: "hello.txt", Hunk: "h1", NewStart: 1, Checkpoint: 2, Kind: api.CheckpointTurn, Turn: 1,
		Call: &api.BlameCall{Seq: 3, ID: "toolu_1", Tool: "Write", Input: "hello.txt", Time: When, Match: api.BlameMatchText, Edits: 1}}},
		Diff: api.Diff{Session: id, Files: []api.FileDiff{}, Stats: []api.Stat{}}}, f.call("Blame", id, paths)
}

func (f *Engine) Fork(ctx context.Context, id string, req api.ForkRequest) (api.Restored, error) {
	return api.Restored{Sessions: []api.Session{Session("f1")}}, f.call("Fork", id, req)
}

// Port is the forward the fake answers for a session's port.
func Port(id string, port int) api.Port {
	return api.Port{Session: id, Port: port, Listen: "127.0.0.1:40123", URL: "http://127.0.0.1:40123/"}
}

func (f *Engine) Snapshot(ctx context.Context, id string, req api.SnapshotRequest) (api.Snapshot, error) {
	s := Snapshot("snap1")
	s.Session, s.Name = id, req.Name
	return s, f.call("Snapshot", id, req)
}

func (f *Engine) Snapshots(ctx context.Context) ([]api.Snapshot, error) {
	return []api.Snapshot{Snapshot("snap1")}, f.call("Snapshots", "", nil)
}

func (f *Engine) GetSnapshot(ctx context.Context, ref string) (api.Snapshot, error) {
	return Snapshot(ref), f.call("GetSnapshot", ref, nil)
}

func (f *Engine) RemoveSnapshot(ctx context.Context, ref string) error {
	return f.call("RemoveSnapshot", ref, nil)
}

func (f *Engine) Restore(ctx context.Context, ref string, req api.RestoreRequest) (api.Restored, error) {
	out := api.Restored{Warnings: []string{"the image was rebuilt"}}
	for i := range max(req.N, 1) {
		out.Sessions = append(out.Sessions, Session(fmt.Sprintf("r%d", i)))
	}
	return out, f.call("Restore", ref, req)
}

// PrepareExport only fails: an export is the engine's own (its snapshot
// store writes the tar), which the integration tests cover.
func (f *Engine) PrepareExport(ctx context.Context, ref string, withBase bool) (*engine.Export, error) {
	if err := f.call("PrepareExport", ref, withBase); err != nil {
		return nil, err
	}
	return nil, errdefs.Unavailablef("the fake engine exports nothing")
}

// Import reads the whole archive and answers a snapshot named by its
// bytes.
func (f *Engine) Import(ctx context.Context, r io.Reader) (api.Snapshot, []string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return api.Snapshot{}, nil, err
	}
	return Snapshot(string(b)), []string{"imported"}, f.call("Import", string(b), nil)
}

// Settings are the fake's settings.
func (f *Engine) Settings(ctx context.Context) api.Settings {
	f.call("Settings", "", nil)
	return api.Settings{Image: "airlock/base", IdleTimeout: time.Minute, Limits: api.Limits{CPUs: 2}, Egress: api.EgressPolicy{Mode: "allow-all"}}
}

func (f *Engine) SetSettings(ctx context.Context, s api.Settings) (api.Settings, error) {
	return s, f.call("SetSettings", s.Image, s)
}

func (f *Engine) Secrets(ctx context.Context) ([]api.Secret, error) {
	return []api.Secret{{Name: "ANTHROPIC_API_KEY", Updated: When}}, f.call("Secrets", "", nil)
}

func (f *Engine) SetSecret(ctx context.Context, name, value string) error {
	return f.call("SetSecret", name, value)
}

func (f *Engine) DeleteSecret(ctx context.Context, name string) error {
	return f.call("DeleteSecret", name, nil)
}

func (f *Engine) Images(ctx context.Context) ([]api.Image, error) {
	return []api.Image{{Name: "airlock/tiny", ID: "sha256:11", Size: 1 << 20, Created: When}}, f.call("Images", "", nil)
}

// Builder builds an image named by its request: it reports one step, then
// the image; a name that is an error class fails the build after the step.
type Builder struct{}

// Image is the image Builder makes for req.
func Image(req api.ImageBuildRequest) *api.Image {
	return &api.Image{Name: req.Name, ID: "sha256:22", Size: 1 << 20, Created: When, Recipe: req.Kind}
}

func (Builder) Build(ctx context.Context, req api.ImageBuildRequest, progress images.Progress) (*api.Image, error) {
	progress(api.Progress{Stage: "rootfs", Message: "busybox", Done: false})
	if err := Fails(req.Name); err != nil {
		return nil, err
	}
	img := Image(req)
	progress(api.Progress{Stage: "done", Done: true, Image: img})
	return img, nil
}

// Schedule is the schedule the fake answers for a name.
func Schedule(name string) api.Schedule {
	next := When.Add(time.Hour)
	return api.Schedule{Name: name, Cron: "0 6 * * 1-5", Project: "/src/app", Command: []string{"make", "test"}, Created: When, Next: &next}
}

// ScheduleRun is the run the fake answers for a schedule.
func ScheduleRun(name string) api.ScheduleRun {
	end, code := When.Add(time.Minute), 0
	return api.ScheduleRun{ID: 1, Schedule: name, Due: When, Trigger: api.TriggerManual, Started: When, Ended: &end, Session: "s1",
		Outcome: api.RunDone, ExitCode: &code, Changed: 2}
}

func (f *Engine) AddSchedule(ctx context.Context, s api.Schedule) (api.Schedule, error) {
	err := f.call("AddSchedule", s.Name, s)
	s.Created = When
	return s, err
}

func (f *Engine) Schedules(ctx context.Context) ([]api.Schedule, error) {
	return []api.Schedule{Schedule("nightly")}, f.call("Schedules", "", nil)
}

func (f *Engine) Schedule(ctx context.Context, name string) (api.Schedule, error) {
	return Schedule(name), f.call("Schedule", name, nil)
}

func (f *Engine) RemoveSchedule(ctx context.Context, name string) error {
	return f.call("RemoveSchedule", name, nil)
}

func (f *Engine) RunSchedule(ctx context.Context, name string, req api.ScheduleRunRequest) (api.ScheduleRun, error) {
	return ScheduleRun(name), f.call("RunSchedule", name, req)
}

func (f *Engine) ScheduleRuns(ctx context.Context, name string) ([]api.ScheduleRun, error) {
	return []api.ScheduleRun{ScheduleRun(name)}, f.call("ScheduleRuns", name, nil)
}
