// Command airlock-scan is the engine's secret scanner: the engine starts
// it beside its own binary when a review first needs it, sends it the
// text a session added, and reads back the secrets gitleaks' rules find
// in it (package secretscan's wire, on stdin and stdout). It exits when
// its input ends — the engine let it go, or died. Not for people to run.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/airlock/airlock/secretscan"
	"github.com/airlock/airlock/secretscan/gitleaks"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "airlock-scan takes no arguments: the engine runs it and talks to it on stdin and stdout")
		os.Exit(2)
	}
	wire, err := ownStdout()
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock-scan:", err)
		os.Exit(1)
	}
	if err := secretscan.Serve(context.Background(), os.Stdin, wire, gitleaks.New()); err != nil {
		fmt.Fprintln(os.Stderr, "airlock-scan:", err)
		os.Exit(1)
	}
}

// ownStdout keeps the wire to itself: stdout moves to a descriptor of its
// own, and descriptor 1 becomes stderr, so that nothing the detector's
// libraries print can land in a reply.
func ownStdout() (*os.File, error) {
	fd, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("keep stdout for the engine: %w", err)
	}
	if err := unix.Dup3(2, 1, 0); err != nil {
		return nil, fmt.Errorf("point stdout at stderr: %w", err)
	}
	return os.NewFile(uintptr(fd), "wire"), nil
}
