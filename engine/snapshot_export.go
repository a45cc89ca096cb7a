package engine

import (
	"archive/tar"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/snapshot"
	"github.com/docker/docker/client"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Export is a snapshot ready to be written as an image tar.
type Export struct {
	e        *Engine
	snap     api.Snapshot
	manifest []byte
	config   []byte
	extra    []v1.Hash
}

// PrepareExport makes the image an export writes: with base, the
// snapshot's layers on top of its image's own (saved from Docker into the
// snapshot store once), so that the tar runs anywhere (`docker load`) and
// imports on a machine without the image; without, the snapshot's layers
// alone. It fails before anything is written.
func (e *Engine) PrepareExport(ctx context.Context, ref string, withBase bool) (*Export, error) {
	snap, err := e.store.Snapshot(ctx, ref)
	if err != nil {
		return nil, err
	}
	h, err := v1.NewHash(snap.Digest)
	if err != nil {
		return nil, e.damaged(snap, err)
	}
	img, err := e.snaps.ImageAt(h)
	if err != nil {
		return nil, e.damaged(snap, err)
	}
	var baseCfg *v1.ConfigFile
	var baseLayers []snapshot.Layer
	var extra []v1.Hash
	ann := map[string]string{snapshot.AnnotationID: snap.ID}
	if withBase {
		base, err := e.baseImage(ctx, snap)
		if err != nil {
			return nil, err
		}
		baseCfg, baseLayers = &base.Config, base.Layers()
		extra = append(extra, base.Manifest.Config.Digest)
		// The base image's own config travels too: an import loads the
		// base into Docker under its original id.
		ann[annotationBase] = base.Manifest.Config.Digest.String()
	}
	man, cfg, err := snapshot.Compose(baseCfg, baseLayers, img.Layers(), map[string]string{labelSnapshot: exportLabel(snap)}, snap.Created, ann)
	if err != nil {
		return nil, err
	}
	return &Export{e: e, snap: snap, manifest: man, config: cfg, extra: extra}, nil
}

// Write writes the image tar.
func (x *Export) Write(w io.Writer) error {
	ref := snapshotRefName + ":" + x.snap.ID[:12]
	if x.snap.Name != "" && validTag(x.snap.Name) {
		ref = snapshotRefName + ":" + x.snap.Name
	}
	return x.e.snaps.WriteTar(w, x.manifest, x.config, ref, x.extra...)
}

// exportLabel is the snapshot as an archive carries it: what it is, never
// how it ran. The settings hold environment values, the CA bundle's path,
// network rules naming stored secrets and the project's path; an import
// would not use them anyway.
func exportLabel(s api.Snapshot) string {
	s.Spec, s.Project, s.Digest = api.CreateRequest{}, "", ""
	b, _ := json.Marshal(s)
	return string(b)
}

func validTag(s string) bool {
	if len(s) > 128 || s == "" || s[0] == '.' || s[0] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Import reads an image tar written by Export into a snapshot. The archive
// is untrusted, whoever made it: only its snapshot layers are kept, each
// checked entry by entry by the rules restore applies them with, and of its
// label only the layers' roles and the name. Ids, project, settings and
// image names are never taken from it (a restore asks for them). When the
// tar carries the base image and Docker lacks it, the base is loaded into
// Docker by content, under no name.
func (e *Engine) Import(ctx context.Context, r io.Reader) (api.Snapshot, []string, error) {
	end := e.snaps.Begin()
	defer func() {
		end()
		e.snaps.GC() // the tar's full image is not kept, only its layers
	}()
	img, err := e.snaps.ReadTar(r)
	if err != nil {
		switch {
		case errors.Is(err, snapshot.ErrCorrupt):
			return api.Snapshot{}, nil, errdefs.Invalidf("the archive is damaged (%v): export the snapshot again", err)
		case errors.Is(err, snapshot.ErrArchive):
			return api.Snapshot{}, nil, errdefs.Invalidf("%v: only archives written by `airlock snapshot export` import; export the snapshot again", err)
		case errors.Is(err, syscall.ENOSPC):
			return api.Snapshot{}, nil, errdefs.Unavailablef("no room for the archive in the engine's state directory (%v): free some disk space", err)
		}
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive cannot be read (%v): it is not a tar written by `airlock snapshot export`, or it was cut short; export it again", err)
	}
	return e.importImage(ctx, img)
}

// importLayers are the media types of layers an import takes: uncompressed
// tars, as Export writes them.
var importLayers = map[types.MediaType]bool{types.OCIUncompressedLayer: true, types.DockerUncompressedLayer: true}

func (e *Engine) importImage(ctx context.Context, img *snapshot.Image) (api.Snapshot, []string, error) {
	label := img.Config.Config.Labels[labelSnapshot]
	if label == "" {
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive is an image but not an Airlock snapshot (no %s label): only `airlock snapshot export` archives import", labelSnapshot)
	}
	var claim api.Snapshot
	if err := json.Unmarshal([]byte(label), &claim); err != nil {
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive's snapshot label is not readable (%v): export the snapshot again", err)
	}
	if err := checkClaim(claim); err != nil {
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive's snapshot label is not one Airlock writes (%v): export the snapshot again", err)
	}
	if claim.Session != "" {
		// Naming one of this engine's sessions is believed only of an
		// export of one of its snapshots coming back; the import belongs to
		// no session either way.
		own, err := e.store.Snapshot(ctx, claim.ID)
		if _, serr := e.store.Session(ctx, claim.Session); serr == nil && (err != nil || own.ID != claim.ID || own.Session != claim.Session) {
			return api.Snapshot{}, nil, errdefs.Conflictf("the archive claims to be a snapshot of session %s, which is a session of this engine: take a snapshot of it with `airlock snapshot %s` instead; an archive that really comes from elsewhere was altered, so ask its author for a new export", claim.Session, claim.Session)
		}
	}
	all := img.Layers()
	k := len(claim.Layers)
	if len(all) < k {
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive has %d layers, fewer than its snapshot's %d: export the snapshot again", len(all), k)
	}
	ours, base := all[len(all)-k:], all[:len(all)-k]
	snap := api.Snapshot{ID: newID(), Created: time.Now()}
	for i, l := range ours {
		what := claim.Layers[i].What
		if l.Digest.String() != claim.Layers[i].Digest {
			return api.Snapshot{}, nil, errdefs.Invalidf("the archive's layer %d is %s, not the snapshot's %s: export the snapshot again", i, l.Digest, claim.Layers[i].Digest)
		}
		if mt := img.Manifest.Layers[len(base)+i].MediaType; !importLayers[mt] {
			return api.Snapshot{}, nil, errdefs.Invalidf("the archive's %s layer is a %s, not the uncompressed tar `airlock snapshot export` writes: export the snapshot again", what, mt)
		}
		st, err := e.checkLayer(l.Digest, what)
		if err != nil {
			if errors.Is(err, snapshot.ErrCorrupt) {
				return api.Snapshot{}, nil, errdefs.Invalidf("the archive is damaged (%v): export the snapshot again", err)
			}
			return api.Snapshot{}, nil, errdefs.Invalidf("the archive's %s layer is refused (%v): Airlock imports only what `airlock snapshot export` writes, so this one was made or altered by hand; ask for a new export", what, err)
		}
		ours[i].CreatedBy = fmt.Sprintf("airlock snapshot (imported): %s", what)
		snap.Layers = append(snap.Layers, api.SnapshotLayer{What: what, Digest: l.Digest.String(), Size: l.Size, Files: st.Files, Bytes: st.Bytes, Delete: st.Whiteouts})
	}
	var warnings []string
	if claim.Name != "" {
		if _, err := e.store.Snapshot(ctx, claim.Name); err == nil || !validTag(claim.Name) {
			warnings = append(warnings, fmt.Sprintf("the archive's name %q is taken here (or not a valid name): the snapshot is imported without a name", claim.Name))
		} else {
			snap.Name = claim.Name
		}
	}
	id, w, err := e.importBase(ctx, img, base)
	if err != nil {
		return api.Snapshot{}, nil, err
	}
	snap.ImageID, warnings = id, append(warnings, w...)
	if id == "" {
		warnings = append(warnings, fmt.Sprintf("the archive does not carry the image it was taken on (it names %q): restore it with --image NAME", claim.Image))
	}
	if err := e.putSnapshot(ctx, &snap, ours); err != nil {
		return api.Snapshot{}, nil, err
	}
	e.log.Info("snapshot imported", "snapshot", snap.ID)
	return snap, warnings, nil
}

// checkClaim checks the shape of an archive's label: the layers Export
// writes (a workspace layer last, a container layer before it) and ids
// such as the engine makes.
func checkClaim(c api.Snapshot) error {
	switch {
	case len(c.Layers) == 1 && c.Layers[0].What == whatWorkspace:
	case len(c.Layers) == 2 && c.Layers[0].What == whatContainer && c.Layers[1].What == whatWorkspace:
	default:
		return errors.New("its layers are not a container layer and a workspace layer")
	}
	for _, id := range []string{c.ID, c.Session} {
		if id != "" && !validID(id) {
			return fmt.Errorf("%q is not an id Airlock makes", id)
		}
	}
	return nil
}

func validID(id string) bool {
	if len(id) != 12 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// checkLayer reads a stored layer whole, checking every entry (and the
// blob's digest). On top of the rules of any layer: a workspace layer
// holds the workspace only; a container layer never holds what the
// engine mounts into a session, and its home, if any, is a directory.
func (e *Engine) checkLayer(h v1.Hash, what string) (snapshot.LayerStats, error) {
	r, err := e.snaps.Open(h)
	if err != nil {
		return snapshot.LayerStats{}, err
	}
	defer r.Close()
	refuse := func(name, why string) error {
		return &snapshot.EntryError{Name: name, Reason: why, Err: snapshot.ErrUnsafe}
	}
	visit := func(name string, typ byte) error {
		ws := strings.TrimSuffix(workspacePrefix, "/")
		inWorkspace := name == ws || strings.HasPrefix(name, workspacePrefix)
		switch {
		case what == whatWorkspace && !inWorkspace:
			return refuse(name, "a workspace layer holds the workspace only")
		case what == whatWorkspace:
		case inWorkspace:
			return refuse(name, "a container layer never holds the workspace")
		case (name == "home" || name == "home/airlock") && typ != tar.TypeDir:
			return refuse(name, "the agent's home must be a directory")
		case !homeOnly(name) && notContainers(name):
			return refuse(name, "a path the engine mounts into every session")
		}
		return nil
	}
	st, err := snapshot.CheckLayer(r, snapshot.Limits{}, visit)
	if err == nil {
		_, err = io.Copy(io.Discard, r) // the digest, to the last byte
	}
	return st, err
}

// importBase makes the base image an archive carries available: it is
// checked (its config names the base layers, all in the archive), kept as
// the base entry (a later export needs no save), and loaded into Docker
// unless Docker has it; never under a name, which could take one of the
// user's. It returns the image's id, "" when the archive carries none.
func (e *Engine) importBase(ctx context.Context, img *snapshot.Image, base []snapshot.Layer) (string, []string, error) {
	cfg := img.Manifest.Annotations[annotationBase]
	if cfg == "" || len(base) == 0 {
		return "", nil, nil
	}
	bad := func(why string) error {
		return errdefs.Invalidf("the archive's base image %s: %s; export the snapshot again", cfg, why)
	}
	ch, err := v1.NewHash(cfg)
	if err != nil || !e.snaps.Has(ch) {
		return "", nil, bad("the archive lacks its config")
	}
	if size, err := e.snaps.BlobSize(ch); err != nil || size > snapshot.MaxJSON {
		return "", nil, bad(fmt.Sprintf("its config is more than %d MiB", snapshot.MaxJSON>>20))
	}
	config, err := e.snaps.ReadBytes(ch)
	if err != nil {
		return "", nil, bad(err.Error())
	}
	var c v1.ConfigFile
	if err := json.Unmarshal(config, &c); err != nil {
		return "", nil, bad("its config is not an image config")
	}
	if len(c.RootFS.DiffIDs) != len(base) {
		return "", nil, bad("its config does not list the archive's base layers")
	}
	for i, d := range c.RootFS.DiffIDs {
		if base[i].Digest != d {
			return "", nil, bad("its config does not list the archive's base layers")
		}
	}
	if _, err := e.snaps.PutImage(baseEntry(ch.String()), snapshot.Manifest(config, base, nil), config, map[string]string{snapshot.AnnotationRefName: ch.String()}); err != nil {
		return "", nil, err
	}
	if _, err := e.docker.ImageInspect(ctx, ch.String()); err == nil {
		return ch.String(), nil, nil
	}
	if err := e.loadBase(ctx, ch, base); err != nil {
		return "", nil, err
	}
	return ch.String(), []string{fmt.Sprintf("loaded the snapshot's image into Docker (%s, under no name)", shortImageID(ch.String()))}, nil
}

// loadBase loads the base image from the store into Docker as a
// docker-archive stream: its original config (so its id is the config's
// digest) and layers, with no repository tag.
func (e *Engine) loadBase(ctx context.Context, ch v1.Hash, layers []snapshot.Layer) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := func() error {
			var names []string
			for _, l := range layers {
				names = append(names, l.Digest.Hex+"/layer.tar")
			}
			dm, _ := json.Marshal([]map[string]any{{"Config": ch.Hex + ".json", "RepoTags": []string{}, "Layers": names}})
			if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(dm))}); err != nil {
				return err
			}
			tw.Write(dm)
			for i, h := range append([]v1.Hash{ch}, layerDigests(layers)...) {
				name := ch.Hex + ".json"
				if i > 0 {
					name = names[i-1]
				}
				rc, err := e.snaps.Open(h)
				if err != nil {
					return err
				}
				size, err := e.snaps.BlobSize(h)
				if err != nil {
					rc.Close()
					return err
				}
				if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size}); err != nil {
					rc.Close()
					return err
				}
				_, err = io.Copy(tw, rc)
				rc.Close()
				if err != nil {
					return err
				}
			}
			return tw.Close()
		}()
		pw.CloseWithError(err)
	}()
	resp, err := e.docker.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		pr.CloseWithError(err)
		return dockerError("load the snapshot's image into Docker", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err != nil {
			break
		}
		if m.Error != "" {
			return errdefs.Invalidf("Docker could not load the snapshot's image (%s): export the snapshot again", m.Error)
		}
	}
	if _, err := e.docker.ImageInspect(ctx, ch.String()); err != nil {
		return fmt.Errorf("Docker loaded the snapshot's image but does not list %s", ch)
	}
	return nil
}

func layerDigests(ls []snapshot.Layer) []v1.Hash {
	out := make([]v1.Hash, len(ls))
	for i, l := range ls {
		out[i] = l.Digest
	}
	return out
}
