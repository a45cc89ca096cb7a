package ports

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/airlock/airlock/engine/api"
)

// procDir is a session core whose session's procfs directory is a copy
// of testdata's tables.
type procDir struct{ dir string }

func (p procDir) Wake(ctx context.Context, id string) (string, error) { return "", nil }
func (p procDir) Proc(ctx context.Context, id string) (string, error) { return p.dir, nil }

func fakeProc(t *testing.T, tables ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range tables {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "net", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The listening sockets of both tables, by port with the addresses they
// are bound to: connections, port 0 and lines that do not read as a
// socket are left out, an IPv4 address mapped into IPv6 reads as IPv4,
// and a forwarded port is not listed.
func TestListening(t *testing.T) {
	f := New(procDir{fakeProc(t, "tcp", "tcp6")}, "", nil)
	t.Cleanup(f.Stop)
	ctx := context.Background()
	got, err := f.Listening(ctx, "s1")
	want := []api.ListeningPort{
		{Port: 80, Addresses: []string{"10.0.0.2"}},
		{Port: 3000, Addresses: []string{"::"}},
		{Port: 4000, Addresses: []string{"127.0.0.1"}},
		{Port: 5173, Addresses: []string{"127.0.0.1", "::1"}},
		{Port: 8000, Addresses: []string{"0.0.0.0"}},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("listening: %+v %v\nwant %+v", got, err, want)
	}
	if _, err := f.Open(ctx, "s1", api.PortRequest{Port: 5173}); err != nil {
		t.Fatal(err)
	}
	got, err = f.Listening(ctx, "s1")
	if err != nil || len(got) != 4 || got[2].Port != 4000 || got[3].Port != 8000 {
		t.Fatalf("listening once 5173 is forwarded: %+v %v", got, err)
	}

	// A kernel without IPv6 has no tcp6.
	f = New(procDir{fakeProc(t, "tcp")}, "", nil)
	if got, err := f.Listening(ctx, "s1"); err != nil || len(got) != 3 {
		t.Fatalf("without tcp6: %+v %v", got, err)
	}
}

// Whatever the table holds, parsing neither panics nor reports port 0.
func FuzzParseListening(f *testing.F) {
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, a := range parseListening(b) {
			if a.Port() == 0 || !a.Addr().IsValid() {
				t.Fatalf("%v from %q", a, b)
			}
		}
	})
}
