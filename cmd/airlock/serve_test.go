package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/enginetest"
)

// TestServeRunsTheEngineBinary: with airlock-engine beside the CLI (as
// `make build` leaves them), `airlock serve` becomes that binary in the same
// process — the pid the caller started is the engine that answers, and its
// executable is airlock-engine — its reviews find secrets through the
// airlock-scan beside it, a child that is gone once reviews stop, and it
// refuses as the CLI's in-process engine does (the other tests build the
// CLI alone and cover that path).
func TestServeRunsTheEngineBinary(t *testing.T) {
	enginetest.Require(t)
	dir := t.TempDir()
	for pkg, out := range map[string]string{".": "airlock", "../airlock-engine": "airlock-engine", "../airlock-scan": "airlock-scan"} {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
	}
	bin := filepath.Join(dir, "airlock")
	sock := filepath.Join(dir, "engine.sock")
	t.Cleanup(func() { enginetest.StopDaemon(sock) })
	serve := exec.Command(bin, "serve", "--engine", sock, "--state-dir", filepath.Join(dir, "state"))
	var log safeBuffer
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	ctx := context.Background()
	cl := client.New(sock)
	if err := cl.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatalf("the engine does not answer: %v\n%s", err, log.String())
	}
	v, err := cl.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.PID != serve.Process.Pid {
		t.Errorf("the engine answering is pid %d, `airlock serve` was pid %d", v.PID, serve.Process.Pid)
	}
	if exe, _ := os.Readlink("/proc/" + strconv.Itoa(v.PID) + "/exe"); exe != filepath.Join(dir, "airlock-engine") {
		t.Errorf("the engine runs %q, want the airlock-engine beside the CLI", exe)
	}
	ls := exec.Command(bin, "ls", "--engine", sock)
	if out, err := ls.CombinedOutput(); err != nil || !strings.Contains(string(out), "ID") {
		t.Errorf("ls against it: %v %s", err, out)
	}
	secretFound(t, bin, sock, v.PID, dir)
	serve.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the engine stopped on SIGTERM with %v\n%s", err, log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the engine did not stop on SIGTERM\n%s", log.String())
	}

	noDocker := exec.Command(bin, "serve", "--engine", filepath.Join(dir, "x.sock"), "--state-dir", t.TempDir())
	noDocker.Env = append(os.Environ(), "DOCKER_HOST=unix:///nonexistent/docker.sock")
	out, err := noDocker.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 69 || !strings.Contains(string(out), "airlock: ") || !strings.Contains(string(out), "Docker is not running") {
		t.Errorf("serve without Docker: %v, %q; want exit 69 saying how to start Docker", err, out)
	}
	group := exec.Command(bin, "serve", "--engine", filepath.Join(dir, "y.sock"), "--state-dir", t.TempDir(), "--socket-group", "no-such-group-here")
	if out, err := group.CombinedOutput(); err == nil || !strings.Contains(string(out), "groupadd") {
		t.Errorf("an unknown socket group: %v %q", err, out)
	}
}

// secretFound: a session writes a Stripe key; the diff flags it, found by
// the engine's child airlock-scan (the engine links no detector).
func secretFound(t *testing.T, bin, sock string, engine int, dir string) {
	t.Helper()
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"--engine", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("airlock %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	p := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	cli("image", "build", "--tiny")
	out := cli("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", "echo 'stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF' > keys.txt")
	m := sessionLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("run did not print the session id: %q", out)
	}
	if diff := cli("diff", m[1]); !strings.Contains(diff, "stripe-access-token") {
		t.Errorf("the diff does not flag the Stripe key:\n%s", diff)
	}
	if kids := children(engine); !slices.Contains(kids, filepath.Join(dir, "airlock-scan")) {
		t.Errorf("the engine's children are %v, want its airlock-scan", kids)
	}
	cli("rm", "-f", m[1])
}

// children are the executables of pid's child processes (each thread's
// children file lists those it started).
func children(pid int) []string {
	var exes []string
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, kid := range strings.Fields(string(b)) {
			exe, _ := os.Readlink("/proc/" + kid + "/exe")
			exes = append(exes, exe)
		}
	}
	return exes
}
