package engine

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
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

// baseImage is the snapshot's image as an image in the snapshot store,
// saved from Docker the first time.
func (e *Engine) baseImage(ctx context.Context, snap api.Snapshot) (*snapshot.Image, error) {
	if snap.ImageID == "" {
		return nil, errdefs.NotFoundf("snapshot %s does not record its image's id: export it with --no-base", snap.ID)
	}
	entry := baseEntry(snap.ImageID)
	for _, name := range []string{entry, baseEntryPrefix + shortImageID(snap.ImageID)} {
		if img, err := e.snaps.Image(name); err == nil {
			return img, nil
		}
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
	files, sizes, dm, err := e.storeSave(rc, snap.Image)
	if err != nil {
		return nil, err
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

// savedManifest is the manifest.json of `docker save`.
type savedManifest []struct {
	Config string
	Layers []string
}

// storeSave stores the blobs of a `docker save` of image read from r in
// the snapshot store: by file name, their digests and sizes, and the
// save's manifest.
func (e *Engine) storeSave(r io.Reader, image string) (map[string]v1.Hash, map[v1.Hash]int64, savedManifest, error) {
	var dm savedManifest
	files := map[string]v1.Hash{}
	sizes := map[v1.Hash]int64{}
	tr := tar.NewReader(bufio.NewReaderSize(r, 1<<20))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read Docker's save of %s: %w", image, err)
		}
		name := path.Clean(hdr.Name)
		switch {
		case hdr.Typeflag != tar.TypeReg:
		case name == "manifest.json":
			if err := json.NewDecoder(tr).Decode(&dm); err != nil {
				return nil, nil, nil, fmt.Errorf("read Docker's save of %s: manifest.json: %w", image, err)
			}
		case strings.HasSuffix(name, "/layer.tar") || strings.HasPrefix(name, "blobs/") || (strings.HasSuffix(name, ".json") && !strings.Contains(name, "/")):
			b, err := e.snaps.NewBlob()
			if err != nil {
				return nil, nil, nil, err
			}
			if _, err := io.Copy(b, tr); err != nil {
				b.Abort()
				return nil, nil, nil, err
			}
			h, n, err := b.Commit()
			if err != nil {
				return nil, nil, nil, err
			}
			files[name], sizes[h] = h, n
		}
	}
	return files, sizes, dm, nil
}
