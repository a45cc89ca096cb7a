package snapshot

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Layer is a stored layer blob and how it was made.
type Layer struct {
	Digest    v1.Hash
	Size      int64
	CreatedBy string
}

// Image is an image manifest with its config, as stored.
type Image struct {
	Digest    v1.Hash
	Manifest  v1.Manifest
	Config    v1.ConfigFile
	ConfigRaw []byte
}

// Layers are the image's layers in order, bottom first.
func (img *Image) Layers() []Layer {
	var out []Layer
	for i, l := range img.Manifest.Layers {
		var by string
		if h := img.layerHistory(); i < len(h) {
			by = h[i].CreatedBy
		}
		out = append(out, Layer{Digest: l.Digest, Size: l.Size, CreatedBy: by})
	}
	return out
}

func (img *Image) layerHistory() []v1.History {
	var h []v1.History
	for _, e := range img.Config.History {
		if !e.EmptyLayer {
			h = append(h, e)
		}
	}
	return h
}

// Compose makes the manifest and config of an image of layers on top of
// a base image (nil config and no layers for none): the base's config
// with the layers appended to its root filesystem and history, and labels
// added.
func Compose(base *v1.ConfigFile, baseLayers, layers []Layer, labels map[string]string, created time.Time, annotations map[string]string) (manifest, config []byte, err error) {
	var cfg v1.ConfigFile
	if base != nil {
		cfg = *base.DeepCopy()
	} else {
		cfg = v1.ConfigFile{Architecture: runtime.GOARCH, OS: "linux"}
	}
	if len(cfg.RootFS.DiffIDs) != len(baseLayers) {
		return nil, nil, fmt.Errorf("the base config lists %d layers, not %d", len(cfg.RootFS.DiffIDs), len(baseLayers))
	}
	cfg.Created = v1.Time{Time: created.UTC()}
	cfg.RootFS.Type = "layers"
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.Digest)
		cfg.History = append(cfg.History, v1.History{Created: v1.Time{Time: created.UTC()}, CreatedBy: l.CreatedBy})
	}
	if len(labels) > 0 {
		if cfg.Config.Labels == nil {
			cfg.Config.Labels = map[string]string{}
		}
		for k, v := range labels {
			cfg.Config.Labels[k] = v
		}
	}
	config, err = json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	return Manifest(config, append(append([]Layer{}, baseLayers...), layers...), annotations), config, nil
}

// Manifest is the OCI manifest of config and its layers (uncompressed
// tars).
func Manifest(config []byte, layers []Layer, annotations map[string]string) []byte {
	ch, _, _ := v1.SHA256(bytes.NewReader(config))
	man := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(config)), Digest: ch},
		Annotations:   annotations,
	}
	for _, l := range layers {
		man.Layers = append(man.Layers, v1.Descriptor{MediaType: types.OCIUncompressedLayer, Digest: l.Digest, Size: l.Size})
	}
	data, _ := json.Marshal(man)
	return data
}

// PutImage stores an image's manifest and config (its layers already
// stored) and lists it under id.
func (s *Store) PutImage(id string, manifest, config []byte, annotations map[string]string) (v1.Descriptor, error) {
	if _, err := s.PutBytes(config); err != nil {
		return v1.Descriptor{}, err
	}
	mh, err := s.PutBytes(manifest)
	if err != nil {
		return v1.Descriptor{}, err
	}
	desc := v1.Descriptor{MediaType: types.OCIManifestSchema1, Size: int64(len(manifest)), Digest: mh, Annotations: annotations}
	return desc, s.Add(id, desc)
}

// Image reads the image listed under id, checking its manifest and config
// against their digests.
func (s *Store) Image(id string) (*Image, error) {
	desc, ok := s.Get(id)
	if !ok {
		return nil, fmt.Errorf("no image %s in the store", id)
	}
	return s.ImageAt(desc.Digest)
}

// ImageAt reads the image whose manifest has digest h: manifest and
// config of at most MaxJSON bytes each.
func (s *Store) ImageAt(h v1.Hash) (*Image, error) {
	data, err := s.readJSON(h, "manifest")
	if err != nil {
		return nil, err
	}
	img := &Image{Digest: h}
	if err := json.Unmarshal(data, &img.Manifest); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, h, err)
	}
	if img.ConfigRaw, err = s.readJSON(img.Manifest.Config.Digest, "config"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(img.ConfigRaw, &img.Config); err != nil {
		return nil, fmt.Errorf("%w: config %s: %v", ErrCorrupt, img.Manifest.Config.Digest, err)
	}
	return img, nil
}

// MaxJSON is the size of the largest index, manifest or config the store
// reads (Docker's and containerd's own limit for manifests).
const MaxJSON = 4 << 20

// readJSON reads a small blob whole, refusing one larger than MaxJSON.
func (s *Store) readJSON(h v1.Hash, what string) ([]byte, error) {
	if size, err := s.BlobSize(h); err == nil && size > MaxJSON {
		return nil, fmt.Errorf("%w: the image's %s is %d bytes, more than the %d MiB Airlock reads", ErrArchive, what, size, MaxJSON>>20)
	}
	return s.ReadBytes(h)
}

// WriteTar writes an image as an OCI image layout in a tar (oci-layout,
// index.json, blobs/sha256/...), with the manifest.json that `docker load`
// reads beside it. manifest and config are written from memory; every
// other blob the manifest names, and extra, comes from the store. ref
// names the image in both indexes.
func (s *Store) WriteTar(w io.Writer, manifest, config []byte, ref string, extra ...v1.Hash) error {
	var man v1.Manifest
	if err := json.Unmarshal(manifest, &man); err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	now := time.Now()
	file := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	mh, _, _ := v1.SHA256(bytes.NewReader(manifest))
	index, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: types.OCIManifestSchema1, Size: int64(len(manifest)), Digest: mh,
		Annotations: map[string]string{AnnotationRefName: ref},
	}}})
	dockerManifest := []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{Config: "blobs/sha256/" + man.Config.Digest.Hex}}
	if strings.Contains(ref, ":") {
		dockerManifest[0].RepoTags = []string{ref}
	}
	for _, l := range man.Layers {
		dockerManifest[0].Layers = append(dockerManifest[0].Layers, "blobs/sha256/"+l.Digest.Hex)
	}
	dm, _ := json.Marshal(dockerManifest)
	for _, f := range []struct {
		name string
		data []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index}, {"manifest.json", dm},
		{"blobs/sha256/" + mh.Hex, manifest}, {"blobs/sha256/" + man.Config.Digest.Hex, config}} {
		if err := file(f.name, f.data); err != nil {
			return err
		}
	}
	seen := map[string]bool{mh.Hex: true, man.Config.Digest.Hex: true}
	blobs := extra
	for _, l := range man.Layers {
		blobs = append(blobs, l.Digest)
	}
	for _, h := range blobs {
		if seen[h.Hex] {
			continue
		}
		seen[h.Hex] = true
		if err := s.copyBlob(tw, h, now); err != nil {
			return err
		}
	}
	return tw.Close()
}

func (s *Store) copyBlob(tw *tar.Writer, h v1.Hash, now time.Time) error {
	r, err := s.Open(h)
	if err != nil {
		return err
	}
	defer r.Close()
	size, err := s.BlobSize(h)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "blobs/sha256/" + h.Hex, Mode: 0o644, Size: size, ModTime: now, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, r)
	return err
}

// MaxArchiveBlobs is the number of blobs an archive may hold: a snapshot's
// two layers, its config and manifest, and a base image's (Docker allows
// 127 layers).
const MaxArchiveBlobs = 256

// ErrArchive is wrapped by ReadTar's errors about an archive that is not
// an OCI image layout Airlock reads (too large, malformed, inconsistent).
var ErrArchive = errors.New("not a snapshot archive Airlock reads")

// ReadTar reads an OCI image layout tar into the store: every blob,
// checked against its name, and the image index.json lists (the one
// annotated with an Airlock snapshot id, else the first), whose
// descriptors must name blobs of the archive with their true sizes. The
// archive is untrusted: index, manifest and config are bounded by MaxJSON,
// the blobs by MaxArchiveBlobs, and blobs are named by their content
// only. The image is not listed in the store; the caller lists what it
// keeps, holding Begin from before ReadTar until then.
func (s *Store) ReadTar(r io.Reader) (*Image, error) {
	tr := tar.NewReader(r)
	var index *v1.IndexManifest
	layout := false
	blobs := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the archive: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		switch {
		case hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA:
		case name == "oci-layout":
			layout = true
		case name == "index.json":
			data, err := io.ReadAll(io.LimitReader(tr, MaxJSON+1))
			if err != nil {
				return nil, fmt.Errorf("read the archive: %w", err)
			}
			if len(data) > MaxJSON {
				return nil, fmt.Errorf("%w: its index.json is more than %d MiB", ErrArchive, MaxJSON>>20)
			}
			index = &v1.IndexManifest{}
			if err := json.Unmarshal(data, index); err != nil {
				return nil, fmt.Errorf("%w: its index.json is not an OCI index: %v", ErrArchive, err)
			}
		case strings.HasPrefix(name, "blobs/sha256/"):
			want := strings.TrimPrefix(name, "blobs/sha256/")
			if _, err := v1.NewHash("sha256:" + want); err != nil {
				return nil, fmt.Errorf("%w: %s is not named by a sha256 digest", ErrArchive, name)
			}
			if blobs++; blobs > MaxArchiveBlobs {
				return nil, fmt.Errorf("%w: it holds more than %d blobs", ErrArchive, MaxArchiveBlobs)
			}
			b, err := s.NewBlob()
			if err != nil {
				return nil, err
			}
			if _, err := io.Copy(b, tr); err != nil {
				b.Abort()
				return nil, fmt.Errorf("read %s: %w", name, err)
			}
			h, _, err := b.Commit()
			if err != nil {
				return nil, err
			}
			if h.Hex != want {
				return nil, fmt.Errorf("%w: the archive's %s holds content with digest %s", ErrCorrupt, name, h)
			}
		}
	}
	if !layout || index == nil || len(index.Manifests) == 0 {
		return nil, fmt.Errorf("%w: it is not an OCI image layout (no oci-layout, or no index.json with an image)", ErrArchive)
	}
	desc := index.Manifests[0]
	for _, m := range index.Manifests {
		if m.Annotations[AnnotationID] != "" {
			desc = m
			break
		}
	}
	if err := s.checkDescriptor(desc, "manifest"); err != nil {
		return nil, err
	}
	img, err := s.ImageAt(desc.Digest)
	if err != nil {
		return nil, err
	}
	if err := s.checkDescriptor(img.Manifest.Config, "config"); err != nil {
		return nil, err
	}
	for _, l := range img.Manifest.Layers {
		if err := s.checkDescriptor(l, "layer"); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// checkDescriptor checks that the blob a descriptor names is in the store
// with the size the descriptor gives.
func (s *Store) checkDescriptor(d v1.Descriptor, what string) error {
	size, err := s.BlobSize(d.Digest)
	if err != nil {
		return fmt.Errorf("%w: the archive lacks %s %s", ErrCorrupt, what, d.Digest)
	}
	if size != d.Size {
		return fmt.Errorf("%w: the archive's %s %s is %d bytes, not the %d its descriptor says", ErrArchive, what, d.Digest, size, d.Size)
	}
	return nil
}
