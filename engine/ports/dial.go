package ports

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dialTimeout bounds a dial on the session's loopback (answered at once
// unless the session's kernel is starved).
const dialTimeout = 10 * time.Second

// dialIn connects to port on the loopback of the network namespace at
// netns (a /proc/PID/ns/net path): 127.0.0.1, then ::1 when refused (a
// server that bound "localhost" may have only the IPv6 one). The socket
// is made inside the namespace and stays there; the thread that made it
// goes back to the engine's namespace, or is thrown away if it cannot.
func dialIn(ctx context.Context, netns string, port int) (net.Conn, error) {
	ns, err := os.Open(netns)
	if err != nil {
		return nil, fmt.Errorf("open the session's network namespace: %w", err)
	}
	defer ns.Close()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer home.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("enter the session's network namespace: %w", err)}
			return
		}
		c, derr := dialLoopback(ctx, port)
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and ends with this goroutine.
			if c != nil {
				c.Close()
			}
			ch <- result{err: fmt.Errorf("leave the session's network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{c, derr}
	}()
	r := <-ch
	return r.c, r.err
}

func dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	p := strconv.Itoa(port)
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", p))
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return c, err
	}
	if c6, err6 := d.DialContext(ctx, "tcp", net.JoinHostPort("::1", p)); err6 == nil {
		return c6, nil
	}
	return nil, err
}
