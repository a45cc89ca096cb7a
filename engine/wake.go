package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/criu"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/names"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
	"github.com/docker/docker/api/types/container"
)

// Wake brings a hibernated session back, as new work would (a paused
// one resumes; a running one is left as it is).
func (e *Engine) Wake(ctx context.Context, id string) (api.Session, error) {
	_, done, err := e.working(ctx, id)
	if err != nil {
		return api.Session{}, err
	}
	done()
	return e.Get(ctx, id)
}

// wake brings a hibernated session back, once however many ask at once.
// The caller counts as work in the session (see working), so it does
// not hibernate again meanwhile.
func (e *Engine) wake(ctx context.Context, id, reason string) (store.Session, error) {
	a := e.activityOf(id)
	a.wake.Lock()
	defer a.wake.Unlock()
	rec, err := e.store.Session(ctx, id)
	if err != nil || rec.State != api.StateHibernated {
		return rec, err
	}
	ctx = context.WithoutCancel(ctx) // a wake that stops halfway is undone, and helps nobody
	t0 := time.Now()
	e.dropPeek(rec.ID)
	w := &waking{e: e, rec: rec}
	ok := false
	defer func() {
		if !ok {
			w.undo(ctx)
		}
	}()
	if err := w.prepare(ctx); err != nil {
		return rec, err
	}
	if err := w.start(ctx); err != nil {
		return rec, err
	}
	w.rec.State, w.rec.Error = api.StateRunning, ""
	if err := e.store.PutSession(ctx, w.rec); err != nil {
		return rec, err
	}
	ok = true
	e.mu.Lock()
	l := &live{ws: w.ws, base: review.OpenBase(rec.Project, baseDir(rec.Dir)), cache: review.NewCache(), net: w.net, sums: e.watchWorkspace(id, w.ws)}
	l.sums.captured.Store(true) // the base is the one recorded at create
	e.sessions[id] = l
	e.mu.Unlock()
	e.touch(id)
	for _, said := range []string{w.processes, w.layer} {
		if said != "" {
			reason += "; " + said
		}
	}
	e.log.Info("session woken", "session", id, "reason", reason, "took", time.Since(t0), "steps", strings.Join(w.took, " "))
	e.store.AddLifecycle(ctx, id, "woken", reason, time.Now())
	return w.rec, nil
}

// waking is a hibernated session being brought back, as steps that each
// add their own cleanup (like creation).
//
// Traced (a 500 MiB workspace of 50 files, bench 18, load ~15 on 2
// cores), the steps in a row took: mount 1.0-2.6 s (the workspace's
// restore: hashing every object and writing it into the tmpfs, both
// CPU-bound), network 1-20 ms, create 40-100 ms, container layer 10-55
// ms, start 490-660 ms, attach 17-38 ms, home 16-25 ms. So the restore
// now hashes and writes files on several workers (checkpoint/restore.go),
// and what does not need the workspace mounted (the network, the
// container's create — its bind source is the merged directory, which
// exists — and its layer's restore, before it starts) runs beside it;
// the container starts once both are done: never over an unmounted
// workspace.
type waking struct {
	e   *Engine
	rec store.Session
	ws  *overlay.Workspace
	net *sessionNet
	// layers are the checkpoints of the container layer and home to
	// restore; zero: the newest of each.
	layers timeline.Layers

	mu       sync.Mutex
	cleanups []func(ctx context.Context)
	took     []string // each step's time, for the log
	// processes says what became of processes kept at hibernation:
	// restored, or why not (the session then wakes without them).
	processes string
	// layer says why the container layer was not restored, if it was not.
	layer string
}

// step runs one step of the wake and keeps its time.
func (w *waking) step(name string, f func() error) error {
	t := time.Now()
	err := f()
	w.mu.Lock()
	w.took = append(w.took, fmt.Sprintf("%s=%s", name, time.Since(t).Round(100*time.Microsecond)))
	w.mu.Unlock()
	return err
}

func (w *waking) undo(ctx context.Context) {
	for i := len(w.cleanups) - 1; i >= 0; i-- {
		w.cleanups[i](ctx)
	}
}

// prepare mounts the workspace and, meanwhile, takes the network and
// makes the container with its layer restored, not started. The
// container is made once the workspace's tmpfs is mounted (the fast exec
// socket directory it binds is in it), while the tmpfs is being filled.
// Cleanups run as if in a row: the container's, the network's, the
// mount's.
func (w *waking) prepare(ctx context.Context) error {
	rec := w.rec
	mounted := &waking{e: w.e, rec: rec}
	tmpfs := make(chan bool, 1) // whether the tmpfs is there, said once
	var once sync.Once
	ready := func(ok bool) { once.Do(func() { tmpfs <- ok }) }
	var merr error
	var wg sync.WaitGroup
	wg.Go(func() {
		merr = w.step("mount", func() error { return mounted.mount(ctx, rec, func() { ready(true) }) })
		ready(merr == nil)
	})
	cerr := w.step("network", w.network)
	if cerr == nil && <-tmpfs {
		cerr = w.container(ctx)
	}
	wg.Wait()
	w.ws = mounted.ws
	w.cleanups = append(mounted.cleanups, w.cleanups...)
	return errors.Join(merr, cerr)
}

// mount mounts the workspace: a fresh tmpfs filled from the newest
// checkpoint, or the disk workspace's own upper directory. It calls
// mounted once the tmpfs is there, before it is filled (a disk
// workspace's directories are always there).
func (w *waking) mount(ctx context.Context, rec store.Session, mounted func()) error {
	var err error
	if rec.Workspace == api.WorkspaceDisk {
		mounted()
		w.ws, err = overlay.Find(rec.Project, rec.Dir)
	} else {
		var cs *checkpoint.Store
		if cs, err = w.e.checkpoints(rec.ID); err != nil {
			return err
		}
		var last *checkpoint.Checkpoint
		if last, err = cs.Latest(); err != nil {
			return err
		}
		if last == nil {
			return errdefs.Conflictf("session %s has no checkpoint to wake from: its workspace is lost; remove it with `airlock rm %s`", rec.ID, rec.ID)
		}
		w.ws, err = overlay.MountFilled(rec.Project, rec.Dir, rec.Limits.WorkspaceSize, func(upper string) error {
			mounted()
			return cs.RestoreDir(ctx, last.ID, upper)
		})
		if errors.Is(err, checkpoint.ErrCorrupt) {
			return damagedCheckpoint(rec.ID, cs, last.ID, err)
		}
	}
	if err != nil {
		return fmt.Errorf("mount the session's workspace: %w", err)
	}
	w.cleanups = append(w.cleanups, func(context.Context) { w.ws.Close() })
	return nil
}

// damagedCheckpoint says that session id cannot wake from its newest
// checkpoint, newest of cs, which is damaged (err), and what still works:
// starting again from an earlier checkpoint, if it has one.
func damagedCheckpoint(id string, cs *checkpoint.Store, newest checkpoint.ID, err error) error {
	var earlier checkpoint.ID
	if list, lerr := cs.List(); lerr == nil {
		for _, c := range list {
			if c.ID < newest {
				earlier = max(earlier, c.ID)
			}
		}
	}
	if earlier == 0 {
		return errdefs.Conflictf("session %s cannot wake: its workspace's checkpoint %d is damaged (%v) and it has no earlier one; what it held is lost: remove it with `airlock rm %s`", id, newest, err, id)
	}
	return errdefs.Conflictf("session %s cannot wake: its workspace's newest checkpoint %d is damaged (%v); start again from an earlier one with `airlock fork %s --checkpoint %d` (`airlock turns %s` lists them), then remove this one with `airlock rm %s`", id, newest, err, id, earlier, id, id)
}

// network takes a network under the session's stored policy and writes
// what the container mounts of it.
func (w *waking) network() error {
	e, rec := w.e, w.rec
	pol, err := e.policyOf(storedPolicy(rec))
	if err != nil {
		return err
	}
	if w.net, err = e.nets.Take(rec.ID, pol); err != nil {
		return err
	}
	w.cleanups = append(w.cleanups, func(context.Context) { e.dropNetwork(w.net) })
	w.rec.Network = network.Name(w.net.Key)
	if _, err := writeCABundle(rec.Dir, rec.CABundle, e.ca.PEM); err != nil {
		return err
	}
	_, err = writeNetConfig(rec.Dir, w.net.GW)
	return err
}

// container makes the session's container again from its record, with
// its layer from its checkpoint, not started: its workspace's bind source
// is the merged directory, mounted meanwhile. A layer that cannot be
// restored (its checkpoint damaged, or the new container's layer holding
// what a restore cannot go over) does not keep the session asleep: it
// wakes in a container made again with the image's files outside
// /workspace, its workspace whole, and says so (layer).
func (w *waking) container(ctx context.Context) error {
	e := w.e
	id, err := w.create(ctx)
	if err != nil {
		return err
	}
	err = w.step("layer", func() error { return e.restoreContainerLayer(ctx, w.rec, id, w.layers.Container) })
	if err == nil || errdefs.IsUnavailable(err) || ctx.Err() != nil {
		return err
	}
	e.log.Warn("restore a session's container layer: waking it without", "session", w.rec.ID, "err", err)
	w.layer = fmt.Sprintf("its container layer (the files its commands changed outside /workspace) not restored (%v): the image's files are there instead; its workspace is whole", err)
	_, err = w.create(ctx) // nothing half-restored in it
	return err
}

// create makes the session's container, not started, and returns its id.
func (w *waking) create(ctx context.Context) (string, error) {
	e := w.e
	merged := (&overlay.Workspace{Dir: w.rec.Dir}).Merged()
	if err := os.MkdirAll(merged, 0o700); err != nil {
		return "", err
	}
	cfg, hostCfg := e.containerSpec(w.rec, keepAlive, merged, w.net.GW)
	var err error
	if hostCfg.CgroupParent, err = e.meter.CgroupParent(ctx, w.rec.ID); err != nil {
		return "", dockerError("ask Docker how it manages cgroups", err)
	}
	// A container of an earlier, interrupted wake, or of this one's layer
	// that did not restore.
	e.docker.ContainerRemove(ctx, "airlock-"+w.rec.ID, container.RemoveOptions{Force: true})
	var created container.CreateResponse
	err = w.step("create", func() (err error) {
		created, err = e.docker.ContainerCreate(ctx, cfg, hostCfg, nil, nil, "airlock-"+w.rec.ID)
		return err
	})
	if err != nil {
		return "", dockerError("create the session's container", err)
	}
	w.rec.ContainerID = created.ID
	w.cleanups = append(w.cleanups, func(ctx context.Context) {
		e.docker.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true})
		e.meter.Remove(ctx, w.rec.ID)
	})
	return created.ID, nil
}

// start starts the container made, with the processes kept at
// hibernation when there are any (CRIU restores the home tmpfs with
// them), plugs its network in and fills its home. Processes that do not
// restore are said, and the session wakes without them in a container
// made again.
func (w *waking) start(ctx context.Context) error {
	if !criu.Kept(w.rec.Dir) {
		return w.startAfresh(ctx)
	}
	err := w.step("processes", func() error { return criu.Restore(ctx, w.e.docker, w.rec.Dir, w.rec.ContainerID) })
	os.RemoveAll(criu.Dir(w.rec.Dir)) // used once, restored or not
	if err == nil {
		w.processes = "processes restored"
		return w.step("attach", func() error { return w.e.attach(ctx, w.rec, w.rec.ContainerID) })
	}
	w.e.log.Warn("restore a session's processes: waking it without them", "session", w.rec.ID, "err", err)
	w.processes = fmt.Sprintf("processes not restored (%v): they were stopped", err)
	if err := w.container(ctx); err != nil {
		return err
	}
	return w.startAfresh(ctx)
}

// startAfresh starts the container made, plugs its network in and fills
// its home.
func (w *waking) startAfresh(ctx context.Context) error {
	e, id := w.e, w.rec.ContainerID
	if err := w.step("start", func() error { return e.docker.ContainerStart(ctx, id, container.StartOptions{}) }); err != nil {
		return dockerError("start the session's container", err)
	}
	if err := w.step("attach", func() error { return e.attach(ctx, w.rec, id) }); err != nil {
		return err
	}
	return w.step("home", func() error { return e.restoreHome(ctx, w.rec, id, w.layers.Home) })
}

// restoreContainerLayer fills a new container's own layer, before it
// starts, from checkpoint which of the session's (0: the newest).
func (e *Engine) restoreContainerLayer(ctx context.Context, rec store.Session, containerID string, which checkpoint.ID) error {
	cs, err := e.containerCheckpoints(rec.ID, rec.Dir)
	if err != nil {
		return err
	}
	last, err := pick(cs, which)
	if err != nil || last == nil {
		return err
	}
	info, err := e.docker.ContainerInspect(ctx, containerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	upper := info.GraphDriver.Data["UpperDir"]
	if !overlayDriver(info.GraphDriver.Name) || upper == "" {
		e.log.Warn("the container layer is not restored: Docker's storage driver is not overlay2", "session", rec.ID)
		return nil
	}
	if err := restoreNewLayer(ctx, cs, last.ID, upper); err != nil {
		return fmt.Errorf("restore the session's container layer: %w", err)
	}
	return nil
}

// madeDir is a directory Docker made in a new container's own layer.
type madeDir struct {
	path     string // beneath the layer
	mode     os.FileMode
	uid, gid int
}

// maxMadeDirs bounds what restoreNewLayer sets aside: Docker makes a
// handful (the working directory, mount points); more is not Docker's.
const maxMadeDirs = 256

// restoreNewLayer fills upper, a container's own layer made by Docker and
// not started, from checkpoint id of cs. Docker makes in it, at create,
// the directories an image lacks for the container's working directory
// and mounts (on an imported or distroless image: /workspace, /home...),
// and a restore needs an empty directory: those are set aside, and made
// again, as Docker made them, where the checkpoint has none. Anything
// else in the layer is not Docker's doing and stops the restore.
func restoreNewLayer(ctx context.Context, cs *checkpoint.Store, id checkpoint.ID, upper string) error {
	made, err := setAsideMade(upper)
	if err != nil {
		return err
	}
	if err := cs.RestoreDir(ctx, id, upper); err != nil {
		return err
	}
	for _, d := range made { // parents first
		p := filepath.Join(upper, d.path)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.Mkdir(p, d.mode.Perm()); err != nil {
			return fmt.Errorf("make %s again in the container's layer: %w", d.path, err)
		}
		if err := os.Lchown(p, d.uid, d.gid); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode&(os.ModePerm|os.ModeSticky|os.ModeSetuid|os.ModeSetgid)); err != nil {
			return err
		}
	}
	return nil
}

// setAsideMade removes the empty directories Docker made in a new
// container's layer upper and returns them, parents first.
func setAsideMade(upper string) ([]madeDir, error) {
	var made []madeDir
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == upper {
			return err
		}
		rel, _ := filepath.Rel(upper, p)
		if !d.IsDir() {
			return errdefs.Conflictf("the new container's layer already holds %s, which is not a directory Docker makes: its checkpoint cannot be restored over it; the session's files are safe: read them with `airlock diff`, or start again from them with `airlock fork`", names.Quote(rel))
		}
		if len(made) == maxMadeDirs {
			return errdefs.Conflictf("the new container's layer already holds more than %d directories: its checkpoint cannot be restored over them; the session's files are safe: read them with `airlock diff`, or start again from them with `airlock fork`", maxMadeDirs)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		if st == nil {
			return fmt.Errorf("stat %s: no owner", rel)
		}
		made = append(made, madeDir{path: rel, mode: info.Mode(), uid: int(st.Uid), gid: int(st.Gid)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, d := range slices.Backward(made) { // children first
		if err := os.Remove(filepath.Join(upper, d.path)); err != nil {
			return nil, fmt.Errorf("set aside %s of the new container's layer: %w", d.path, err)
		}
	}
	return made, nil
}

// restoreHome fills the running container's home tmpfs from checkpoint
// which of the session's home (0: the newest).
func (e *Engine) restoreHome(ctx context.Context, rec store.Session, containerID string, which checkpoint.ID) error {
	hs, err := e.homeCheckpoints(rec.ID, rec.Dir)
	if err != nil {
		return err
	}
	last, err := pick(hs, which)
	if err != nil || last == nil {
		return err
	}
	info, err := e.docker.ContainerInspect(ctx, containerID)
	if err != nil {
		return dockerError("inspect the session's container", err)
	}
	if info.State == nil || info.State.Pid <= 0 {
		return errdefs.Unavailablef("the session's container stopped as it started")
	}
	home, err := openHome(info.State.Pid)
	if err != nil {
		return err
	}
	defer home.Close()
	if err := hs.Restore(ctx, last.ID, home); err != nil {
		return fmt.Errorf("restore the session's home: %w", err)
	}
	return nil
}

// pick is checkpoint which of s, or its newest for 0 (nil: it has none).
func pick(s *checkpoint.Store, which checkpoint.ID) (*checkpoint.Checkpoint, error) {
	if which == 0 {
		return s.Latest()
	}
	return s.Get(which)
}

// awake wakes session id if it hibernates: for what writes its
// workspace (accept, discard).
func (e *Engine) awake(ctx context.Context, id string) error {
	rec, err := e.store.Session(ctx, id)
	if err != nil || rec.State != api.StateHibernated {
		return err
	}
	_, done, err := e.working(ctx, id)
	if err == nil {
		done()
	}
	return err
}
