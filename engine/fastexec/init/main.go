// Command airlock-init is a session container's main process when the
// engine has it: it reaps what ends below it, as Docker's init does, and
// runs the engine's commands sent on its socket (see engine/fastexec). It
// must build with CGO_ENABLED=0: it runs in any image.
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/fastexec"
)

func main() {
	// Orphans of the commands come to us to be reaped, not to the
	// container's pid 1.
	const prSetChildSubreaper = 36
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)

	srv := fastexec.NewServer(fastexec.ContainerEnv())
	go srv.Reap()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := (<-stop).(syscall.Signal)
		srv.Signal(sig)
		os.Exit(0) // as the idle loop it replaces
	}()

	sock := filepath.Join(fastexec.SocketDir, fastexec.SocketName)
	os.Remove(sock) // a previous run's
	// The socket is the container user's alone; the commands get the
	// umask the init started with, as an exec does.
	umask := syscall.Umask(0o077)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Net: "unix", Name: sock})
	syscall.Umask(umask)
	if err == nil {
		l.SetUnlinkOnClose(false)
		err = srv.Serve(l)
	}
	// Without a socket the container still needs its reaper; the engine
	// uses `docker exec`.
	fmt.Fprintf(os.Stderr, "airlock-init: %v: commands go through docker exec\n", err)
	for {
		time.Sleep(time.Hour)
	}
}
