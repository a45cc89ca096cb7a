package enginetest

import (
	"context"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/client"
)

// StopDaemon removes every session of the engine daemon answering on
// socket (one a test's CLI started on demand) and stops it, waiting up to
// five seconds for it to exit.
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
		for i := 0; i < 250 && syscall.Kill(v.PID, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}
