package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/fastexec"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/snapshot"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// restoreSource fills a new session from a snapshot's layers.
type restoreSource struct {
	e    *Engine
	snap api.Snapshot
	// the layers by what they hold
	container, workspace v1.Hash
	// containerEmpty says the container layer changes none of the
	// container's own files (home aside, and the mount points Docker
	// makes in every container: mountPlaceholder): known once prepared.
	containerEmpty bool
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
	_, err := snapshot.ApplyLayer(s.open(h), t, snapshot.Limits{})
	return s.applyError(err)
}

// open opens layer h for ApplyLayer, checked against its digest.
func (s *restoreSource) open(h v1.Hash) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return s.e.snaps.Open(h) }
}

// applyError says why a layer could not be applied, and what to do.
func (s *restoreSource) applyError(err error) error {
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

// fillWorkspace fills the upper directory with the snapshot's workspace.
func (s *restoreSource) fillWorkspace(upper string) error {
	defer s.timed("fill workspace", time.Now())
	return s.clone(whatWorkspace, upper)
}

// fillContainer fills the container's own upper directory (Docker's,
// before the container starts) with the snapshot's container changes.
func (s *restoreSource) fillContainer(upperDir string) error {
	if s.container.Hex == "" {
		return nil
	}
	defer s.timed("fill container layer", time.Now())
	return s.clone(whatContainer, upperDir)
}

// The parts of the snapshot's layers a restore copies into each new
// session, as the layer cache holds them.
func (s *restoreSource) parts() map[string]cachedPart {
	p := map[string]cachedPart{whatWorkspace: {s.workspace, snapshot.Target{Prefix: workspacePrefix}}}
	if s.container.Hex != "" {
		p[whatContainer] = cachedPart{s.container, snapshot.Target{Skip: notContainers}}
	}
	return p
}

type cachedPart struct {
	layer v1.Hash
	t     snapshot.Target
}

// prepare applies the snapshot's layers to the layer cache, once for all
// the sessions of a restore and before any is made: a damaged or refused
// layer fails the restore with nothing to undo.
func (s *restoreSource) prepare() error {
	s.containerEmpty = s.container.Hex == ""
	for what, p := range s.parts() {
		if what == whatContainer {
			empty, err := s.e.layers.Only(cacheKey(what, p.layer), s.applyToCache(what, p), s.e.mountPlaceholder)
			if err != nil {
				return err
			}
			s.containerEmpty = empty
			continue
		}
		if err := s.e.layers.Fill(cacheKey(what, p.layer), s.applyToCache(what, p)); err != nil {
			return err
		}
	}
	return nil
}

// applyToCache applies a part of a layer into the cache's directory.
func (s *restoreSource) applyToCache(what string, p cachedPart) func(*confined.Root) error {
	return func(cache *confined.Root) error {
		defer s.timed("apply the "+what+" layer to the cache", time.Now())
		t := p.t
		t.Root = cache
		_, err := snapshot.ApplyLayer(s.open(p.layer), t, snapshot.Limits{})
		if errors.Is(err, syscall.ENOSPC) {
			// The cache is on the state directory's disk, not in the
			// session's workspace.
			return s.e.layerWriteError("the layer cache", err)
		}
		return s.applyError(err)
	}
}

// clone fills dir with a part of the snapshot's layers from the layer
// cache (applied there once, under the rules of every application, by
// prepare, or now if the cache lost it): each session gets its own copy
// (nothing is shared once made).
func (s *restoreSource) clone(what string, dir string) error {
	p := s.parts()[what]
	r, err := confined.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	var applyErr error
	apply := s.applyToCache(what, p)
	err = s.e.layers.Clone(cacheKey(what, p.layer), func(cache *confined.Root) error {
		applyErr = apply(cache)
		return applyErr
	}, r)
	switch {
	case err == nil || err == applyErr:
		return err
	case errors.Is(err, syscall.ENOSPC) && what == whatWorkspace:
		return errdefs.Invalidf("snapshot %s does not fit (%v): its workspace layer holds %s; restore it with a larger --workspace-size", s.snap.ID, err, humanBytes(workspaceBytes(s.snap)))
	}
	return fmt.Errorf("restore snapshot %s: %w", s.snap.ID, err)
}

// mountPlaceholder says whether an entry of a snapshot's container
// changes (rel, its path from /) is only what Docker makes in every
// session container's own layer for the mounts it binds there: the
// mount point (a directory, or an empty file for a file's bind) and the
// directories above it. A container started from the same spec holds
// the same already, so a restore need not write it (a warm container,
// already started, can take the snapshot).
func (e *Engine) mountPlaceholder(rel string, fi fs.FileInfo) bool {
	// containerSpec's mounts and tmpfs, and Docker's init.
	for _, t := range []string{workspacePath, resolvPath, aptProxyPath, caPath, homePath, fastexec.InitPath, fastexec.SocketDir, dockerInit} {
		t = strings.TrimPrefix(t, "/")
		switch {
		case rel == t:
			return fi.IsDir() || (fi.Mode().IsRegular() && fi.Size() == 0)
		case strings.HasPrefix(t, rel+"/"):
			return fi.IsDir()
		}
	}
	return false
}

// cacheKey names the part of a layer a restore applies (the workspace
// or the container changes) in the layer cache.
func cacheKey(what string, h v1.Hash) string { return what + "-" + h.Algorithm + "-" + h.Hex }

// dropCachedLayers removes from the layer cache the layers the snapshot
// store no longer holds.
func (e *Engine) dropCachedLayers() error {
	return e.layers.Drop(func(key string) bool {
		_, digest, _ := strings.Cut(key, "-")
		alg, hex, ok := strings.Cut(digest, "-")
		return ok && e.snaps.Has(v1.Hash{Algorithm: alg, Hex: hex})
	})
}

func (s *restoreSource) fillHome(pid int) error {
	if s.container.Hex == "" || pid <= 0 {
		return nil
	}
	defer s.timed("fill home", time.Now())
	home, err := openHome(pid)
	if err != nil {
		return err
	}
	defer home.Close()
	return s.apply(s.container, snapshot.Target{Prefix: homePrefix, Root: home})
}

// timed logs, at debug level, how long a restore's step took.
func (s *restoreSource) timed(step string, t time.Time) {
	s.e.log.Debug("restore timing", "snapshot", s.snap.ID, "step", step, "took", time.Since(t))
}

// Restore makes req.N new sessions (forkParallel at a time) from a
// snapshot: each starts with the snapshot's container changes, home and
// workspace, over the project as it is now. The workspace and container
// layers are applied once, into the layer cache, and copied from there.
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
	if err := src.prepare(); err != nil {
		return api.Restored{}, err
	}
	made, warning, err := e.createN(ctx, spec, src, n)
	if err != nil {
		return out, err
	}
	out.Sessions = made
	if warning != "" {
		out.Warnings = append(out.Warnings, warning)
	}
	e.log.Info("snapshot restored", "snapshot", snap.ID, "sessions", len(out.Sessions))
	return out, nil
}

// createN makes n sessions of spec from src, forkParallel at a time. It
// fails only when none could be made; otherwise warning says how many
// could not, and why the first did not.
func (e *Engine) createN(ctx context.Context, spec api.CreateRequest, src createMode, n int) (made []api.Session, warning string, err error) {
	sessions := make([]api.Session, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	slots := make(chan struct{}, forkParallel)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			sessions[i], errs[i] = e.create(ctx, spec, src)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] == nil {
			made = append(made, sessions[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		if len(made) == 0 {
			return nil, "", firstErr(errs)
		}
		warning = fmt.Sprintf("%d of %d sessions could not be made: %v", n-len(made), n, firstErr(errs))
	}
	return made, warning, nil
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
