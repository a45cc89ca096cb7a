package snapshot

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/airlock/airlock/confined"
)

// TestMain lets the test binary be the layer applier ApplyLayer starts.
func TestMain(m *testing.M) {
	if Init() {
		return
	}
	os.Exit(m.Run())
}

// root opens dir as a confined root for the test.
func root(t testing.TB, dir string) *confined.Root {
	t.Helper()
	r, err := confined.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// opener serves a layer held in memory.
func opener(data []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
}

// applyTo applies a layer to dir (the whole layer, no prefix).
func applyTo(t testing.TB, data []byte, dir string) (LayerStats, error) {
	t.Helper()
	return ApplyLayer(opener(data), Target{Root: root(t, dir)}, Limits{})
}

// writeFrom writes a layer of dir (no prefix).
func writeFrom(t testing.TB, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := WriteLayer(&buf, Source{Root: root(t, dir)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
