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
	// Orphans of the commands go to the container's pid 1 (Docker's
	// init), which reaps them, as they do after a docker exec. Not a
	// subreaper: CRIU cannot restore an orphan whose session leader is
	// gone unless its parent is pid 1 ("Can't find a session leader"),
	// and every command runs in a session of its own.
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
