package engine

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/fastexec"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
)

// Checkpoints lists a session's checkpoints (its timeline).
func (e *Engine) Checkpoints(ctx context.Context, id string) ([]api.Checkpoint, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.timeline.List(ctx, rec.ID)
}

// CheckpointDiff is what changed between two of a session's checkpoints
// (a turn's), from the stored checkpoints: the session is not touched.
func (e *Engine) CheckpointDiff(ctx context.Context, id string, q api.CheckpointDiffQuery) (api.Diff, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Diff{}, err
	}
	return e.timeline.Diff(ctx, rec.ID, q)
}

// Blame is the session's diff with, for each hunk, the checkpoint (turn
// or command) that last changed its lines.
func (e *Engine) Blame(ctx context.Context, id string, paths []string) (api.Blame, error) {
	d, err := e.Diff(ctx, id, paths)
	if err != nil {
		return api.Blame{}, err
	}
	return e.timeline.Blame(ctx, d.Session, d)
}

// Undo puts a session's workspace back to a checkpoint (see
// timeline.Timeline.Undo).
func (e *Engine) Undo(ctx context.Context, id string, req api.UndoRequest) (api.Undone, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Undone{}, err
	}
	if rec.State != api.StateRunning && rec.State != api.StatePaused {
		return api.Undone{}, errdefs.Conflictf("session %s is %s: only a running session's workspace is put back", rec.ID, rec.State)
	}
	l := e.liveSession(rec.ID)
	if l == nil {
		return api.Undone{}, errdefs.Conflictf("session %s has no workspace: %s", rec.ID, orNone(rec.Error))
	}
	l.mu.Lock() // no accept or discard meanwhile
	defer l.mu.Unlock()
	out, err := e.timeline.Undo(ctx, rec.ID, req)
	if err == nil {
		e.log.Info("session undone", "session", rec.ID, "to", out.To.ID, "stopped", out.Stopped, "files", out.Files)
	}
	return out, err
}

// Fork makes new sessions from the state after a turn (or a checkpoint)
// of a session: each starts as a session made from its settings, its
// workspace's upper layer filled from the checkpoint before the overlay
// is mounted. The checkpoint is pinned while they are made.
func (e *Engine) Fork(ctx context.Context, id string, req api.ForkRequest) (api.Restored, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Restored{}, err
	}
	n := req.N
	if n == 0 {
		n = 1
	}
	if n < 0 || n > maxFork {
		return api.Restored{}, errdefs.Invalidf("-n %d: a fork makes 1 to %d sessions", n, maxFork)
	}
	list, err := e.timeline.List(ctx, rec.ID)
	if err != nil {
		return api.Restored{}, err
	}
	var cid int64
	for _, c := range list {
		if req.Checkpoint > 0 && c.ID == req.Checkpoint || req.Checkpoint == 0 && c.Kind == api.CheckpointTurn && c.Turn == req.Turn {
			cid = c.ID
		}
	}
	if cid == 0 {
		return api.Restored{}, errdefs.NotFoundf("session %s has no checkpoint of turn %d (checkpoint %d): `airlock turns %s` lists them", rec.ID, req.Turn, req.Checkpoint, rec.ID)
	}
	st, err := e.timeline.Store(rec.ID)
	if err != nil {
		return api.Restored{}, err
	}
	pin := "fork:" + newID()
	if err := st.Pin(checkpoint.ID(cid), pin); err != nil {
		return api.Restored{}, err
	}
	defer st.Unpin(checkpoint.ID(cid), pin)
	spec := newSnapshot(rec, "", "", 0).Spec
	src := &checkpointSource{store: st, id: checkpoint.ID(cid)}
	made, warning, err := e.createN(ctx, spec, src, n)
	if err != nil {
		return api.Restored{}, err
	}
	out := api.Restored{Sessions: made}
	if warning != "" {
		out.Warnings = append(out.Warnings, warning)
	}
	for _, s := range made {
		// The new session's timeline starts where it forked from.
		e.timeline.Record(context.WithoutCancel(ctx), s.ID, timeline.Mark{Kind: api.CheckpointFork, Always: true})
	}
	e.log.Info("session forked", "session", rec.ID, "checkpoint", cid, "sessions", len(out.Sessions))
	return out, nil
}

// checkpointSource is the create mode of a fork from a checkpoint: idle,
// its workspace's upper directory restored from the checkpoint.
type checkpointSource struct {
	idle
	store *checkpoint.Store
	id    checkpoint.ID
}

func (s *checkpointSource) fillWorkspace(upper string) error {
	return s.store.RestoreDir(context.Background(), s.id, upper)
}

func (*checkpointSource) racesBase() bool { return false }

// checkpointCommand records the workspace after a command, when it
// changed it, in the background (see timeline.RecordLater).
func (e *Engine) checkpointCommand(id string, cmd int64, started time.Time) {
	e.timeline.RecordLater(id, timeline.Mark{Kind: api.CheckpointCommand, Command: cmd, Since: started})
}

// newTimeline wires engine/timeline to the session core.
func newTimeline(e *Engine, opts timeline.Options) *timeline.Timeline {
	opts.Logger = e.log
	return timeline.New(e.stateDir, timelineCore{e}, opts)
}

// timelineCore is the session core as engine/timeline sees it.
type timelineCore struct{ e *Engine }

var _ timeline.Sessions = timelineCore{}

func (c timelineCore) Workspace(ctx context.Context, id string) (string, string, string, error) {
	rec, err := c.e.store.Session(ctx, id)
	if err != nil {
		return "", "", "", err
	}
	l := c.e.liveSession(rec.ID)
	if l == nil || l.ws == nil {
		return "", "", "", errdefs.Conflictf("session %s has no workspace: %s", rec.ID, orNone(rec.Error))
	}
	return l.ws.Upper(), l.ws.Merged(), rec.Project, nil
}

func (c timelineCore) Project(ctx context.Context, id string) (string, error) {
	rec, err := c.e.store.Session(ctx, id)
	return rec.Project, err
}

func (c timelineCore) Active() []string {
	c.e.mu.Lock()
	lives := make(map[string]*live, len(c.e.sessions))
	for id, l := range c.e.sessions {
		lives[id] = l
	}
	c.e.mu.Unlock()
	var out []string
	for id, l := range lives {
		if rec, err := c.e.store.Session(context.Background(), id); err == nil && rec.State == api.StateRunning && l.sums.movedSincePeriodic() {
			out = append(out, id)
		}
	}
	return out
}

func (c timelineCore) Turns(ctx context.Context, id string) ([]api.Turn, error) {
	return c.e.agents.Turns(ctx, id)
}

func (c timelineCore) Commands(ctx context.Context, id string) ([]api.Command, error) {
	return c.e.Commands(ctx, id, false)
}

// StopProcesses implements timeline.Sessions: new work waits (the
// session's freeze, which snapshots hold too), then every process in the
// session's container but its main process and what that runs (the idle
// loop) is killed, until none is left.
func (c timelineCore) StopProcesses(ctx context.Context, id string) (int, func(), error) {
	l := c.e.liveSession(id)
	if l == nil {
		return 0, nil, errdefs.Conflictf("session %s has no workspace", id)
	}
	rec, err := c.e.store.Session(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	l.freeze.Lock()
	release := func() { l.freeze.Unlock() }
	if rec.State == api.StatePaused {
		if err := c.e.resume(ctx, rec.ID, rec.ContainerID, "undo"); err != nil {
			release()
			return 0, nil, err
		}
	}
	ins, err := c.e.docker.ContainerInspect(ctx, rec.ContainerID)
	if err != nil || ins.State == nil || ins.State.Pid <= 0 {
		release()
		return 0, nil, errdefs.Conflictf("session %s's container is not running", rec.ID)
	}
	if ins.Config != nil && ins.Config.Labels[labelFirst] == "1" && len(childPids(ins.State.Pid)) > 0 && !idleMain(ins.State.Pid) {
		// The first command is the container's main process: stopping
		// it would stop the session.
		release()
		return 0, nil, errdefs.Conflictf("session %s's first command is still running: wait for it to end (or stop it), then undo", rec.ID)
	}
	stopped := 0
	for range 50 {
		pids := strayPids(rec.ContainerID, ins.State.Pid)
		if len(pids) == 0 {
			return stopped, release, nil
		}
		for _, p := range pids {
			if syscall.Kill(p, syscall.SIGKILL) == nil {
				stopped++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	release()
	return stopped, nil, errdefs.Unavailablef("session %s's processes did not stop: try again", rec.ID)
}

// idleMain says whether the container's main process runs the idle loop
// (after the first command ended, or for a session made idle).
func idleMain(pid int) bool {
	for _, c := range append([]int{pid}, childPids(pid)...) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		if strings.Contains(string(b), "sleep 86400") || isInit(c) {
			return true
		}
	}
	return false
}

// isInit says whether pid is the session's init (engine/fastexec), whose
// children are commands, not part of the idle container.
func isInit(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.HasPrefix(string(b), fastexec.InitPath+"\x00")
}

// strayPids lists the processes of container cid that are not its own:
// its main process main and, beneath it, the idle loop (the shell and its
// sleep) or the fast exec init. The rest are commands — run as execs or
// by the init — and what they left: orphans go to main, the container's
// pid 1.
func strayPids(cid string, main int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	own := map[int]bool{main: true}
	for _, c := range childPids(main) {
		if isInit(c) || idleLoop(c) {
			own[c] = true
			for _, g := range childPids(c) {
				if !isInit(c) && idleLoop(g) {
					own[g] = true
				}
			}
		}
	}
	var out []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || own[pid] || !inContainer(pid, cid) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// idleLoop says whether pid is the idle loop's shell or its sleep.
func idleLoop(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Contains(string(b), "sleep 86400") || string(b) == "sleep\x0086400\x00"
}
