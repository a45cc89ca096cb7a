package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/fastexec"
	"github.com/airlock/airlock/engine/index"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/container"
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
	if err := e.awake(ctx, id); err != nil { // a hibernated session wakes, as for accept
		return api.Undone{}, err
	}
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
	layers, err := e.timeline.LayersOf(rec.ID, checkpoint.ID(cid))
	if err != nil {
		return api.Restored{}, err
	}
	spec := newSnapshot(rec, "", "", 0).Spec
	src := &checkpointSource{store: st, id: checkpoint.ID(cid), e: e, from: rec.ID, dir: rec.Dir, layers: layers}
	for _, l := range src.layerStores() {
		if l.id == 0 {
			continue
		}
		if err := l.store.Pin(l.id, pin); err != nil {
			return api.Restored{}, err
		}
		defer l.store.Unpin(l.id, pin)
	}
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
// its workspace's upper directory restored from the checkpoint before the
// overlay is mounted, its container layer (once the container exists,
// before it starts) and home (once it runs) from the checkpoints of the
// source session's that the checkpoint names, when it names them.
type checkpointSource struct {
	idle
	store  *checkpoint.Store
	id     checkpoint.ID
	e      *Engine
	from   string // the source session, and its directory (its layers' stores)
	dir    string
	layers timeline.Layers
}

type layerStore struct {
	store *checkpoint.Store
	id    checkpoint.ID
}

// layerStores are the source's container layer and home stores with the
// checkpoints to restore (stores that do not open are left out).
func (s *checkpointSource) layerStores() []layerStore {
	var out []layerStore
	if cs, err := s.e.containerCheckpoints(s.from, s.dir); err == nil {
		out = append(out, layerStore{cs, s.layers.Container})
	}
	if hs, err := s.e.homeCheckpoints(s.from, s.dir); err == nil {
		out = append(out, layerStore{hs, s.layers.Home})
	}
	return out
}

func (s *checkpointSource) fillWorkspace(upper string) error {
	return s.store.RestoreDir(context.Background(), s.id, upper)
}

func (s *checkpointSource) created(ctx context.Context, c *creation) error {
	if s.layers.Container == 0 {
		return nil
	}
	cs, err := s.e.containerCheckpoints(s.from, s.dir)
	if err != nil {
		return err
	}
	info, err := c.e.docker.ContainerInspect(ctx, c.rec.ContainerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	upper := info.GraphDriver.Data["UpperDir"]
	if !overlayDriver(info.GraphDriver.Name) || upper == "" {
		return errdefs.Unavailablef("Docker stores containers with the %q storage driver; a fork with the container layer needs overlay2 (the default)", info.GraphDriver.Name)
	}
	if err := restoreNewLayer(ctx, cs, s.layers.Container, upper); err != nil {
		return fmt.Errorf("restore the container layer of checkpoint %s: %w", s.id, err)
	}
	return nil
}

func (s *checkpointSource) running(ctx context.Context, c *creation) error {
	if s.layers.Home == 0 {
		return nil
	}
	hs, err := s.e.homeCheckpoints(s.from, s.dir)
	if err != nil {
		return err
	}
	info, err := c.e.docker.ContainerInspect(ctx, c.rec.ContainerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	if info.State == nil || info.State.Pid <= 0 {
		return errdefs.Unavailablef("the forked session's container stopped as it started")
	}
	home, err := openHome(info.State.Pid)
	if err != nil {
		return err
	}
	defer home.Close()
	if err := hs.Restore(ctx, s.layers.Home, home); err != nil {
		return fmt.Errorf("restore the home of checkpoint %s: %w", s.id, err)
	}
	return nil
}

func (*checkpointSource) racesBase() bool { return false }

// A fork from a checkpoint starts from a warm container unless the
// checkpoint names a container layer: that is restored into Docker's
// upper directory before the container starts (created), which a warm
// container, already started, has passed. The home is filled in running,
// which a claim calls too.
func (s *checkpointSource) warm() bool { return s.layers.Container == 0 }

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

func (c timelineCore) Events(ctx context.Context, id string, turn int) ([]api.Event, error) {
	return c.e.agents.Events(ctx, id, turn)
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

// RecordLayers implements timeline.Sessions: the container layer and home
// of a running session, recorded when they changed (see recordLayers).
func (c timelineCore) RecordLayers(ctx context.Context, id, label string) (timeline.Layers, bool, error) {
	rec, err := c.e.store.Session(ctx, id)
	if err != nil || rec.ContainerID == "" || rec.State != api.StateRunning && rec.State != api.StatePaused {
		return timeline.Layers{}, false, err
	}
	info, err := c.e.docker.ContainerInspect(ctx, rec.ContainerID)
	if err != nil {
		return timeline.Layers{}, false, dockerError("inspect the session's container", err)
	}
	pid := 0
	if info.State != nil && info.State.Running {
		pid = info.State.Pid
	}
	// The watch on this container's layer (a new container has a new
	// one); the timeline closes it with the session's layer stores.
	lw, _ := c.e.timeline.LayerWatch(rec.ID).(*layerWatch)
	if upper := info.GraphDriver.Data["UpperDir"]; upper != "" && (lw == nil || lw.upper != upper) {
		lw = nil
		if w, err := index.StartTree(); err == nil {
			lw = &layerWatch{w: w, upper: upper}
			c.e.timeline.SetLayerWatch(rec.ID, lw)
		}
	}
	return c.e.recordLayers(ctx, rec, info, pid, checkpoint.RecordOptions{Label: label, IfChanged: true}, lw)
}

// RestoreLayers implements timeline.Sessions. The container is made
// again, as a wake makes it, around the session's mounted workspace and
// its network: removed (its processes are stopped already), created from
// the record with its layer restored into Docker's new upper directory
// before it starts, then started, plugged in and its home filled. Not
// rewritten in place: the kernel leaves changes to an overlay's upper
// directory under the mounted overlay undefined, and writing through the
// container's root instead would need the image's layers resolved for
// every path the checkpoint lacks. The restore is checkpoint.Restore's
// (into an empty directory, nothing followed or opened that the layer
// holds), the one a wake uses.
func (c timelineCore) RestoreLayers(ctx context.Context, id string, want timeline.Layers) (bool, error) {
	e := c.e
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return false, err
	}
	l := e.liveSession(rec.ID)
	if l == nil || l.ws == nil || l.net == nil {
		return false, errdefs.Conflictf("session %s has no workspace or network", rec.ID)
	}
	if same, err := e.sameLayers(rec, want); err != nil || same {
		return false, err
	}
	ctx = context.WithoutCancel(ctx) // half a container helps nobody
	e.docker.ContainerRemove(ctx, rec.ContainerID, container.RemoveOptions{Force: true})
	remake := func(layers timeline.Layers) (store.Session, error) {
		w := &waking{e: e, rec: rec, ws: l.ws, net: l.net, layers: layers}
		err := w.container(ctx)
		if err == nil {
			err = w.start(ctx)
		}
		if err != nil {
			w.undo(ctx)
		}
		return w.rec, err
	}
	made, err := remake(want)
	if err != nil {
		// Back as it was (its newest layers) rather than without a
		// container.
		if again, err2 := remake(timeline.Layers{}); err2 == nil {
			e.store.PutSession(ctx, again)
			return false, err
		}
		e.store.SetSessionState(ctx, rec.ID, api.StateFailed, "its container could not be made again after an undo: "+err.Error())
		return false, err
	}
	cur, err := e.store.Session(ctx, rec.ID)
	if err != nil {
		return true, err
	}
	cur.ContainerID = made.ContainerID
	return true, e.store.PutSession(ctx, cur)
}

// sameLayers says whether the session's newest container layer and home
// checkpoints hold what want's do (the same trees).
func (e *Engine) sameLayers(rec store.Session, want timeline.Layers) (bool, error) {
	for _, x := range []struct {
		open func(string, string) (*checkpoint.Store, error)
		id   checkpoint.ID
	}{{e.containerCheckpoints, want.Container}, {e.homeCheckpoints, want.Home}} {
		if x.id == 0 {
			continue
		}
		s, err := x.open(rec.ID, rec.Dir)
		if err != nil {
			return false, err
		}
		cur, err := s.Latest()
		if err != nil {
			return false, err
		}
		w, err := s.Get(x.id)
		if err != nil {
			return false, err
		}
		if cur == nil || !cur.Root.SameAs(&w.Root) {
			return false, nil
		}
	}
	return true, nil
}

// PruneLayers implements timeline.Sessions.
func (c timelineCore) PruneLayers(ctx context.Context, id string, keep []timeline.Layers) error {
	rec, err := c.e.store.Session(ctx, id)
	if err != nil {
		return err
	}
	kc, kh := map[checkpoint.ID]bool{}, map[checkpoint.ID]bool{}
	for _, l := range keep {
		kc[l.Container], kh[l.Home] = true, true
	}
	var errs []error
	for _, x := range []struct {
		open func(string, string) (*checkpoint.Store, error)
		keep map[checkpoint.ID]bool
	}{{c.e.containerCheckpoints, kc}, {c.e.homeCheckpoints, kh}} {
		s, err := x.open(rec.ID, rec.Dir)
		if err == nil {
			_, err = s.Keep(x.keep)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
