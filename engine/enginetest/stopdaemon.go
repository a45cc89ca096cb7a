package enginetest

import (
	"context"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/client"
)

// StopDaemon removes every session of the engine daemon answering on
// socket (one a test's CLI started on demand) and stops it, waiting for it
// to exit: a graceful stop removes the warm pool's containers and mounts
// under the test's directory, which takes the engine up to a minute on a
// loaded machine (daemon's engineClose); one still there after 90 s is
// killed. A test's TempDir cleanup that ran before the engine was done
// failed with "device or resource busy" on a warm entry's workspace.
func StopDaemon(socket string) {
	cl := client.New(socket)
	ctx := context.Background()
	if list, err := cl.Sessions(ctx); err == nil {
		for _, s := range list {
			cl.Remove(ctx, s.ID)
		}
	}
	if v, err := cl.Ping(ctx); err == nil && v.PID > 0 {
		syscall.Kill(v.PID, syscall.SIGTERM)
		deadline := time.Now().Add(90 * time.Second)
		for syscall.Kill(v.PID, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if syscall.Kill(v.PID, 0) == nil {
			syscall.Kill(v.PID, syscall.SIGKILL)
		}
	}
}
