package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/network"
	"github.com/airlock/airlock/engine/secrets"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/testenv"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	dnetwork "github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
)

// The session core without Docker: a fake Docker, the host's links and
// firewall in memory, and real workspace mounts (which need root).

// coreDocker is Docker as the session core uses it: containers in
// memory, and a step that fails when told to.
type coreDocker struct {
	Docker
	mu         sync.Mutex
	containers map[string]string // id -> name
	running    map[string]bool
	failCreate error
	failStart  error
	// onRemove is called as a container is removed.
	onRemove func(id string)
	n        int
}

func newCoreDocker() *coreDocker {
	return &coreDocker{containers: map[string]string{}, running: map[string]bool{}}
}

func (d *coreDocker) ImageInspect(context.Context, string, ...client.ImageInspectOption) (image.InspectResponse, error) {
	return image.InspectResponse{}, nil
}

func (d *coreDocker) ContainerCreate(_ context.Context, _ *container.Config, _ *container.HostConfig, _ *dnetwork.NetworkingConfig, _ *ocispec.Platform, name string) (container.CreateResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failCreate != nil {
		return container.CreateResponse{}, d.failCreate
	}
	d.n++
	id := name + "-id"
	d.containers[id] = name
	return container.CreateResponse{ID: id}, nil
}

func (d *coreDocker) ContainerStart(_ context.Context, id string, _ container.StartOptions) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failStart != nil {
		return d.failStart
	}
	d.running[id] = true
	return nil
}

func (d *coreDocker) ContainerInspect(_ context.Context, id string) (container.InspectResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.containers[id]; !ok {
		return container.InspectResponse{}, errdefs.NotFoundf("no such container %s", id)
	}
	st := &container.State{Status: "created"}
	if d.running[id] {
		st = &container.State{Status: "running", Running: true, Pid: os.Getpid()}
	}
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, State: st}}, nil
}

func (d *coreDocker) ContainerAttach(context.Context, string, container.AttachOptions) (types.HijackedResponse, error) {
	return types.HijackedResponse{}, errors.New("the fake keeps no output")
}

func (d *coreDocker) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	if d.onRemove != nil {
		d.onRemove(id)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for cid, name := range d.containers {
		if cid == id || name == id {
			delete(d.containers, cid)
			delete(d.running, cid)
			return nil
		}
	}
	return errdefs.NotFoundf("no such container %s", id)
}

func (d *coreDocker) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []container.Summary
	for id, name := range d.containers {
		state := "exited"
		if d.running[id] {
			state = "running"
		}
		out = append(out, container.Summary{ID: id, State: state, Labels: map[string]string{labelSession: strings.TrimPrefix(name, "airlock-")}})
	}
	return out, nil
}

func (d *coreDocker) left() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, name := range d.containers {
		out = append(out, name)
	}
	return out
}

// hostLinks is the host's network stack in memory.
type hostLinks struct {
	mu       sync.Mutex
	bridges  map[string]netip.Prefix
	owners   map[string]string
	plugged  map[string]string // host end -> bridge
	failAdd  error
	failPlug error
}

func (*hostLinks) GatewayBound(netip.Addr) bool { return false }

func (l *hostLinks) Prefixes() ([]netip.Prefix, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []netip.Prefix
	for _, p := range l.bridges {
		out = append(out, p.Masked())
	}
	return out, nil
}

func (l *hostLinks) AddBridge(name, owner string, addr netip.Prefix) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failAdd != nil {
		return l.failAdd
	}
	l.bridges[name], l.owners[name] = addr, owner
	return nil
}

func (l *hostLinks) BridgeAddr(name string) (netip.Prefix, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.bridges[name]
	if !ok {
		return netip.Prefix{}, errors.New("bridge " + name + " is gone")
	}
	return p, nil
}

func (l *hostLinks) Bridges(owner string) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name, o := range l.owners {
		if o == owner {
			out = append(out, name)
		}
	}
	return out, nil
}

func (l *hostLinks) Plug(bridge, hostEnd string, _ int, _ netip.Prefix, _ netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failPlug != nil {
		return l.failPlug
	}
	l.plugged[hostEnd] = bridge
	return nil
}

func (l *hostLinks) Delete(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.bridges, name)
	delete(l.owners, name)
	delete(l.plugged, name)
}

func (l *hostLinks) left() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name := range l.bridges {
		out = append(out, name)
	}
	for name := range l.plugged {
		out = append(out, name)
	}
	return out
}

// hostFirewall is the firewall in memory: the networks with rules.
type hostFirewall struct {
	mu    sync.Mutex
	rules map[string]bool
}

func (f *hostFirewall) Available() error { return nil }
func (f *hostFirewall) Add(key string, _ netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[key] = true
	return nil
}
func (f *hostFirewall) Remove(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rules, key)
}
func (f *hostFirewall) Installed() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for k := range f.rules {
		out[k] = true
	}
	return out
}

// coreMeter is a Meter with no cgroups: the session core asks it for a
// parent and to remove what it made.
type coreMeter struct {
	Meter
	failParent error
}

func (m coreMeter) CgroupParent(context.Context, string) (string, error) { return "", m.failParent }
func (coreMeter) Remove(context.Context, string) error                   { return nil }
func (coreMeter) CPU(string) (time.Duration, error)                      { return 0, errors.New("no cgroups") }

// core is an engine over the fakes, with a project to work on.
type core struct {
	e       *Engine
	docker  *coreDocker
	links   *hostLinks
	fw      *hostFirewall
	meter   *coreMeter
	project string
}

func newCore(t *testing.T) *core {
	t.Helper()
	testenv.Root(t, "the session core's unit tests mount workspaces")
	if err := overlay.Check(); err != nil {
		testenv.Missing(t, fmt.Sprintf("no overlay mounts here: %v", err))
	}
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sec, err := secrets.Open(dir, st)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := egress.LoadCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	c := &core{docker: newCoreDocker(), links: &hostLinks{bridges: map[string]netip.Prefix{}, owners: map[string]string{}, plugged: map[string]string{}},
		fw: &hostFirewall{rules: map[string]bool{}}, meter: &coreMeter{}, project: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.project, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &Engine{docker: c.docker, store: st, stateDir: dir, log: slog.New(slog.DiscardHandler),
		sessions: map[string]*live{}, secrets: sec, ca: ca, meter: c.meter}
	defs := Defaults{Limits: api.Limits{WorkspaceSize: 8 << 20, Memory: 128 << 20}}.withBuiltins()
	e.defaults.Store(&defs)
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	start := func(*network.Net) (*egressState, error) {
		return &egressState{proxy: egress.NewProxy(&egress.Policy{Mode: egress.DenyAll}), secrets: sec, stop: func() {}}, nil
	}
	e.nets = network.NewPool[*egress.Policy](c.links, c.fw, start,
		network.Options{Owner: "airlock-test:" + dir, LockFile: filepath.Join(dir, "netalloc.lock")})
	e.ports = newPorts(e)
	e.timeline = newTimeline(e, timeline.Options{Every: -1})
	c.e = e
	t.Cleanup(func() {
		// Whatever a failed test left mounted.
		for _, m := range slices.Backward(testenv.MountsUnder(t, dir)) {
			unix.Unmount(m, unix.MNT_DETACH)
		}
	})
	return c
}

func (c *core) create(t *testing.T, mode createMode) (api.Session, error) {
	t.Helper()
	return c.e.create(context.Background(), api.CreateRequest{Project: c.project, Image: "airlock/tiny"}, mode)
}

// nothingLeft fails when a session's mount, network, firewall rules,
// container or record is left behind.
func (c *core) nothingLeft(t *testing.T) {
	t.Helper()
	if m := testenv.MountsUnder(t, c.e.stateDir); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	if d, err := os.ReadDir(filepath.Join(c.e.stateDir, "sessions")); err != nil || len(d) > 0 {
		t.Errorf("session directories left: %v %v", d, err)
	}
	if l := c.links.left(); len(l) > 0 {
		t.Errorf("network links left: %v", l)
	}
	if r := c.fw.Installed(); len(r) > 0 {
		t.Errorf("firewall rules left: %v", r)
	}
	if l := c.docker.left(); len(l) > 0 {
		t.Errorf("containers left: %v", l)
	}
	if recs, err := c.e.store.Sessions(context.Background()); err != nil || len(recs) > 0 {
		t.Errorf("session records left: %v %v", recs, err)
	}
	if len(c.e.sessions) > 0 {
		t.Errorf("live sessions left: %v", c.e.sessions)
	}
}

// fillFails is a mode whose workspace cannot be filled (a snapshot's
// layer that does not unpack).
type fillFails struct{ idle }

func (fillFails) fillWorkspace(string) error {
	return errors.New("the snapshot's workspace layer is damaged")
}

// A create that fails at any step leaves nothing behind: no mount, no
// network or firewall rules, no container, no record.
func TestCreateFailingLeavesNothing(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		mode   createMode
		break_ func(c *core)
		want   string
	}{
		{"network", idle{}, func(c *core) { c.links.failAdd = boom }, "make the session's network"},
		{"mount", fillFails{}, func(*core) {}, "workspace layer is damaged"},
		{"cgroups", idle{}, func(c *core) { c.meter.failParent = boom }, "cgroups"},
		{"container create", idle{}, func(c *core) { c.docker.failCreate = boom }, "create the session's container"},
		{"container start", idle{}, func(c *core) { c.docker.failStart = boom }, "start the session's container"},
		{"plug into network", idle{}, func(c *core) { c.links.failPlug = boom }, "plug the session into its network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t)
			tc.break_(c)
			_, err := c.create(t, tc.mode)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create failing at %s: got %v, want an error saying %q", tc.name, err, tc.want)
			}
			c.nothingLeft(t)
		})
	}
}

// A created session runs on its own network over its mounted
// workspace; rm removes the container before it unmounts the workspace
// (never unmount under a live container), then everything else.
func TestRemoveRemovesContainerBeforeUnmount(t *testing.T) {
	c := newCore(t)
	ctx := context.Background()
	s, err := c.create(t, idle{})
	if err != nil {
		t.Fatal(err)
	}
	if s.State != api.StateRunning {
		t.Errorf("created session is %s, want running", s.State)
	}
	dir := c.e.sessionDir(s.ID)
	if len(testenv.MountsUnder(t, dir)) == 0 {
		t.Fatal("the created session's workspace is not mounted")
	}
	if len(c.links.left()) == 0 || len(c.fw.Installed()) == 0 {
		t.Fatal("the created session has no network or firewall rules")
	}
	var mountedAtRemove []string
	c.docker.onRemove = func(string) { mountedAtRemove = testenv.MountsUnder(t, dir) }
	if err := c.e.Remove(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if len(mountedAtRemove) == 0 {
		t.Error("the workspace was unmounted before the container was removed")
	}
	c.nothingLeft(t)
}

// After a restart, a session whose container is gone is stopped with its
// workspace kept for review; one whose workspace tmpfs is gone (a host
// reboot) is hibernated from its checkpoint when it has one, as it
// started when it has none yet, and failed with what to do when its
// checkpoints cannot be read. None is removed.
func TestAdoptContainerOrWorkspaceGone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lose      func(t *testing.T, c *core, s api.Session)
		wantState string
		wantMsg   string
		live      bool
	}{
		{"container gone", func(t *testing.T, c *core, s api.Session) {
			if err := c.docker.ContainerRemove(context.Background(), s.ContainerID, container.RemoveOptions{}); err != nil {
				t.Fatal(err)
			}
		}, api.StateStopped, "its workspace is intact", true},
		{"workspace gone before any checkpoint", func(t *testing.T, c *core, s api.Session) {
			for _, m := range slices.Backward(testenv.MountsUnder(t, c.e.sessionDir(s.ID))) {
				if err := unix.Unmount(m, 0); err != nil {
					t.Fatal(err)
				}
			}
		}, api.StateHibernated, "", false},
		{"workspace gone, checkpoints unreadable", func(t *testing.T, c *core, s api.Session) {
			if err := os.MkdirAll(filepath.Dir(c.e.checkpointDir(s.ID)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.e.checkpointDir(s.ID), []byte("not a store"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, m := range slices.Backward(testenv.MountsUnder(t, c.e.sessionDir(s.ID))) {
				if err := unix.Unmount(m, 0); err != nil {
					t.Fatal(err)
				}
			}
		}, api.StateFailed, "airlock rm", false},
		{"workspace gone after a checkpoint", func(t *testing.T, c *core, s api.Session) {
			cs, err := checkpoint.Open(c.e.checkpointDir(s.ID))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.RecordDir(context.Background(), filepath.Join(c.e.sessionDir(s.ID), "ws", "upper"), checkpoint.RecordOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, m := range slices.Backward(testenv.MountsUnder(t, c.e.sessionDir(s.ID))) {
				if err := unix.Unmount(m, 0); err != nil {
					t.Fatal(err)
				}
			}
		}, api.StateHibernated, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t)
			ctx := context.Background()
			s, err := c.create(t, idle{})
			if err != nil {
				t.Fatal(err)
			}
			// The engine that made it is gone: a new one adopts.
			c.e.sessions = map[string]*live{}
			tc.lose(t, c, s)
			if err := c.e.adopt(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := c.e.store.Session(ctx, s.ID)
			if err != nil {
				t.Fatalf("the session was forgotten: %v", err)
			}
			if got.State != tc.wantState || !strings.Contains(got.Error, tc.wantMsg) {
				t.Errorf("adopted session: %s %q, want %s saying %q", got.State, got.Error, tc.wantState, tc.wantMsg)
			}
			if (c.e.liveSession(s.ID) != nil) != tc.live {
				t.Errorf("adopted session live: %v, want %v", c.e.liveSession(s.ID) != nil, tc.live)
			}
			if err := c.e.Remove(ctx, s.ID); err != nil {
				t.Fatalf("rm of the adopted session: %v", err)
			}
			c.nothingLeft(t)
			if _, err := os.Stat(c.e.checkpointDir(s.ID)); !os.IsNotExist(err) {
				t.Errorf("rm left the session's checkpoints: %v", err)
			}
		})
	}
}
