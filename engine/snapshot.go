package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/snapshot"
	"github.com/docker/docker/client"
)

// overlayDriver tells whether a container's storage driver keeps its
// changes in an overlay upper directory (GraphDriver.Data["UpperDir"]),
// which snapshots read and restores fill: Docker's overlay2, or Podman's
// overlay (containers/storage, the same layout under its own name).
func overlayDriver(name string) bool { return name == "overlay2" || name == "overlay" }

// Labels and layer names of snapshot images.
const (
	labelSnapshot   = "dev.airlock.snapshot"       // the api.Snapshot, JSON
	annotationBase  = "dev.airlock.blobs.base"     // the base image's config and layers, for export
	whatContainer   = "container"                  // the container's own changes and the agent's home
	whatWorkspace   = "workspace"                  // the workspace's upper layer
	workspacePrefix = "workspace/"                 // where the workspace layer puts its files
	homePrefix      = "home/airlock/"              // the home tmpfs, inside the container layer
	maxFork         = 100                          // sessions one fork makes at most
	forkParallel    = 10                           // sessions a fork makes at once
	baseEntryPrefix = "base-"                      // store entries of base images (export)
	snapshotRefName = "airlock-snapshot"           // repository name in exported tars
	createdByFormat = "airlock snapshot of %s: %s" // layer history
)

// containerSkip leaves out of the container layer what is not the
// container's own: mount points the engine binds in, the workspace, and
// the home tmpfs (taken from the tmpfs itself).
func containerSkip(rel string) bool {
	switch rel {
	case "workspace", "home/airlock", "etc/resolv.conf", "etc/hosts", "etc/hostname",
		"etc/airlock/ca-bundle.pem", "etc/apt/apt.conf.d/99airlock-proxy", ".dockerenv", "dev", "proc", "sys",
		"usr/sbin/docker-init": // the init Docker binds in
		return true
	}
	return false
}

func homeOnly(rel string) bool { return rel == "home/airlock" || strings.HasPrefix(rel, homePrefix) }

// notContainers is what a restore leaves out of the container layer: the
// home (applied after start, inside the container) and whatever
// containerSkip keeps out of a snapshot, with everything beneath.
func notContainers(rel string) bool {
	for p := rel; ; p = path.Dir(p) {
		if containerSkip(p) {
			return true
		}
		if !strings.Contains(p, "/") {
			return homeOnly(rel)
		}
	}
}

// openHome opens the agent's home inside a session's container. The
// container's root, /proc/PID/root (the kernel's link to it), is the
// trusted start; home/airlock is reached beneath it confined. Resolved as
// a path instead, an absolute symlink at /home (put there by the image, or
// by a snapshot's container layer) would resolve against the host's root,
// and the engine would read or write a host directory.
func openHome(pid int) (*confined.Root, error) {
	proc, err := confined.OpenRoot(fmt.Sprintf("/proc/%d/root", pid))
	if err != nil {
		return nil, fmt.Errorf("open the session's root: %w", err)
	}
	defer proc.Close()
	home, err := proc.OpenDir(strings.TrimPrefix(homePath, "/"))
	if err != nil {
		return nil, errdefs.Conflictf("the session's %s is not a plain directory (%v): /home or %s is a symlink (the image's, or the snapshot's), and the engine reads and writes the agent's home only where it mounted it; use an image whose /home is a directory", homePath, err, homePath)
	}
	return home, nil
}

// Snapshot captures a session: the container's own changes and the
// workspace's, each an OCI layer in the snapshot store. A running session
// is frozen while its layers are written and thawed before they are
// synced to disk; accepts and discards wait for it.
func (e *Engine) Snapshot(ctx context.Context, id string, req api.SnapshotRequest) (api.Snapshot, error) {
	t0 := time.Now()
	if err := e.awake(ctx, id); err != nil { // a hibernated session wakes, as for accept
		return api.Snapshot{}, err
	}
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.Snapshot{}, err
	}
	l := e.liveSession(rec.ID)
	if l == nil || rec.State == api.StateFailed || rec.State == api.StateCreating {
		return api.Snapshot{}, errdefs.Conflictf("session %s is %s: only a session with its workspace can be snapshotted", rec.ID, rec.State)
	}
	if strings.ContainsAny(req.Name, "/\\ \t\n") || len(req.Name) > 128 {
		return api.Snapshot{}, errdefs.Invalidf("snapshot name %q: use letters, digits, dots, dashes and underscores (at most 128)", req.Name)
	}
	c, err := e.snapshotContainer(ctx, rec)
	if err != nil {
		return api.Snapshot{}, err
	}

	// No accept or discard while the layers are read.
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return api.Snapshot{}, errGone(rec.ID)
	}
	end := e.snaps.Begin()
	defer end()
	blobs := make([]*snapshot.BlobWriter, 2)
	defer func() {
		for _, b := range blobs {
			if b != nil {
				b.Abort()
			}
		}
	}()
	for i := range blobs {
		if blobs[i], err = e.snaps.NewBlob(); err != nil {
			return api.Snapshot{}, err
		}
	}

	tFreeze := time.Now()
	thaw := func() {}
	if c.running {
		if thaw, err = e.freezeSession(ctx, rec, l); err != nil {
			return api.Snapshot{}, err
		}
		defer thaw()
	}
	cst, wst, err := e.writeLayers(blobs, c, l)
	if err != nil {
		return api.Snapshot{}, err
	}
	thaw()
	frozen := time.Since(tFreeze)

	snap := newSnapshot(rec, req.Name, c.imageID, frozen)
	layers, err := commitLayers(&snap, blobs, cst, wst)
	if err != nil {
		return api.Snapshot{}, err
	}
	snap.Took = time.Since(t0)
	if err := e.putSnapshot(ctx, &snap, layers); err != nil {
		return api.Snapshot{}, err
	}
	e.touch(rec.ID)
	e.log.Info("snapshot taken", "session", rec.ID, "snapshot", snap.ID, "frozen", frozen, "took", snap.Took)
	return snap, nil
}

// writeLayers writes a snapshot's two layers of a frozen session: the
// container's (its layer and its home) to blobs[0], the workspace's to
// blobs[1]. The session's directories are opened frozen, and read
// confined: beneath each, nothing is reached through a symlink.
func (e *Engine) writeLayers(blobs []*snapshot.BlobWriter, c snapshotted, l *live) (cst, wst snapshot.LayerStats, err error) {
	var sources []snapshot.Source
	if c.upperDir != "" {
		r, err := confined.OpenRoot(c.upperDir)
		if err != nil {
			return cst, wst, fmt.Errorf("open the container's layer: %w", err)
		}
		defer r.Close()
		sources = append(sources, snapshot.Source{Root: r, Skip: containerSkip})
	}
	if c.pid > 0 {
		home, err := openHome(c.pid)
		if err != nil {
			return cst, wst, err
		}
		defer home.Close()
		sources = append(sources, snapshot.Source{Root: home, Prefix: homePrefix})
	}
	ws, err := confined.OpenRoot(l.ws.Upper())
	if err != nil {
		return cst, wst, fmt.Errorf("open the workspace: %w", err)
	}
	defer ws.Close()
	cst, err = snapshot.WriteLayer(blobs[0], sources...)
	if err != nil {
		return cst, wst, e.layerWriteError("the container layer", err)
	}
	wst, err = snapshot.WriteLayer(blobs[1], snapshot.Source{Root: ws, Prefix: workspacePrefix})
	if err != nil {
		return cst, wst, e.layerWriteError("the workspace layer", err)
	}
	return cst, wst, nil
}

// commitLayers stores the written layers and lists them in snap.
func commitLayers(snap *api.Snapshot, blobs []*snapshot.BlobWriter, cst, wst snapshot.LayerStats) ([]snapshot.Layer, error) {
	var layers []snapshot.Layer
	for i, st := range []snapshot.LayerStats{cst, wst} {
		h, size, err := blobs[i].Commit()
		if err != nil {
			return nil, err
		}
		what := []string{whatContainer, whatWorkspace}[i]
		layers = append(layers, snapshot.Layer{Digest: h, Size: size, CreatedBy: fmt.Sprintf(createdByFormat, snap.Session, what)})
		snap.Layers = append(snap.Layers, api.SnapshotLayer{What: what, Digest: h.String(), Size: size, Files: st.Files, Bytes: st.Bytes, Delete: st.Whiteouts})
	}
	return layers, nil
}

// snapshotted is what a snapshot reads of a session's container.
type snapshotted struct {
	upperDir, imageID string
	pid               int  // of a running container
	running           bool // and not paused
}

// snapshotContainer finds the session's container layer and image (a
// session whose container is gone has only its image).
func (e *Engine) snapshotContainer(ctx context.Context, rec store.Session) (snapshotted, error) {
	var c snapshotted
	if rec.ContainerID != "" {
		info, err := e.docker.ContainerInspect(ctx, rec.ContainerID)
		if err != nil && !client.IsErrNotFound(err) {
			return c, dockerError("inspect the session's container", err)
		}
		if err == nil {
			if !overlayDriver(info.GraphDriver.Name) {
				return c, errdefs.Unavailablef("Docker stores containers with the %q storage driver; snapshots read the container's changes from overlay2 (the default): switch Docker to overlay2", info.GraphDriver.Name)
			}
			c.upperDir, c.imageID = info.GraphDriver.Data["UpperDir"], info.Image
			if info.State != nil && info.State.Running {
				c.pid, c.running = info.State.Pid, !info.State.Paused
			}
		}
	}
	if c.imageID == "" {
		if ii, err := e.docker.ImageInspect(ctx, rec.Image); err == nil {
			c.imageID = ii.ID
		}
	}
	return c, nil
}

// freezeSession freezes a running session for its snapshot; new work
// waits on l.freeze until the returned thaw (safe to call twice).
func (e *Engine) freezeSession(ctx context.Context, rec store.Session, l *live) (func(), error) {
	l.freeze.Lock()
	if err := e.freeze(ctx, rec.ContainerID); err != nil {
		l.freeze.Unlock()
		return nil, dockerError("freeze the session for its snapshot", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			defer l.freeze.Unlock()
			if err := e.docker.ContainerUnpause(context.WithoutCancel(ctx), rec.ContainerID); err != nil {
				e.log.Error("thaw a session after its snapshot", "session", rec.ID, "err", err)
			}
		})
	}, nil
}

// newSnapshot is the record of a snapshot of rec: what it was made from
// and the request that makes the session again.
func newSnapshot(rec store.Session, name, imageID string, frozen time.Duration) api.Snapshot {
	snap := api.Snapshot{
		ID: newID(), Name: name, Session: rec.ID, Project: rec.Project, Image: rec.Image, ImageID: imageID,
		Created: time.Now(), Frozen: frozen,
		Spec: api.CreateRequest{Project: rec.Project, Image: rec.Image, User: rec.User, Limits: rec.Limits, Env: rec.Env,
			CABundle: rec.CABundle, IdleTimeout: rec.IdleTimeout, CPUBudget: rec.CPUBudget, CostBudget: rec.CostBudget},
	}
	if rec.Egress != "" {
		var pol api.EgressPolicy
		if json.Unmarshal([]byte(rec.Egress), &pol) == nil {
			snap.Spec.Egress = &pol
		}
	}
	return snap
}

// putSnapshot writes the snapshot's image (its layers already stored),
// lists it in the store and records it.
func (e *Engine) putSnapshot(ctx context.Context, snap *api.Snapshot, layers []snapshot.Layer) error {
	meta, _ := json.Marshal(snap)
	man, cfg, err := snapshot.Compose(nil, nil, layers, map[string]string{labelSnapshot: string(meta)}, snap.Created, nil)
	if err != nil {
		return err
	}
	desc, err := e.snaps.PutImage(snap.ID, man, cfg, map[string]string{snapshot.AnnotationRefName: snap.ID})
	if err != nil {
		return err
	}
	snap.Digest = desc.Digest.String()
	if err := e.store.PutSnapshot(ctx, *snap); err != nil {
		e.snaps.Remove(snap.ID)
		return err
	}
	return nil
}

// Snapshots lists the snapshots.
func (e *Engine) Snapshots(ctx context.Context) ([]api.Snapshot, error) {
	return e.store.Snapshots(ctx)
}

// GetSnapshot finds a snapshot by id, id prefix or name.
func (e *Engine) GetSnapshot(ctx context.Context, ref string) (api.Snapshot, error) {
	return e.store.Snapshot(ctx, ref)
}

// RemoveSnapshot deletes a snapshot and the layers no other uses.
func (e *Engine) RemoveSnapshot(ctx context.Context, ref string) error {
	snap, err := e.store.Snapshot(ctx, ref)
	if err != nil {
		return err
	}
	if err := e.store.DeleteSnapshot(ctx, snap.ID); err != nil {
		return err
	}
	if err := e.snaps.Remove(snap.ID); err != nil {
		return err
	}
	if err := e.dropCachedLayers(); err != nil {
		e.log.Warn("drop the applied layers of removed snapshots", "err", err)
	}
	// The base image kept for exports goes with the last snapshot on it.
	rest, err := e.store.Snapshots(ctx)
	if err != nil {
		return err
	}
	for _, s := range rest {
		if s.ImageID == snap.ImageID {
			return nil
		}
	}
	for _, name := range []string{baseEntry(snap.ImageID), baseEntryPrefix + shortImageID(snap.ImageID)} {
		if _, ok := e.snaps.Get(name); ok {
			if err := e.snaps.Remove(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// openSnapshots opens the snapshot store and drops what a crash left: an
// image listed without its record, blobs nothing lists; and opens the
// layer cache, empty.
func (e *Engine) openSnapshots(ctx context.Context) error {
	var err error
	if e.snaps, err = snapshot.Open(filepath.Join(e.stateDir, "snapshots")); err != nil {
		return fmt.Errorf("open the snapshot store: %w", err)
	}
	recs, err := e.store.Snapshots(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, s := range recs {
		known[s.ID] = true
	}
	if err := e.snaps.Keep(func(id string) bool { return known[id] || strings.HasPrefix(id, baseEntryPrefix) }); err != nil {
		return err
	}
	if _, err = e.snaps.GC(); err != nil {
		return err
	}
	if e.layers, err = snapshot.OpenLayerCache(filepath.Join(e.stateDir, "layer-cache")); err != nil {
		return fmt.Errorf("open the layer cache: %w", err)
	}
	return nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
