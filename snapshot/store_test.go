package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func putLayer(t *testing.T, s *Store, files map[string]string) Layer {
	t.Helper()
	dir := t.TempDir()
	for n, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755)
		os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644)
	}
	fixed := time.Unix(1e9, 0)
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, fixed, fixed) })
	b, err := s.NewBlob()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteLayer(b, Source{Root: root(t, dir)}); err != nil {
		t.Fatal(err)
	}
	h, n, err := b.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return Layer{Digest: h, Size: n, CreatedBy: "test"}
}

func blobCount(t *testing.T, s *Store) int {
	ents, _ := os.ReadDir(s.blobDir())
	return len(ents)
}

func TestStoreDedupAndGC(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	shared := putLayer(t, s, map[string]string{"a.txt": "shared"})
	one := putLayer(t, s, map[string]string{"b.txt": "one"})
	if again := putLayer(t, s, map[string]string{"a.txt": "shared"}); again.Digest != shared.Digest {
		t.Fatal("the same content gave another digest")
	}
	for i, l := range [][]Layer{{shared, one}, {shared}} {
		m, c, err := Compose(nil, nil, l, map[string]string{"k": "v"}, time.Unix(0, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutImage([]string{"one", "two"}[i], m, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := blobCount(t, s); n != 6 { // 2 layers + 2 configs + 2 manifests
		t.Errorf("%d blobs, want 6 (a shared layer stored once)", n)
	}
	if err := s.Remove("one"); err != nil {
		t.Fatal(err)
	}
	if n := blobCount(t, s); n != 3 {
		t.Errorf("%d blobs after removing one image, want 3", n)
	}
	img, err := s.Image("two")
	if err != nil || len(img.Layers()) != 1 || img.Layers()[0].Digest != shared.Digest {
		t.Fatalf("the other image lost its layer: %v %+v", err, img)
	}
	// Uncommitted blobs and a writer that has not listed its image yet are
	// left alone; what an interrupted write left goes at the next Open.
	end := s.Begin()
	pending := putLayer(t, s, map[string]string{"c.txt": "pending"})
	done := make(chan struct{})
	go func() { s.GC(); close(done) }()
	select {
	case <-done:
		t.Fatal("GC ran while a writer was between its blobs and its entry")
	case <-time.After(50 * time.Millisecond):
	}
	end()
	<-done
	if s.Has(pending.Digest) {
		t.Error("an unlisted blob survived GC")
	}
	b, _ := s.NewBlob()
	b.Write([]byte("half"))
	if _, err := Open(s.Dir()); err != nil {
		t.Fatal(err)
	}
	if n := blobCount(t, s); n != 3 {
		t.Errorf("%d blobs after reopening, want 3 (the half-written one removed)", n)
	}
}

func TestStoreDetectsCorruption(t *testing.T) {
	s, _ := Open(t.TempDir())
	l := putLayer(t, s, map[string]string{"a.txt": "content"})
	data, _ := os.ReadFile(s.BlobPath(l.Digest))
	data[len(data)/2] ^= 0xff
	os.WriteFile(s.BlobPath(l.Digest), data, 0o644)
	r, err := s.Open(l.Digest)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, r)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("reading a damaged blob: %v, want ErrCorrupt", err)
	}
	os.Remove(s.BlobPath(l.Digest))
	if _, err := s.Open(l.Digest); !errors.Is(err, ErrCorrupt) {
		t.Errorf("opening a missing blob: %v, want ErrCorrupt", err)
	}
}

// TestTarReadableByOthers writes an image tar and reads it back with
// go-containerregistry's own readers: the docker-style manifest.json
// (tarball) and, unpacked, the OCI layout.
func TestTarReadableByOthers(t *testing.T) {
	s, _ := Open(t.TempDir())
	l1 := putLayer(t, s, map[string]string{"etc/tool.conf": "x=1"})
	l2 := putLayer(t, s, map[string]string{"workspace/main.go": "package main"})
	m, c, err := Compose(nil, nil, []Layer{l1, l2}, map[string]string{"dev.airlock.snapshot": "{}"}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "snap.tar")
	f, _ := os.Create(tarPath)
	if err := s.WriteTar(f, m, c, "airlock-snapshot:test"); err != nil {
		t.Fatal(err)
	}
	f.Close()

	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatalf("the docker-style reader: %v", err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("layers %v %v", len(layers), err)
	}
	cfg, _ := img.ConfigFile()
	if cfg.Config.Labels["dev.airlock.snapshot"] != "{}" {
		t.Errorf("labels %v", cfg.Config.Labels)
	}

	// Unpack and read as an OCI layout.
	dir := t.TempDir()
	rf, _ := os.Open(tarPath)
	defer rf.Close()
	untarFiles(t, rf, dir)
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index %v %v", im, err)
	}
	oimg, err := p.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	ol, _ := oimg.Layers()
	d, _ := ol[1].Digest()
	if d != l2.Digest {
		t.Errorf("layer 2 is %s, want %s", d, l2.Digest)
	}

	// And back into a store.
	s2, _ := Open(t.TempDir())
	rf.Seek(0, 0)
	back, err := s2.ReadTar(rf)
	if err != nil {
		t.Fatal(err)
	}
	if back.Manifest.Layers[1].Digest != l2.Digest {
		t.Error("read back another layer")
	}
	// A damaged archive is refused.
	data, _ := os.ReadFile(tarPath)
	i := bytes.Index(data, []byte("package main"))
	data[i] = 'P'
	if _, err := s2.ReadTar(bytes.NewReader(data)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a damaged archive: %v, want ErrCorrupt", err)
	}
}

// untarFiles extracts the regular files of a tar (an image layout).
func untarFiles(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
