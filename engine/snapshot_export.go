package engine

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/snapshot"
	"github.com/docker/docker/client"
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
	man, cfg, err := snapshot.Compose(baseCfg, baseLayers, img.Layers(), map[string]string{labelSnapshot: img.Config.Config.Labels[labelSnapshot]}, snap.Created, ann)
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

// baseImage is the snapshot's image as an image in the snapshot store,
// saved from Docker the first time.
func (e *Engine) baseImage(ctx context.Context, snap api.Snapshot) (*snapshot.Image, error) {
	if snap.ImageID == "" {
		return nil, errdefs.NotFoundf("snapshot %s does not record its image's id: export it with --no-base", snap.ID)
	}
	entry := baseEntryPrefix + shortImageID(snap.ImageID)
	if img, err := e.snaps.Image(entry); err == nil {
		return img, nil
	}
	if _, err := e.docker.ImageInspect(ctx, snap.ImageID); err != nil {
		if client.IsErrNotFound(err) {
			return nil, errdefs.NotFoundf("the image snapshot %s was taken on (%s, %s) is no longer in Docker: export with --no-base (the importing machine then needs that image)", snap.ID, snap.Image, shortImageID(snap.ImageID))
		}
		return nil, dockerError("inspect the snapshot's image", err)
	}
	rc, err := e.docker.ImageSave(ctx, []string{snap.ImageID})
	if err != nil {
		return nil, dockerError("save the snapshot's image", err)
	}
	defer rc.Close()
	end := e.snaps.Begin()
	defer end()
	files := map[string]v1.Hash{}
	sizes := map[v1.Hash]int64{}
	var dm []struct {
		Config string
		Layers []string
	}
	tr := tar.NewReader(bufio.NewReaderSize(rc, 1<<20))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read Docker's save of %s: %w", snap.Image, err)
		}
		name := path.Clean(hdr.Name)
		switch {
		case hdr.Typeflag != tar.TypeReg:
		case name == "manifest.json":
			if err := json.NewDecoder(tr).Decode(&dm); err != nil {
				return nil, fmt.Errorf("read Docker's save of %s: manifest.json: %w", snap.Image, err)
			}
		case strings.HasSuffix(name, "/layer.tar") || strings.HasPrefix(name, "blobs/") || (strings.HasSuffix(name, ".json") && !strings.Contains(name, "/")):
			b, err := e.snaps.NewBlob()
			if err != nil {
				return nil, err
			}
			if _, err := io.Copy(b, tr); err != nil {
				b.Abort()
				return nil, err
			}
			h, n, err := b.Commit()
			if err != nil {
				return nil, err
			}
			files[name], sizes[h] = h, n
		}
	}
	if len(dm) != 1 {
		return nil, fmt.Errorf("Docker's save of %s has %d images, want 1", snap.Image, len(dm))
	}
	ch, ok := files[path.Clean(dm[0].Config)]
	if !ok {
		return nil, fmt.Errorf("Docker's save of %s lacks its config", snap.Image)
	}
	config, err := e.snaps.ReadBytes(ch)
	if err != nil {
		return nil, err
	}
	var layers []snapshot.Layer
	for _, l := range dm[0].Layers {
		h, ok := files[path.Clean(l)]
		if !ok {
			return nil, fmt.Errorf("Docker's save of %s lacks layer %s", snap.Image, l)
		}
		layers = append(layers, snapshot.Layer{Digest: h, Size: sizes[h]})
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal(config, &cfg); err != nil {
		return nil, err
	}
	for i, d := range cfg.RootFS.DiffIDs {
		if i >= len(layers) || layers[i].Digest != d {
			return nil, fmt.Errorf("Docker's save of %s has layers that do not match its config (compressed layers are not supported)", snap.Image)
		}
	}
	man := snapshot.Manifest(config, layers, nil)
	if _, err := e.snaps.PutImage(entry, man, config, map[string]string{snapshot.AnnotationRefName: snap.Image}); err != nil {
		return nil, err
	}
	return e.snaps.Image(entry)
}

// Import reads an image tar written by Export (or by any tool, if it
// carries an Airlock snapshot's label) into a snapshot. When the tar holds
// the base image and Docker lacks it, the base is loaded into Docker.
func (e *Engine) Import(ctx context.Context, r io.Reader) (api.Snapshot, []string, error) {
	end := e.snaps.Begin()
	img, err := e.snaps.ReadTar(r)
	if err != nil {
		end()
		e.snaps.GC()
		if errors.Is(err, snapshot.ErrCorrupt) {
			return api.Snapshot{}, nil, errdefs.Invalidf("the archive is damaged (%v): export the snapshot again", err)
		}
		if strings.Contains(err.Error(), "not an OCI image layout") {
			return api.Snapshot{}, nil, errdefs.Invalidf("%v", err)
		}
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive cannot be read (%v): it is not a tar written by `airlock snapshot export`, or it was cut short; export it again", err)
	}
	snap, warnings, err := e.importImage(ctx, img)
	end()
	e.snaps.GC() // the tar's full image is not kept, only its layers
	return snap, warnings, err
}

func (e *Engine) importImage(ctx context.Context, img *snapshot.Image) (api.Snapshot, []string, error) {
	label := img.Config.Config.Labels[labelSnapshot]
	if label == "" {
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive is an image but not an Airlock snapshot (no %s label): only `airlock snapshot export` archives import", labelSnapshot)
	}
	var snap api.Snapshot
	if err := json.Unmarshal([]byte(label), &snap); err != nil || len(snap.Layers) == 0 {
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive's snapshot label is not readable (%v): export the snapshot again", err)
	}
	all := img.Layers()
	k := len(snap.Layers)
	if len(all) < k {
		return api.Snapshot{}, nil, errdefs.Invalidf("the archive has %d layers, fewer than its snapshot's %d", len(all), k)
	}
	ours, base := all[len(all)-k:], all[:len(all)-k]
	for i, l := range ours {
		if l.Digest.String() != snap.Layers[i].Digest {
			return api.Snapshot{}, nil, errdefs.Invalidf("the archive's layer %d is %s, not the snapshot's %s", i, l.Digest, snap.Layers[i].Digest)
		}
	}
	var warnings []string
	if cfg := img.Manifest.Annotations[annotationBase]; len(base) > 0 && cfg != "" && snap.ImageID == cfg {
		// Kept as the base entry, so that exporting again needs no save.
		if ch, err := v1.NewHash(cfg); err == nil {
			if config, err := e.snaps.ReadBytes(ch); err == nil {
				e.snaps.PutImage(baseEntryPrefix+shortImageID(cfg), snapshot.Manifest(config, base, nil), config, map[string]string{snapshot.AnnotationRefName: snap.Image})
			}
		}
	}
	if _, err := e.docker.ImageInspect(ctx, snap.ImageID); err != nil {
		switch cfg := img.Manifest.Annotations[annotationBase]; {
		case len(base) > 0 && cfg != "":
			if err := e.loadBase(ctx, snap, cfg, base); err != nil {
				return api.Snapshot{}, nil, err
			}
			warnings = append(warnings, fmt.Sprintf("loaded the snapshot's image into Docker (%s)", shortImageID(snap.ImageID)))
		default:
			if _, err := e.docker.ImageInspect(ctx, snap.Image); err != nil {
				warnings = append(warnings, fmt.Sprintf("image %s is not here and the archive does not carry it: build it before restoring (`airlock image build`)", snap.Image))
			} else {
				warnings = append(warnings, fmt.Sprintf("the archive does not carry the image it was taken on; restores use today's %s", snap.Image))
			}
		}
	}
	if _, err := e.store.Snapshot(ctx, snap.ID); err == nil {
		snap.ID = newID() // imported twice: a second snapshot
	}
	snap.Digest = ""
	if err := e.putSnapshot(ctx, &snap, ours); err != nil {
		return api.Snapshot{}, nil, err
	}
	// putSnapshot wrote the label with the new id; the layer history
	// keeps the original session's.
	e.log.Info("snapshot imported", "snapshot", snap.ID)
	return snap, warnings, nil
}

// loadBase loads the base image from the store into Docker as a
// docker-archive stream: its original config (so its id is the one the
// snapshot names) and layers.
func (e *Engine) loadBase(ctx context.Context, snap api.Snapshot, cfgDigest string, layers []snapshot.Layer) error {
	ch, err := v1.NewHash(cfgDigest)
	if err != nil || !e.snaps.Has(ch) {
		return errdefs.Invalidf("the archive names a base image config it lacks (%s): export the snapshot again", cfgDigest)
	}
	if snap.ImageID != "" && ch.String() != snap.ImageID {
		return errdefs.Invalidf("the archive's base image is %s, not the %s the snapshot was taken on", ch, snap.ImageID)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := func() error {
			var names []string
			for _, l := range layers {
				names = append(names, l.Digest.Hex+"/layer.tar")
			}
			var tags []string
			if _, err := e.docker.ImageInspect(ctx, snap.Image); err != nil && strings.Contains(snap.Image, ":") {
				tags = []string{snap.Image} // the name is free: give it back
			}
			dm, _ := json.Marshal([]map[string]any{{"Config": ch.Hex + ".json", "RepoTags": tags, "Layers": names}})
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
			return fmt.Errorf("Docker could not load the snapshot's image: %s", m.Error)
		}
	}
	if _, err := e.docker.ImageInspect(ctx, snap.ImageID); err != nil {
		return fmt.Errorf("Docker loaded the snapshot's image but does not list %s", snap.ImageID)
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
