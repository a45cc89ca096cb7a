package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/airlock/airlock/atomicfile"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of the index entries and manifests Airlock writes.
const (
	AnnotationID      = "dev.airlock.snapshot.id"
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Store is an OCI image layout on disk (oci-layout, index.json,
// blobs/sha256/...). Blobs are content-addressed, so a layer two
// snapshots share is stored once. Every write is a temporary file renamed
// into place, and index.json is the only list of what the store holds: a
// crash leaves at most unreferenced blobs, which GC removes.
type Store struct {
	dir  string
	mu   sync.Mutex   // index.json
	gcMu sync.RWMutex // held for reading by writers between their first blob and Add
}

// Begin marks the start of writing an image: blobs committed until the
// returned func is called are safe from GC, though no entry lists them yet.
func (s *Store) Begin() (end func()) {
	s.gcMu.RLock()
	var once sync.Once
	return func() { once.Do(s.gcMu.RUnlock) }
}

// Open opens (creating if needed) the layout at dir and removes what an
// interrupted write left.
func Open(dir string) (*Store, error) {
	s := &Store{dir: dir}
	if err := os.MkdirAll(s.blobDir(), 0o700); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.Write(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o600); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(s.indexPath()); errors.Is(err, fs.ErrNotExist) {
		if err := s.writeIndex(&v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}); err != nil {
			return nil, err
		}
	}
	tmp, _ := filepath.Glob(filepath.Join(s.blobDir(), ".tmp-*"))
	for _, t := range tmp {
		os.Remove(t)
	}
	return s, nil
}

// Dir is the layout's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) blobDir() string   { return filepath.Join(s.dir, "blobs", "sha256") }
func (s *Store) indexPath() string { return filepath.Join(s.dir, "index.json") }

// BlobPath is where the blob with digest h is.
func (s *Store) BlobPath(h v1.Hash) string { return filepath.Join(s.dir, "blobs", h.Algorithm, h.Hex) }

// Has says whether the blob is stored.
func (s *Store) Has(h v1.Hash) bool {
	_, err := os.Stat(s.BlobPath(h))
	return err == nil
}

// BlobWriter receives a blob; Commit names it by its digest.
type BlobWriter struct {
	s    *Store
	f    *os.File
	h    hash.Hash
	n    int64
	done bool
}

// NewBlob starts a blob.
func (s *Store) NewBlob() (*BlobWriter, error) {
	f, err := os.CreateTemp(s.blobDir(), ".tmp-*")
	if err != nil {
		return nil, err
	}
	return &BlobWriter{s: s, f: f, h: sha256.New()}, nil
}

func (b *BlobWriter) Write(p []byte) (int, error) {
	n, err := b.f.Write(p)
	b.h.Write(p[:n])
	b.n += int64(n)
	return n, err
}

// Commit syncs the blob and moves it to its content address. A blob
// already there is kept and the new copy dropped.
func (b *BlobWriter) Commit() (v1.Hash, int64, error) {
	defer b.Abort()
	if err := b.f.Sync(); err != nil {
		return v1.Hash{}, 0, err
	}
	if err := b.f.Close(); err != nil {
		return v1.Hash{}, 0, err
	}
	h := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(b.h.Sum(nil))}
	if !b.s.Has(h) {
		if err := os.Rename(b.f.Name(), b.s.BlobPath(h)); err != nil {
			return v1.Hash{}, 0, err
		}
		b.done = true
	}
	return h, b.n, nil
}

// Abort drops an uncommitted blob.
func (b *BlobWriter) Abort() {
	if !b.done {
		b.f.Close()
		os.Remove(b.f.Name())
		b.done = true
	}
}

// PutBytes stores a small blob.
func (s *Store) PutBytes(data []byte) (v1.Hash, error) {
	b, err := s.NewBlob()
	if err != nil {
		return v1.Hash{}, err
	}
	if _, err := b.Write(data); err != nil {
		b.Abort()
		return v1.Hash{}, err
	}
	h, _, err := b.Commit()
	return h, err
}

// ErrCorrupt is wrapped by errors about a blob whose content no longer
// matches its digest, or that is missing.
var ErrCorrupt = errors.New("the snapshot store is damaged")

// Open reads a blob, checking its digest as it goes: the reader's last
// Read fails with ErrCorrupt when the content does not match.
func (s *Store) Open(h v1.Hash) (io.ReadCloser, error) {
	f, err := os.Open(s.BlobPath(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: blob %s is missing", ErrCorrupt, h)
	}
	if err != nil {
		return nil, err
	}
	return &verifier{f: f, want: h, h: sha256.New()}, nil
}

// ReadBytes reads a small blob whole, checking its digest.
func (s *Store) ReadBytes(h v1.Hash) ([]byte, error) {
	r, err := s.Open(h)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

type verifier struct {
	f    *os.File
	want v1.Hash
	h    hash.Hash
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want.Hex {
			return n, fmt.Errorf("%w: blob %s holds content with digest sha256:%s", ErrCorrupt, v.want, got)
		}
	}
	return n, err
}

func (v *verifier) Close() error { return v.f.Close() }

// Index is the list of images in the store.
func (s *Store) Index() (*v1.IndexManifest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readIndex()
}

func (s *Store) readIndex() (*v1.IndexManifest, error) {
	data, err := os.ReadFile(s.indexPath())
	if err != nil {
		return nil, err
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, s.indexPath(), err)
	}
	return &idx, nil
}

func (s *Store) writeIndex(idx *v1.IndexManifest) error {
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(s.indexPath(), data, 0o600)
}

// Add lists an image (its manifest is already stored) under the snapshot
// id, replacing an entry with the same id.
func (s *Store) Add(id string, desc v1.Descriptor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	if desc.Annotations == nil {
		desc.Annotations = map[string]string{}
	}
	desc.Annotations[AnnotationID] = id
	keep := idx.Manifests[:0]
	for _, m := range idx.Manifests {
		if m.Annotations[AnnotationID] != id {
			keep = append(keep, m)
		}
	}
	idx.Manifests = append(keep, desc)
	return s.writeIndex(idx)
}

// Get is the index entry of snapshot id.
func (s *Store) Get(id string) (v1.Descriptor, bool) {
	idx, err := s.Index()
	if err != nil {
		return v1.Descriptor{}, false
	}
	for _, m := range idx.Manifests {
		if m.Annotations[AnnotationID] == id {
			return m, true
		}
	}
	return v1.Descriptor{}, false
}

// Remove unlists snapshot id and deletes the blobs no other entry uses.
func (s *Store) Remove(id string) error {
	s.mu.Lock()
	idx, err := s.readIndex()
	if err != nil {
		s.mu.Unlock()
		return err
	}
	keep := idx.Manifests[:0]
	for _, m := range idx.Manifests {
		if m.Annotations[AnnotationID] != id {
			keep = append(keep, m)
		}
	}
	idx.Manifests = keep
	err = s.writeIndex(idx)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = s.GC()
	return err
}

// Keep reports the ids the store lists; entries whose id keep rejects are
// removed (with their unshared blobs).
func (s *Store) Keep(keep func(id string) bool) error {
	idx, err := s.Index()
	if err != nil {
		return err
	}
	for _, m := range idx.Manifests {
		if id := m.Annotations[AnnotationID]; !keep(id) {
			if err := s.Remove(id); err != nil {
				return err
			}
		}
	}
	return nil
}

// GC deletes blobs that no listed image references and returns how many.
func (s *Store) GC() (int, error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, err := s.readIndex()
	if err != nil {
		return 0, err
	}
	used := map[string]bool{}
	for _, m := range idx.Manifests {
		used[m.Digest.Hex] = true
		data, err := os.ReadFile(s.BlobPath(m.Digest))
		if err != nil {
			continue // a missing manifest keeps nothing; restore says so
		}
		var man v1.Manifest
		if json.Unmarshal(data, &man) != nil {
			continue
		}
		used[man.Config.Digest.Hex] = true
		for _, l := range man.Layers {
			used[l.Digest.Hex] = true
		}
		for k, v := range man.Annotations {
			// Blobs an image names without listing them as layers (the
			// base image's own config and layers, for export).
			if strings.HasPrefix(k, "dev.airlock.blobs") {
				for _, d := range strings.Fields(v) {
					if h, err := v1.NewHash(d); err == nil {
						used[h.Hex] = true
					}
				}
			}
		}
	}
	ents, err := os.ReadDir(s.blobDir())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !used[e.Name()] && !strings.HasPrefix(e.Name(), ".tmp-") {
			if os.Remove(filepath.Join(s.blobDir(), e.Name())) == nil {
				n++
			}
		}
	}
	return n, nil
}

// BlobSize is the size of a stored blob.
func (s *Store) BlobSize(h v1.Hash) (int64, error) {
	fi, err := os.Stat(s.BlobPath(h))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
