package enginetest

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// Serve starts cmd, a daemon of the test's own (a second dockerd, Podman's
// service), stops it when the test ends (SIGTERM, then a kill after 30
// s), and returns once d, a client to it, has an answer: what fails the
// test otherwise says how the daemon's log ends.
func Serve(t testing.TB, what string, cmd *exec.Cmd, d *client.Client) {
	t.Helper()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", what, lastLines(log.String()))
		default:
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%s did not answer in a minute: %v\n%s", what, err, lastLines(log.String()))
		}
	}
}

func lastLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}
