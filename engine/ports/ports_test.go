package ports

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// Where a forward may listen: loopback without auth, anywhere with it;
// addresses that are not HOST:PORT with an IP are refused with a
// sentence saying what to give.
func TestListenAddr(t *testing.T) {
	for _, c := range []struct {
		listen, auth, want, refusal string
	}{
		{"", "", "127.0.0.1:0", ""},
		{"127.0.0.1:8080", "", "127.0.0.1:8080", ""},
		{"localhost:8080", "", "127.0.0.1:8080", ""},
		{"[::1]:8080", "", "[::1]:8080", ""},
		{"0.0.0.0:8080", "", "", "--auth bearer"},
		{":8080", "", "", "--auth bearer"},
		{"192.0.2.1:8080", "", "", "--auth bearer"},
		{"0.0.0.0:8080", "bearer", "0.0.0.0:8080", ""},
		{"0.0.0.0:8080", "basic", "0.0.0.0:8080", ""},
		{":0", "bearer", ":0", ""},
		{"example.com:8080", "bearer", "", "not a name"},
		{"8080", "", "", "HOST:PORT"},
		{"127.0.0.1:http", "", "", "a number"},
	} {
		got, err := listenAddr(c.listen, c.auth)
		if c.refusal != "" {
			if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), c.refusal) {
				t.Errorf("listen %q auth %q: %q, %v; want a refusal saying %q", c.listen, c.auth, got, err, c.refusal)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("listen %q auth %q: %q, %v; want %q", c.listen, c.auth, got, err, c.want)
		}
	}
}

// failing is a session core whose sessions are all gone.
type failing struct{}

func (failing) Wake(ctx context.Context, id string) (string, error) {
	return "", errdefs.NotFoundf("no session %s", id)
}

func (failing) Proc(ctx context.Context, id string) (string, error) {
	return "", errdefs.NotFoundf("no session %s", id)
}

// Requests are checked before anything listens, and a forward of a
// session that is gone is never opened.
func TestOpenRefuses(t *testing.T) {
	f := New(failing{}, "", nil)
	for _, c := range []struct {
		req  api.PortRequest
		want func(error) bool
	}{
		{api.PortRequest{Port: 0}, errdefs.IsInvalid},
		{api.PortRequest{Port: 70000}, errdefs.IsInvalid},
		{api.PortRequest{Port: 80, Auth: "digest"}, errdefs.IsInvalid},
		{api.PortRequest{Port: 80, User: "me"}, errdefs.IsInvalid},
		{api.PortRequest{Port: 80, Auth: "basic", User: "me:you"}, errdefs.IsInvalid},
		{api.PortRequest{Port: 80}, errdefs.IsNotFound},
	} {
		if _, err := f.Open(context.Background(), "s1", c.req); !c.want(err) {
			t.Errorf("%+v: %v", c.req, err)
		}
	}
	if l := f.List("s1"); len(l) != 0 {
		t.Errorf("forwards after refusals: %+v", l)
	}
}
