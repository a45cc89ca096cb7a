package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/testenv"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"
)

// engineContainers lists the containers of the engine whose state is
// stateDir: frozen ones by id, with the session id each was made for.
func engineContainers(t *testing.T, d *dockerclient.Client, stateDir string) (all, frozen map[string]string) {
	t.Helper()
	list, err := d.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.engine="+stateDir))})
	if err != nil {
		t.Fatal(err)
	}
	all, frozen = map[string]string{}, map[string]string{}
	for _, c := range list {
		all[c.ID] = c.Labels["dev.airlock.session"]
		if c.State == "paused" {
			frozen[c.ID] = c.Labels["dev.airlock.session"]
		}
	}
	return all, frozen
}

func waitFrozen(t *testing.T, d *dockerclient.Client, stateDir string, n int) map[string]string {
	t.Helper()
	for i := 0; ; i++ {
		_, frozen := engineContainers(t, d, stateDir)
		if len(frozen) >= n {
			return frozen
		}
		if i > 600 {
			t.Fatalf("%d warm containers after 60 s, want %d", len(frozen), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An engine killed with warm containers leaves none behind: the next one
// removes them, their mounts and directories, and makes its own.
func TestEngineCrashWithWarmPool(t *testing.T) {
	c := newCLI(t)
	d := enginetest.Require(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")
	stateDir := ""
	for _, v := range c.env {
		if s, ok := strings.CutPrefix(v, "AIRLOCK_STATE_DIR="); ok {
			stateDir = s
		}
	}
	c.ok("run", "--project", p, "--image", enginetest.Image, "--", "true")
	old := waitFrozen(t, d, stateDir, 2)
	v, err := client.New(c.socket).Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(v.PID, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(v.PID, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	// The next command starts a new engine, which cleans up.
	c.ok("ls")
	all, _ := engineContainers(t, d, stateDir)
	for id, sess := range old {
		if _, ok := all[id]; ok {
			t.Errorf("the killed engine's warm container %s (%s) is still there", id, sess)
		}
		if _, err := os.Stat(filepath.Join(stateDir, "sessions", sess)); !os.IsNotExist(err) {
			t.Errorf("the killed engine's warm directory %s: %v", sess, err)
		}
		for _, m := range testenv.MountsUnder(t, filepath.Join(stateDir, "sessions", sess)) {
			t.Errorf("the killed engine's warm mount %s is still there", m)
		}
	}
	// The new engine serves from a pool of its own.
	out := c.ok("run", "--project", p, "--image", enginetest.Image, "--", "cat", "README.md")
	if !strings.Contains(out, "# app") {
		t.Errorf("a session after the restart: %q", out)
	}
	fresh := waitFrozen(t, d, stateDir, 2)
	for id := range fresh {
		if _, ok := old[id]; ok {
			t.Errorf("warm container %s outlived its engine", id)
		}
	}
	// A stopped engine leaves nothing of its pool either.
	c.stopEngine()
	if all, _ := engineContainers(t, d, stateDir); len(all) != 0 {
		t.Errorf("containers left after the engine stopped: %v", all)
	}
	if m := testenv.MountsUnder(t, filepath.Join(stateDir, "sessions")); len(m) != 0 {
		t.Errorf("mounts left after the engine stopped: %v", m)
	}
}
