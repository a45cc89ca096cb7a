package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

func withPool(n int) func(*engine.Options) {
	return func(o *engine.Options) { o.Defaults.WarmPool = n }
}

// warmContainers are e's containers that are no session's: its warm
// pool, by container id (with the session id they were made for).
func warmContainers(t *testing.T, e *enginetest.Engine) map[string]string {
	t.Helper()
	ctx := context.Background()
	list, err := e.Docker.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.engine="+e.StateDir))})
	must(t, err)
	recs, err := e.Store.Sessions(ctx)
	must(t, err)
	known := map[string]bool{}
	for _, r := range recs {
		known[r.ID] = true
	}
	out := map[string]string{}
	for _, c := range list {
		if id := c.Labels["dev.airlock.session"]; !known[id] {
			out[c.ID] = id
		}
	}
	return out
}

// waitWarm waits until e's pool holds n frozen containers.
func waitWarm(t *testing.T, e *enginetest.Engine, n int) map[string]string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		w := warmContainers(t, e)
		paused := 0
		for id := range w {
			if ins, err := e.Docker.ContainerInspect(context.Background(), id); err == nil && ins.State.Paused {
				paused++
			}
		}
		if paused >= n && len(w) == paused {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool holds %d containers, %d frozen; want %d frozen", len(w), paused, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drainWarm turns e's warm pool off and waits until its containers are
// gone (they hold their image, as sessions do).
func drainWarm(t *testing.T, e *enginetest.Engine) {
	t.Helper()
	_, err := e.SetSettings(context.Background(), api.Settings{WarmPool: -1})
	must(t, err)
	for i := 0; len(warmContainers(t, e)) > 0; i++ {
		if i > 600 {
			t.Fatalf("warm containers left: %v", warmContainers(t, e))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// containerView is what of a session's container must not tell a warm
// session from a cold one, with the session's id, its network's gateway
// and its directory written the same way for both.
type containerView struct {
	Image, ImageID, User, WorkingDir, Hostname, NetworkMode, CgroupParent string
	Cmd, Entrypoint, Env, CapAdd, CapDrop, SecurityOpt, Mounts, Labels    []string
	Init                                                                  bool
	NanoCPUs, Memory, MemorySwap, Pids                                    int64
	Sysctls, Tmpfs                                                        map[string]string
	LogType                                                               string
	Privileged, ReadonlyRootfs                                            bool
}

var dockerLayers = regexp.MustCompile(`/var/lib/docker/overlay2/[^,: ]+`)

var gwRE = regexp.MustCompile(`10\.213\.\d+\.\d+`)

func viewOf(t *testing.T, e *enginetest.Engine, s api.Session) containerView {
	t.Helper()
	ins, err := e.Docker.ContainerInspect(context.Background(), s.ContainerID)
	must(t, err)
	norm := func(v string) string {
		v = strings.ReplaceAll(v, s.ID, "ID")
		v = strings.ReplaceAll(v, s.ID[:8], "ID8")
		return gwRE.ReplaceAllString(v, "GW")
	}
	norms := func(list []string) []string {
		out := []string{}
		for _, v := range list {
			out = append(out, norm(v))
		}
		sort.Strings(out)
		return out
	}
	v := containerView{Image: ins.Config.Image, ImageID: ins.Image, User: ins.Config.User, WorkingDir: ins.Config.WorkingDir,
		Hostname: norm(ins.Config.Hostname), NetworkMode: string(ins.HostConfig.NetworkMode), CgroupParent: norm(ins.HostConfig.CgroupParent),
		Cmd: ins.Config.Cmd, Entrypoint: ins.Config.Entrypoint, Env: norms(ins.Config.Env), CapAdd: ins.HostConfig.CapAdd,
		CapDrop: ins.HostConfig.CapDrop, SecurityOpt: ins.HostConfig.SecurityOpt, Init: ins.HostConfig.Init != nil && *ins.HostConfig.Init,
		NanoCPUs: ins.HostConfig.NanoCPUs, Memory: ins.HostConfig.Memory, MemorySwap: ins.HostConfig.MemorySwap,
		Sysctls: ins.HostConfig.Sysctls, Tmpfs: ins.HostConfig.Tmpfs, LogType: ins.HostConfig.LogConfig.Type,
		Privileged: ins.HostConfig.Privileged, ReadonlyRootfs: ins.HostConfig.ReadonlyRootfs}
	if ins.HostConfig.PidsLimit != nil {
		v.Pids = *ins.HostConfig.PidsLimit
	}
	for _, m := range ins.Mounts {
		v.Mounts = append(v.Mounts, norm(fmt.Sprintf("%s %s:%s rw=%v %s", m.Type, m.Source, m.Destination, m.RW, m.Propagation)))
	}
	sort.Strings(v.Mounts)
	for k, l := range ins.Config.Labels {
		v.Labels = append(v.Labels, norm(k+"="+l))
	}
	sort.Strings(v.Labels)
	return v
}

// procMounts is /proc/mounts inside a session, with the session's id and
// the paths of the engine's state written the same way for every session.
func procMounts(t *testing.T, e *enginetest.Engine, s api.Session) []string {
	t.Helper()
	code, out := run(t, e, s.ID, "cat", "/proc/mounts")
	if code != 0 {
		t.Fatalf("cat /proc/mounts: %d %s", code, out)
	}
	out = strings.ReplaceAll(out, s.ID, "ID")
	out = dockerLayers.ReplaceAllString(out, "LAYER")
	return strings.Split(strings.TrimSpace(out), "\n")
}

func minus(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

// topmost keeps, of each mount point, the last mount (the one in view).
func topmost(lines []string) (top []string, covered []string) {
	last := map[string]int{}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) > 1 {
			last[f[1]] = i
		}
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) > 1 && last[f[1]] != i {
			covered = append(covered, l)
			continue
		}
		top = append(top, l)
	}
	return top, covered
}

func TestWarmSessionEqualsCold(t *testing.T) {
	e := enginetest.Start(t, withPool(2))
	ctx := context.Background()
	p := project(t)
	req := api.CreateRequest{Project: p, Egress: &api.EgressPolicy{Mode: "custom", Allow: []string{"allowed.invalid"}}}
	cold, err := e.Create(ctx, req) // the first of its kind: cold, and the pool learns the kind
	must(t, err)
	pool := waitWarm(t, e, 2)
	warm, err := e.Create(ctx, req)
	must(t, err)
	if _, ok := pool[warm.ContainerID]; !ok {
		t.Fatalf("the second session's container %s is not one of the pool's %v", warm.ContainerID, pool)
	}
	if _, ok := pool[cold.ContainerID]; ok {
		t.Fatalf("the first session came from the pool")
	}
	if pool[warm.ContainerID] != warm.ID {
		t.Errorf("the warm container was made for session %s, given to %s", pool[warm.ContainerID], warm.ID)
	}
	cv, wv := viewOf(t, e, cold), viewOf(t, e, warm)
	if !reflect.DeepEqual(cv, wv) {
		t.Errorf("a warm session's container differs from a cold one's:\ncold %+v\nwarm %+v", cv, wv)
	}
	if !strings.Contains(strings.Join(wv.Mounts, "\n"), ":/workspace rw=true rslave") {
		t.Errorf("mounts %v: /workspace is not an rslave bind", wv.Mounts)
	}
	// Inside: the same user, limits, capabilities and environment.
	probe := []string{"sh", "-c", "id; grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; cat /proc/self/cgroup | sed 's/[0-9a-f]\\{64\\}/C/; s/" + "[0-9a-f]\\{12\\}/S/g'; env | grep -v -e AIRLOCK_SESSION -e HOSTNAME -e _PROXY= -e _proxy= | sort; ls -lan /workspace | awk '{print $1, $3, $4, $NF}'; umask"}
	_, co := run(t, e, cold.ID, probe...)
	_, wo := run(t, e, warm.ID, probe...)
	if co != wo {
		t.Errorf("inside, a warm session differs from a cold one:\ncold:\n%s\nwarm:\n%s", co, wo)
	}
	// The workspace: the project's files, writes reach the review.
	if code, out := run(t, e, warm.ID, "sh", "-c", "cat README.md && echo new > new.txt"); code != 0 || out != "# demo\n" {
		t.Fatalf("the warm session's workspace: exit %d, %q", code, out)
	}
	if d, err := e.Get(ctx, warm.ID); err != nil || d.Changed != 1 {
		t.Errorf("the warm session's changes: %+v, %v", d, err)
	}
	// /proc/mounts: the same mounts in view; below the warm one's
	// /workspace, the empty mount point the overlay was mounted over.
	ct, ccov := topmost(procMounts(t, e, cold))
	wt, wcov := topmost(procMounts(t, e, warm))
	sort.Strings(ct) // the warm one's overlay was mounted last
	sort.Strings(wt)
	if !reflect.DeepEqual(ct, wt) {
		t.Errorf("/proc/mounts in view differ:\ncold only:\n%s\nwarm only:\n%s", strings.Join(minus(ct, wt), "\n"), strings.Join(minus(wt, ct), "\n"))
	}
	if len(ccov) != 0 || len(wcov) != 1 || strings.Fields(wcov[0])[1] != "/workspace" {
		t.Errorf("covered mounts: cold %v, warm %v; want none and /workspace's mount point", ccov, wcov)
	}
	// The network policy holds, and its log is the session's.
	for _, s := range []api.Session{cold, warm} {
		code, out := run(t, e, s.ID, "wget", "-q", "-O-", "http://blocked.invalid/")
		if code == 0 || !strings.Contains(out, "403") {
			t.Fatalf("a blocked request: exit %d, %q", code, out)
		}
		log, err := e.EgressLog(ctx, s.ID, true, 0)
		must(t, err)
		if len(log) == 0 || log[len(log)-1].Host != "blocked.invalid" {
			t.Errorf("session %s's log: %+v", s.ID, log)
		}
	}
	// Metering counts the warm session's CPU.
	run(t, e, warm.ID, "sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if got, err := e.Get(ctx, warm.ID); err != nil || got.CPUSeconds <= 0.01 {
		t.Errorf("the warm session's CPU: %+v, %v", got.CPUSeconds, err)
	}
}

func TestWarmPoolFrozenAndNeverReused(t *testing.T) {
	e := enginetest.Start(t, withPool(2))
	ctx := context.Background()
	p := project(t)
	first, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	pool := waitWarm(t, e, 2)
	// Frozen: the freezer says so, and no CPU goes to them.
	usage := map[string]string{}
	for id := range pool {
		ins, err := e.Docker.ContainerInspect(ctx, id)
		must(t, err)
		freezer, cpu := cgroupFiles(t, ins.State.Pid)
		if st := strings.TrimSpace(readFile(t, filepath.Join(freezer, "freezer.state"))); st != "FROZEN" {
			t.Errorf("warm container %s: freezer %s", id, st)
		}
		usage[id] = readFile(t, filepath.Join(cpu, "cpuacct.usage"))
	}
	time.Sleep(time.Second)
	for id := range pool {
		ins, err := e.Docker.ContainerInspect(ctx, id)
		must(t, err)
		_, cpu := cgroupFiles(t, ins.State.Pid)
		if u := readFile(t, filepath.Join(cpu, "cpuacct.usage")); u != usage[id] {
			t.Errorf("warm container %s used CPU while frozen: %s -> %s", id, strings.TrimSpace(usage[id]), strings.TrimSpace(u))
		}
	}
	// Two claims at once, racing the refill they cause, then more: every
	// session has a container of its own, never one given out before.
	seen := map[string]string{first.ContainerID: first.ID}
	var mu sync.Mutex
	claim := func() {
		s, err := e.Create(ctx, api.CreateRequest{Project: p})
		must(t, err)
		mu.Lock()
		defer mu.Unlock()
		if other, ok := seen[s.ContainerID]; ok {
			t.Errorf("container %s given to %s and %s", s.ContainerID, other, s.ID)
		}
		seen[s.ContainerID] = s.ID
	}
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); claim() }()
		}
		wg.Wait()
	}
	list, err := e.List(ctx)
	must(t, err)
	for _, s := range list {
		if code, out := run(t, e, s.ID, "cat", "README.md"); code != 0 || out != "# demo\n" {
			t.Errorf("session %s: exit %d, %q", s.ID, code, out)
		}
	}
	// A removed session's container is gone, not back in the pool.
	must(t, e.Remove(ctx, first.ID))
	for id := range warmContainers(t, e) {
		if id == first.ContainerID {
			t.Errorf("a removed session's container is in the pool")
		}
	}
	if _, err := os.Stat(filepath.Join(e.StateDir, "sessions", first.ID)); !os.IsNotExist(err) {
		t.Errorf("a removed session's directory: %v", err)
	}
}

// cgroupFiles are the freezer and cpuacct cgroup directories of process
// pid (cgroup v1).
func cgroupFiles(t *testing.T, pid int) (freezer, cpu string) {
	t.Helper()
	b := readFile(t, "/proc/"+strconv.Itoa(pid)+"/cgroup")
	for _, l := range strings.Split(b, "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			switch c {
			case "freezer":
				freezer = "/sys/fs/cgroup/freezer" + f[2]
			case "cpuacct":
				cpu = "/sys/fs/cgroup/" + f[1] + f[2]
			}
		}
	}
	if freezer == "" || cpu == "" {
		enginetest.Missing(t, "cgroup v1 freezer and cpuacct controllers")
	}
	return freezer, cpu
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

func TestWarmPoolOff(t *testing.T) {
	e := enginetest.Start(t, withPool(-1))
	ctx := context.Background()
	p := project(t)
	for i := 0; i < 2; i++ {
		s, err := e.Create(ctx, api.CreateRequest{Project: p})
		must(t, err)
		if code, out := run(t, e, s.ID, "cat", "README.md"); code != 0 || out != "# demo\n" {
			t.Errorf("exit %d, %q", code, out)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if w := warmContainers(t, e); len(w) != 0 {
		t.Errorf("a pool of size 0 made containers: %v", w)
	}
}

// A session cannot see or reach the pool's other containers, nor their
// mounts.
func TestWarmSessionSeesNoOtherEntry(t *testing.T) {
	e := enginetest.Start(t, withPool(3))
	ctx := context.Background()
	p := project(t)
	_, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	waitWarm(t, e, 3)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	others := waitWarm(t, e, 2)
	_, mounts := run(t, e, s.ID, "cat", "/proc/self/mountinfo")
	_, procs := run(t, e, s.ID, "sh", "-c", "ls /proc | grep -c '^[0-9]'; cat /proc/net/route /proc/net/arp")
	for cid, id := range others {
		if strings.Contains(mounts, id) || strings.Contains(procs, id) {
			t.Errorf("the session sees warm entry %s", id)
		}
		ins, err := e.Docker.ContainerInspect(ctx, cid)
		must(t, err)
		// The entry's address, from its own network namespace.
		addr := containerAddr(t, ins.State.Pid)
		if addr == "" {
			t.Fatalf("warm container %s has no address", id)
		}
		// Every TCP connection goes to the session's gateway, whose
		// policy refuses private addresses.
		// (busybox's static wget crashes here: the request is written
		// by hand.)
		_, out := run(t, e, s.ID, "sh", "-c", "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 "+addr+" 80")
		if strings.Contains(out, "200") {
			t.Errorf("the session reached warm container %s at %s: %s", id, addr, out)
		}
		log, err := e.EgressLog(ctx, s.ID, true, 0)
		must(t, err)
		refused := false
		for _, l := range log {
			refused = refused || strings.Contains(l.Host, addr) || l.Addr == addr
		}
		if !refused {
			t.Errorf("the gateway did not refuse %s: %+v", addr, log)
		}
	}
	// Its mount point takes only its own overlay.
	if n := strings.Count(mounts, " /workspace "); n != 2 {
		t.Errorf("/workspace mounts in the session: %d\n%s", n, mounts)
	}
}

// containerAddr is the IPv4 address of eth0 in process pid's network
// namespace.
func containerAddr(t *testing.T, pid int) string {
	t.Helper()
	b := readFile(t, "/proc/"+strconv.Itoa(pid)+"/net/fib_trie")
	lines := strings.Split(b, "\n")
	for i, l := range lines {
		if strings.Contains(l, "/32 host LOCAL") && i > 0 {
			f := strings.Fields(lines[i-1])
			if len(f) == 2 && strings.HasPrefix(f[1], "10.213.") {
				return f[1]
			}
		}
	}
	return ""
}

// A restore or fork whose snapshot changed only the workspace and the
// home claims warm containers, in parallel; one that changed the
// container's own files is made cold. Both hold what the snapshot held.
func TestWarmRestoreAndFork(t *testing.T) {
	e := enginetest.Start(t, withPool(3))
	ctx := context.Background()
	p := project(t)
	s, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	if code, out := run(t, e, s.ID, "sh", "-c", "echo changed >> README.md && echo new > new.txt && echo conversation > /home/airlock/.state"); code != 0 {
		t.Fatalf("prepare: %d %s", code, out)
	}
	snap, err := e.Snapshot(ctx, s.ID, api.SnapshotRequest{})
	must(t, err)
	pool := waitWarm(t, e, 3)
	r, err := e.Restore(ctx, snap.ID, api.RestoreRequest{N: 3})
	must(t, err)
	if len(r.Sessions) != 3 {
		t.Fatalf("restored %+v", r)
	}
	for _, rs := range r.Sessions {
		if _, ok := pool[rs.ContainerID]; !ok {
			t.Errorf("restored session %s was made cold (its snapshot changed only its workspace and home)", rs.ID)
		}
		code, out := run(t, e, rs.ID, "cat", "README.md", "new.txt", "/home/airlock/.state")
		if want := "# demo\nchanged\nnew\nconversation\n"; code != 0 || out != want {
			t.Errorf("restored session %s holds %q, want %q", rs.ID, out, want)
		}
	}
	// A change to the container's own files: cold, and carried.
	s2, err := e.Create(ctx, api.CreateRequest{Project: p})
	must(t, err)
	prepare(t, e, s2.ID)
	snap2, err := e.Snapshot(ctx, s2.ID, api.SnapshotRequest{})
	must(t, err)
	pool = waitWarm(t, e, 3)
	r2, err := e.Restore(ctx, snap2.ID, api.RestoreRequest{})
	must(t, err)
	if _, ok := pool[r2.Sessions[0].ContainerID]; ok {
		t.Errorf("a snapshot with container changes was restored into a warm container")
	}
	carried(t, e, r2.Sessions[0].ID)
}
