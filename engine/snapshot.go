package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/snapshot"
	"github.com/docker/docker/client"
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
	maxFork         = 50                           // sessions one fork makes at most
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
	var upperDir, imageID string
	pid := 0
	running := false
	if rec.ContainerID != "" {
		info, err := e.docker.ContainerInspect(ctx, rec.ContainerID)
		if err != nil && !client.IsErrNotFound(err) {
			return api.Snapshot{}, dockerError("inspect the session's container", err)
		}
		if err == nil {
			if !overlayDriver(info.GraphDriver.Name) {
				return api.Snapshot{}, errdefs.Unavailablef("Docker stores containers with the %q storage driver; snapshots read the container's changes from overlay2 (the default): switch Docker to overlay2", info.GraphDriver.Name)
			}
			upperDir, imageID = info.GraphDriver.Data["UpperDir"], info.Image
			if info.State != nil && info.State.Running {
				pid, running = info.State.Pid, !info.State.Paused
			}
		}
	}
	if imageID == "" {
		if ii, err := e.docker.ImageInspect(ctx, rec.Image); err == nil {
			imageID = ii.ID
		}
	}

	// No accept or discard while the layers are read.
	l.mu.Lock()
	defer l.mu.Unlock()
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
	if running {
		l.freeze.Lock()
		if err := e.freeze(ctx, rec.ContainerID); err != nil {
			l.freeze.Unlock()
			return api.Snapshot{}, dockerError("freeze the session for its snapshot", err)
		}
		var once sync.Once
		thaw = func() {
			once.Do(func() {
				defer l.freeze.Unlock()
				if err := e.docker.ContainerUnpause(context.WithoutCancel(ctx), rec.ContainerID); err != nil {
					e.log.Error("thaw a session after its snapshot", "session", rec.ID, "err", err)
				}
			})
		}
		defer thaw()
	}
	// The session's directories are opened frozen, and read confined:
	// beneath each, nothing is reached through a symlink.
	var sources []snapshot.Source
	if upperDir != "" {
		r, err := confined.OpenRoot(upperDir)
		if err != nil {
			return api.Snapshot{}, fmt.Errorf("open the container's layer: %w", err)
		}
		defer r.Close()
		sources = append(sources, snapshot.Source{Root: r, Skip: containerSkip})
	}
	if pid > 0 {
		home, err := openHome(pid)
		if err != nil {
			return api.Snapshot{}, err
		}
		defer home.Close()
		sources = append(sources, snapshot.Source{Root: home, Prefix: homePrefix})
	}
	ws, err := confined.OpenRoot(l.ws.Upper())
	if err != nil {
		return api.Snapshot{}, fmt.Errorf("open the workspace: %w", err)
	}
	defer ws.Close()
	cst, err := snapshot.WriteLayer(blobs[0], sources...)
	if err != nil {
		return api.Snapshot{}, e.layerWriteError("the container layer", err)
	}
	wst, err := snapshot.WriteLayer(blobs[1], snapshot.Source{Root: ws, Prefix: workspacePrefix})
	if err != nil {
		return api.Snapshot{}, e.layerWriteError("the workspace layer", err)
	}
	thaw()
	frozen := time.Since(tFreeze)

	snap := api.Snapshot{
		ID: newID(), Name: req.Name, Session: rec.ID, Project: rec.Project, Image: rec.Image, ImageID: imageID,
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
	var layers []snapshot.Layer
	for i, st := range []snapshot.LayerStats{cst, wst} {
		h, size, err := blobs[i].Commit()
		if err != nil {
			return api.Snapshot{}, err
		}
		what := []string{whatContainer, whatWorkspace}[i]
		layers = append(layers, snapshot.Layer{Digest: h, Size: size, CreatedBy: fmt.Sprintf(createdByFormat, rec.ID, what)})
		snap.Layers = append(snap.Layers, api.SnapshotLayer{What: what, Digest: h.String(), Size: size, Files: st.Files, Bytes: st.Bytes, Delete: st.Whiteouts})
	}
	snap.Took = time.Since(t0)
	if err := e.putSnapshot(ctx, &snap, layers); err != nil {
		return api.Snapshot{}, err
	}
	e.touch(rec.ID)
	e.log.Info("snapshot taken", "session", rec.ID, "snapshot", snap.ID, "frozen", frozen, "took", snap.Took)
	return snap, nil
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
// image listed without its record, blobs nothing lists.
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
	_, err = e.snaps.GC()
	return err
}

// restoreSource fills a new session from a snapshot's layers.
type restoreSource struct {
	e    *Engine
	snap api.Snapshot
	// the layers by what they hold
	container, workspace v1.Hash
}

func (e *Engine) restoreSource(snap api.Snapshot) (*restoreSource, error) {
	h, err := v1.NewHash(snap.Digest)
	if err != nil {
		return nil, e.damaged(snap, err)
	}
	img, err := e.snaps.ImageAt(h)
	if err != nil {
		return nil, e.damaged(snap, err)
	}
	src := &restoreSource{e: e, snap: snap}
	for i, l := range snap.Layers {
		if i >= len(img.Manifest.Layers) || img.Manifest.Layers[i].Digest.String() != l.Digest {
			return nil, e.damaged(snap, errors.New("its image does not list the recorded layers"))
		}
		switch l.What {
		case whatContainer:
			src.container = img.Manifest.Layers[i].Digest
		case whatWorkspace:
			src.workspace = img.Manifest.Layers[i].Digest
		}
	}
	if src.workspace.Hex == "" {
		return nil, e.damaged(snap, errors.New("it has no workspace layer"))
	}
	return src, nil
}

func (e *Engine) damaged(snap api.Snapshot, err error) error {
	return errdefs.Invalidf("snapshot %s is damaged and cannot be restored (%v): remove it with `airlock snapshot rm %s`; a copy exported earlier can be imported again", snap.ID, err, snap.ID)
}

// layerWriteError classes a failure to write a snapshot's layer: a full
// disk is the user's to fix, and says how.
func (e *Engine) layerWriteError(what string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return errdefs.Unavailablef("write %s: the disk holding the engine's state (%s) is full: free space there, or remove snapshots (`airlock snapshots`, `airlock snapshot rm`)", what, e.stateDir)
	}
	return fmt.Errorf("write %s: %w", what, err)
}

// apply extracts layer h onto the target, checking the layer against its
// digest to the last byte.
func (s *restoreSource) apply(h v1.Hash, t snapshot.Target) error {
	open := func() (io.ReadCloser, error) { return s.e.snaps.Open(h) }
	_, err := snapshot.ApplyLayer(open, t, snapshot.Limits{})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, snapshot.ErrCorrupt):
		return s.e.damaged(s.snap, err)
	case errors.Is(err, syscall.ENOSPC):
		return errdefs.Invalidf("snapshot %s does not fit (%v): its workspace layer holds %s; restore it with a larger --workspace-size", s.snap.ID, err, humanBytes(workspaceBytes(s.snap)))
	case errors.Is(err, snapshot.ErrUnsafe), errors.Is(err, snapshot.ErrLimit):
		return errdefs.Invalidf("snapshot %s holds a layer Airlock refuses to apply (%v): it was not written by Airlock; remove it with `airlock snapshot rm %s`", s.snap.ID, err, s.snap.ID)
	}
	return fmt.Errorf("restore snapshot %s: %w", s.snap.ID, err)
}

func (s *restoreSource) fillWorkspace(upper string) error {
	r, err := confined.OpenRoot(upper)
	if err != nil {
		return err
	}
	defer r.Close()
	return s.apply(s.workspace, snapshot.Target{Prefix: workspacePrefix, Root: r})
}

func (s *restoreSource) fillContainer(upperDir string) error {
	if s.container.Hex == "" {
		return nil
	}
	r, err := confined.OpenRoot(upperDir)
	if err != nil {
		return err
	}
	defer r.Close()
	return s.apply(s.container, snapshot.Target{Root: r, Skip: notContainers})
}

func (s *restoreSource) fillHome(pid int) error {
	if s.container.Hex == "" || pid <= 0 {
		return nil
	}
	home, err := openHome(pid)
	if err != nil {
		return err
	}
	defer home.Close()
	return s.apply(s.container, snapshot.Target{Prefix: homePrefix, Root: home})
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

// Restore makes req.N new sessions (in parallel) from a snapshot: each
// starts with the snapshot's container changes, home and workspace, over
// the project as it is now.
func (e *Engine) Restore(ctx context.Context, ref string, req api.RestoreRequest) (api.Restored, error) {
	snap, err := e.store.Snapshot(ctx, ref)
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
	src, err := e.restoreSource(snap)
	if err != nil {
		return api.Restored{}, err
	}
	spec, err := restoreSpec(snap, req)
	if err != nil {
		return api.Restored{}, err
	}
	var out api.Restored
	spec.Image, out.Warnings, err = e.restoreImage(ctx, snap, req.Image)
	if err != nil {
		return api.Restored{}, err
	}
	sessions := make([]api.Session, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sessions[i], errs[i] = e.create(ctx, spec, src)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] == nil {
			out.Sessions = append(out.Sessions, sessions[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		if len(out.Sessions) == 0 {
			return out, firstErr(errs)
		}
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d of %d sessions could not be made: %v", n-len(out.Sessions), n, firstErr(errs)))
	}
	e.log.Info("snapshot restored", "snapshot", snap.ID, "sessions", len(out.Sessions))
	return out, nil
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// imported says whether a snapshot came from an archive. It then has no
// settings of its own: an archive's are never used, and its Spec is empty
// (a session always has a project).
func imported(s api.Snapshot) bool { return s.Spec.Project == "" }

// restoreSpec is what the restored sessions are created with: a local
// snapshot's settings with what the request overrides; for an imported
// one, the request's alone, over the engine's defaults.
func restoreSpec(snap api.Snapshot, req api.RestoreRequest) (api.CreateRequest, error) {
	if imported(snap) {
		if req.Project == "" {
			return api.CreateRequest{}, errdefs.Invalidf("snapshot %s was imported, and an archive's settings are never used: say which project the restored session works on with --project DIR (the user, image, limits and network policy are yours as well: --user, --image, or the engine's defaults)", snap.ID)
		}
		return api.CreateRequest{Project: req.Project, User: req.User}, nil
	}
	spec := snap.Spec
	if req.Project != "" {
		spec.Project = req.Project
	}
	if req.User != "" {
		spec.User = req.User
	}
	return spec, nil
}

// restoreImage picks the image a restore runs on: the one asked for; for
// an imported snapshot, the image its archive carried (loaded into Docker
// by content at import); else the snapshot's own (by id) when Docker still
// has it, else the image of that name now.
func (e *Engine) restoreImage(ctx context.Context, snap api.Snapshot, asked string) (string, []string, error) {
	if asked != "" {
		return asked, nil, nil
	}
	if imported(snap) {
		if snap.ImageID == "" {
			return "", nil, errdefs.Invalidf("snapshot %s was imported from an archive without the image it was taken on: say which image to run it on with --image NAME", snap.ID)
		}
		if _, err := e.docker.ImageInspect(ctx, snap.ImageID); err != nil {
			return "", nil, errdefs.NotFoundf("the image snapshot %s's archive carried (%s) is no longer in Docker: import the archive again, or say which image to run it on with --image NAME", snap.ID, shortImageID(snap.ImageID))
		}
		return snap.ImageID, nil, nil
	}
	byName, nameErr := e.docker.ImageInspect(ctx, snap.Image)
	if nameErr == nil && (snap.ImageID == "" || byName.ID == snap.ImageID) {
		return snap.Image, nil, nil
	}
	if snap.ImageID != "" {
		if _, err := e.docker.ImageInspect(ctx, snap.ImageID); err == nil {
			return snap.ImageID, []string{fmt.Sprintf("image %s was rebuilt since the snapshot; the restored session runs on the image the snapshot was taken on (%s)", snap.Image, shortImageID(snap.ImageID))}, nil
		}
	}
	if nameErr == nil {
		return snap.Image, []string{fmt.Sprintf("the image the snapshot was taken on (%s) is gone; its container changes are applied to today's %s, where installed packages may not fit", shortImageID(snap.ImageID), snap.Image)}, nil
	}
	return "", nil, errdefs.NotFoundf("snapshot %s needs image %s, which is not here: build it (`airlock image build`) or import the snapshot from an export that includes its image", snap.ID, snap.Image)
}

// baseEntry is the store entry of a base image, by its full id (a short
// one could be made to collide).
func baseEntry(imageID string) string {
	return baseEntryPrefix + strings.TrimPrefix(imageID, "sha256:")
}

func shortImageID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

func workspaceBytes(snap api.Snapshot) int64 {
	for _, l := range snap.Layers {
		if l.What == whatWorkspace {
			return l.Bytes
		}
	}
	return 0
}
