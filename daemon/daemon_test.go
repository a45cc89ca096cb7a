package daemon

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

func TestOptionDefaults(t *testing.T) {
	o := Options{StateDir: "/x"}.withDefaults()
	if o.Logger == nil || o.Version != "dev" || o.StateDir != "/x" || o.SpareNetworks != 0 || o.IdleCheck != 0 || o.PolicyFile != "" {
		t.Errorf("defaults %+v", o)
	}
	if o := (Options{Version: "1.2.3", SpareNetworks: 1}).withDefaults(); o.Version != "1.2.3" || o.SpareNetworks != 1 {
		t.Errorf("given options kept: %+v", o)
	}
}

// TestRefusesBadInputFirst: what is wrong with the input is said before
// anything is checked or started (no Docker, no root needed).
func TestRefusesBadInputFirst(t *testing.T) {
	ctx := context.Background()
	if _, err := Assemble(ctx, Options{}); err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("no state directory: %v", err)
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "token")
	os.WriteFile(short, []byte("short"), 0o600)
	bad := filepath.Join(dir, "config.yaml")
	os.WriteFile(bad, []byte("idle_timeout: soon\n"), 0o644)
	sock := filepath.Join(dir, "engine.sock")
	for name, o := range map[string]ServeOptions{
		"idle_timeout": {Config: bad},
		"none.yaml":    {Config: filepath.Join(dir, "none.yaml"), ConfigRequired: true},
		"at least 16":  {TokenFile: short},
	} {
		o.Socket, o.StateDir = sock, filepath.Join(dir, "state")
		if err := Serve(ctx, o); err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an invalid-input error saying so", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("a refused start made the state directory")
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("a refused start made the socket")
	}
}

// TestAssembleWithoutDocker: no Docker daemon is a clear error, and
// nothing is left open.
func TestAssembleWithoutDocker(t *testing.T) {
	enginetest.Require(t)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	_, err := Assemble(context.Background(), Options{StateDir: t.TempDir()})
	if err == nil || !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "Docker is not running") || !strings.Contains(err.Error(), "dockerd") {
		t.Errorf("without Docker: %v", err)
	}
}

// TestAssembleWithStuckDocker: a Docker that takes the connection and never
// answers is told apart from one that is not there: the start waits the
// probe's bound, then says Docker is stuck, not that it is not running.
func TestAssembleWithStuckDocker(t *testing.T) {
	enginetest.Require(t)
	sock := filepath.Join(t.TempDir(), "stuck.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	defer func(was time.Duration) { dockerProbe = was }(dockerProbe)
	dockerProbe = 300 * time.Millisecond
	_, err = Assemble(context.Background(), Options{StateDir: t.TempDir()})
	if err == nil || !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "did not answer") || strings.Contains(err.Error(), "not running") {
		t.Errorf("with a stuck Docker: %v", err)
	}
}

// TestServe runs the daemon in this process: the socket answers with the
// engine's version, the interface opens on TCP behind the token from the
// token file, and a stop closes both and removes the socket.
func TestServe(t *testing.T) {
	enginetest.Require(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "engine.sock")
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("a-token-of-this-test-0123456789\n"), 0o600)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ServeOptions{Socket: sock, StateDir: filepath.Join(dir, "state"), Config: filepath.Join(dir, "none.yaml"), TokenFile: tokenFile, Version: "9.9.9"})
	}()

	c := client.New(sock)
	if err := c.WaitReady(ctx, 60*time.Second); err != nil {
		t.Fatalf("the daemon does not answer: %v", err)
	}
	v, err := c.Ping(ctx)
	if err != nil || v.Engine != "9.9.9" || v.DockerVersion == "" || v.PID != os.Getpid() {
		t.Errorf("version %+v, %v", v, err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket: %v %v, want mode 0600", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "state", "airlock.db")); err != nil || fi.Size() == 0 {
		t.Errorf("the store is not in the state directory: %v", err)
	}
	ui, err := c.StartUI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(ui)
	if err != nil || u.Query().Get("token") != "a-token-of-this-test-0123456789" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("the interface's address %q (%v): want a loopback one with the file's token", ui, err)
	}
	if again, _ := c.StartUI(ctx); again != ui {
		t.Errorf("a second `airlock ui` opened %q, want the same %q", again, ui)
	}
	// The address works in a browser: the token becomes a cookie, which
	// then opens the API; another token opens nothing.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	status := func(u string) int {
		resp, err := browser.Get(u)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := status(ui); code != 200 {
		t.Errorf("the interface's address: %d", code)
	}
	if code := status("http://" + u.Host + "/v1/version"); code != 200 {
		t.Errorf("the API with the interface's cookie: %d", code)
	}
	if code := status("http://" + u.Host + "/?token=not-the-token-of-this-engine"); code != 403 {
		t.Errorf("an address with another token: %d", code)
	}

	stop()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is left after a stop: %v", err)
	}
	if code := status("http://" + u.Host + "/v1/version"); code != 0 {
		t.Errorf("the TCP listener answers after a stop: %d", code)
	}
}

// TestServeStopRemovesWarmContainers: a graceful stop (the signal a
// service manager sends) removes the warm pool's containers, which are
// cheap to make again and would otherwise be left running and frozen, with
// nothing to tell a user they exist once the state directory is gone.
func TestServeStopRemovesWarmContainers(t *testing.T) {
	docker := enginetest.Require(t)
	enginetest.TinyImage(t, docker)
	dir := t.TempDir()
	sock := filepath.Join(dir, "engine.sock")
	state := filepath.Join(dir, "state")
	os.WriteFile(filepath.Join(dir, "token"), []byte("a-token-of-this-test-0123456789\n"), 0o600)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ServeOptions{Socket: sock, StateDir: state, Config: filepath.Join(dir, "none.yaml"), TokenFile: filepath.Join(dir, "token")})
	}()
	c := client.New(sock)
	if err := c.WaitReady(ctx, 60*time.Second); err != nil {
		t.Fatalf("the daemon does not answer: %v", err)
	}
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("a\n"), 0o644)
	s, err := c.Create(ctx, api.CreateRequest{Project: project, Image: enginetest.Image})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	mine := func(status string) int {
		args := filters.NewArgs(filters.Arg("label", "dev.airlock.engine="+state))
		if status != "" {
			args.Add("status", status)
		}
		list, err := docker.ContainerList(context.Background(), container.ListOptions{All: true, Filters: args})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	for deadline := time.Now().Add(2 * time.Minute); mine("paused") == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool made no container in 2 minutes")
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if n := mine(""); n != 0 {
		t.Errorf("%d containers of the stopped engine are left", n)
	}
}
