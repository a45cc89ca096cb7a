package server

import (
	"context"
	"io"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/images"
)

// Engine is what the API serves: the calls of the session engine its
// handlers make, declared here by their consumer. The real one is
// *engine.Engine; unit tests embed this interface in a fake and override
// the calls they need. Each method's contract is documented on
// *engine.Engine.
type Engine interface {
	List(ctx context.Context) ([]api.Session, error)
	Watch(ctx context.Context) <-chan []string
	Get(ctx context.Context, id string) (api.Session, error)
	Exists(ctx context.Context, id string) error
	Create(ctx context.Context, req api.CreateRequest) (api.Session, error)
	Remove(ctx context.Context, id string) error
	Run(ctx context.Context, creq api.CreateRequest, xreq api.ExecRequest, sio engine.ExecIO, created func(api.Session)) (int, error)
	Exec(ctx context.Context, id string, req api.ExecRequest, sio engine.ExecIO) (int, error)
	Commands(ctx context.Context, id string, withOutput bool) ([]api.Command, error)

	DiffEach(ctx context.Context, id string, q api.DiffQuery, each func(api.FileDiff) error) (api.Diff, error)
	// DiffStatLines is the diff's summary, a line per path
	// (api.AppendStatLine); the api.Diff has neither files nor stats.
	DiffStatLines(ctx context.Context, id string, q api.DiffQuery, each func(line []byte) error) (api.Diff, error)
	Patch(ctx context.Context, id string, paths []string, w io.Writer) error
	AcceptEach(ctx context.Context, id string, sel api.Selection, each func(api.Outcome) error) (api.Outcomes, error)
	Discard(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error)

	Agent(ctx context.Context, id string, req api.AgentRequest, sink func(api.Event)) (api.Turn, error)
	Turns(ctx context.Context, id string) ([]api.Turn, error)
	Events(ctx context.Context, id string, turn int) ([]api.Event, error)

	Policy(ctx context.Context, id string, ch api.PolicyChange) (api.EgressPolicy, error)
	SavePolicy(ctx context.Context, id string) (api.SavedPolicy, error)
	EgressLog(ctx context.Context, id string, blockedOnly bool, limit int) ([]api.EgressEntry, error)
	Pending(ctx context.Context) ([]api.PendingQuestion, error)
	Decide(ctx context.Context, d api.Decide) error

	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Hibernate(ctx context.Context, id string, req api.HibernateRequest) (api.Session, error)
	Wake(ctx context.Context, id string) (api.Session, error)
	Lifecycle(ctx context.Context, id string) ([]api.LifecycleEvent, error)
	Meter(ctx context.Context, id string) (api.Meter, error)
	Usage(ctx context.Context) ([]engine.SessionUse, error)
	SetBudgets(ctx context.Context, id string, b api.Budgets) (api.Session, error)
	SetLimits(ctx context.Context, id string, req api.Limits) (api.Session, error)

	OpenPort(ctx context.Context, id string, req api.PortRequest) (api.Port, error)
	Ports(ctx context.Context, id string) ([]api.Port, error)
	ClosePort(ctx context.Context, id string, port int) error
	ListeningPorts(ctx context.Context, id string) ([]api.ListeningPort, error)

	Checkpoints(ctx context.Context, id string) ([]api.Checkpoint, error)
	CheckpointDiff(ctx context.Context, id string, q api.CheckpointDiffQuery) (api.Diff, error)
	Undo(ctx context.Context, id string, req api.UndoRequest) (api.Undone, error)
	Blame(ctx context.Context, id string, paths []string) (api.Blame, error)
	Fork(ctx context.Context, id string, req api.ForkRequest) (api.Restored, error)

	Snapshot(ctx context.Context, id string, req api.SnapshotRequest) (api.Snapshot, error)
	Snapshots(ctx context.Context) ([]api.Snapshot, error)
	GetSnapshot(ctx context.Context, ref string) (api.Snapshot, error)
	RemoveSnapshot(ctx context.Context, ref string) error
	Restore(ctx context.Context, ref string, req api.RestoreRequest) (api.Restored, error)
	PrepareExport(ctx context.Context, ref string, withBase bool) (*engine.Export, error)
	Import(ctx context.Context, r io.Reader) (api.Snapshot, []string, error)

	Settings(ctx context.Context) api.Settings
	SetSettings(ctx context.Context, s api.Settings) (api.Settings, error)
	Secrets(ctx context.Context) ([]api.Secret, error)
	SetSecret(ctx context.Context, name, value string) error
	DeleteSecret(ctx context.Context, name string) error
	Images(ctx context.Context) ([]api.Image, error)

	AddSchedule(ctx context.Context, s api.Schedule) (api.Schedule, error)
	Schedules(ctx context.Context) ([]api.Schedule, error)
	Schedule(ctx context.Context, name string) (api.Schedule, error)
	RemoveSchedule(ctx context.Context, name string) error
	RunSchedule(ctx context.Context, name string, req api.ScheduleRunRequest) (api.ScheduleRun, error)
	ScheduleRuns(ctx context.Context, name string) ([]api.ScheduleRun, error)
}

var _ Engine = (*engine.Engine)(nil)

// Builder builds images; the real one is *images.Builder.
type Builder interface {
	Build(ctx context.Context, req api.ImageBuildRequest, progress images.Progress) (*api.Image, error)
}

var _ Builder = (*images.Builder)(nil)
