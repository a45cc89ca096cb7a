package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/pkg/stdcopy"
)

// firstExecID stands, in a command's record, for "run by the container's
// main process" where other commands name their Docker exec.
const firstExecID = "main"

// firstRun is a session's first command run by the container's main
// process instead of a Docker exec, so that it starts with the container
// as in `docker run` (an exec costs a runc invocation on top). The main
// process is a shell that runs the command, writes a mark with its exit
// code on both output streams, closes them and idles like keepAlive.
type firstRun struct {
	argv    []string
	mark    string
	attach  types.HijackedResponse
	started time.Time
	// claimed is set when the session started from a warm container:
	// the command was not run, and runs as an exec.
	claimed bool
}

func (f *firstRun) cmd() []string {
	// The command runs in a subshell so that a builtin such as `exit`
	// or `exec` cannot end the main process.
	// It waits for the session's network, which the engine plugs in
	// once the container runs: the default route comes last.
	// (Shell builtins only: the image may have no grep.)
	script := `m=$1; shift; i=0; ` +
		`until (while read -r n d r; do [ "$n" = eth0 ] && [ "$d" = 00000000 ] && exit 0; done; exit 1) </proc/net/route 2>/dev/null || [ $i -ge 500 ]; do sleep 0.01; i=$((i+1)); done; ` +
		`if command -v -- "$1" >/dev/null 2>&1; then ("$@"); c=$?; ` +
		`else printf 'airlock: %s: command not found in the session (check the image and PATH)\n' "$1" >&2; c=127; fi; printf '%s%d\n' "$m" "$c"; printf '%s%d\n' "$m" "$c" >&2; ` +
		`exec </dev/null >/dev/null 2>&1; ` + idleScript
	return append([]string{"/bin/sh", "-c", script, "airlock", f.mark}, f.argv...)
}

// firstShell is argv run as the first command's script runs it, for a
// first command run as an exec (a warm session's): shell builtins (`exit
// 4`) work, and a command that is not there says so.
func firstShell(argv []string) []string {
	script := `if command -v -- "$1" >/dev/null 2>&1; then "$@"; ` +
		`else printf 'airlock: %s: command not found in the session (check the image and PATH)\n' "$1" >&2; exit 127; fi`
	return append([]string{"/bin/sh", "-c", script, "airlock"}, argv...)
}

// firstEligible reports whether a first command can run as the main
// process: that process has no TTY or stdin, and runs as the container's
// user with its environment.
func firstEligible(c api.CreateRequest, x api.ExecRequest) bool {
	return !x.TTY && !x.Stdin && len(x.Env) == 0 && (x.User == "" || x.User == c.User)
}

// Run creates a session and runs its first command, streaming its output
// like Exec. created is called once the session is running, before any
// output. If the caller goes away the command goes on and is recorded.
func (e *Engine) Run(ctx context.Context, creq api.CreateRequest, xreq api.ExecRequest, sio ExecIO, created func(api.Session)) (int, error) {
	if len(xreq.Argv) == 0 {
		return -1, errdefs.Invalidf("no command given: put it after `--`, e.g. `airlock run -- make test`")
	}
	if !firstEligible(creq, xreq) {
		sess, err := e.Create(ctx, creq)
		if err != nil {
			return -1, err
		}
		if created != nil {
			created(sess)
		}
		return e.Exec(ctx, sess.ID, xreq, sio)
	}
	nonce := make([]byte, 16)
	rand.Read(nonce)
	first := &firstRun{argv: xreq.Argv, mark: "airlock-exit-" + hex.EncodeToString(nonce) + ":"}
	sess, err := e.create(ctx, creq, first)
	if err != nil {
		return -1, err
	}
	if created != nil {
		created(sess)
	}
	if first.claimed {
		sio.asFirst = true
		return e.Exec(ctx, sess.ID, xreq, sio)
	}
	cmdID, err := e.store.StartCommand(context.WithoutCancel(ctx), store.Command{
		Command: api.Command{Session: sess.ID, Argv: xreq.Argv, User: sess.User, Started: first.started},
		ExecID:  firstExecID,
	})
	if err != nil {
		first.attach.Close()
		return -1, err
	}
	if sio.Started != nil {
		sio.Started(cmdID)
	}
	rc := newRecorder(e.store, cmdID)
	rc.cpuUsed = func() int64 { return e.sessionCPU(sess.ID) } // from 0: the command started with the container
	_, done, _ := e.working(context.WithoutCancel(ctx), sess.ID)
	stdout := &detachable{w: sio.Stdout}
	stderr := &detachable{w: sio.Stderr}
	marks := 0
	var code *int
	seen := func(c int) {
		code = &c
		if marks++; marks == 2 {
			first.attach.Close() // the rest is the idle process's, or strays'
		}
	}
	outM := &markWriter{w: io.MultiWriter(rc, stdout), mark: []byte(first.mark), seen: seen}
	errM := &markWriter{w: io.MultiWriter(rc, stderr), mark: []byte(first.mark), seen: seen}
	pumpDone := make(chan struct{})
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer close(pumpDone)
		if done != nil {
			defer done()
		}
		stdcopy.StdCopy(outM, errM, first.attach.Reader)
		first.attach.Close()
		outM.flush()
		errM.flush()
		e.finishFirst(rc, code, sess.ContainerID)
		e.checkpointCommand(sess.ID, cmdID, first.started)
	}()
	go e.forwardControls("", nil, sio.Signal, func(sig syscall.Signal) { e.signalFirst(sess.ContainerID, sig) }, pumpDone)
	select {
	case <-pumpDone:
	case <-ctx.Done():
		stdout.detach()
		stderr.detach()
		return -1, ctx.Err()
	}
	if c := rc.exitCode(); c != nil && code != nil {
		return *c, nil
	}
	return -1, errdefs.Unavailablef("session %s's container stopped while its first command ran: `airlock logs %s` shows what it recorded", sess.ID, sess.ID)
}

// finishFirst records the first command's end: its exit code when its
// marks came, else what the stopped container says.
func (e *Engine) finishFirst(rc *recorder, code *int, containerID string) {
	if code != nil {
		rc.finish(code, "exited")
		return
	}
	// The stream ended without the marks: the container stopped under
	// the command (removed, out of memory, Docker stopped).
	var c *int
	if ins, err := e.docker.ContainerInspect(context.Background(), containerID); err == nil && ins.State != nil && !ins.State.Running {
		c = &ins.State.ExitCode
	}
	rc.finish(c, "interrupted")
}

// signalFirst delivers sig to the first command and what it started, as a
// terminal does to its foreground processes: every process below the main
// shell (docker-init → shell → command).
func (e *Engine) signalFirst(containerID string, sig syscall.Signal) {
	ins, err := e.docker.ContainerInspect(context.Background(), containerID)
	if err != nil || ins.State == nil || ins.State.Pid <= 0 {
		return
	}
	for _, shell := range childPids(ins.State.Pid) {
		var below []int
		queue := childPids(shell)
		for len(queue) > 0 {
			p := queue[0]
			queue = append(queue[1:], childPids(p)...)
			below = append(below, p)
		}
		for _, p := range below {
			syscall.Kill(p, sig)
		}
	}
}

// childPids lists a host process's children (Linux ≥ 3.5).
func childPids(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// markWriter passes a stream through until the first command's mark,
// which it cuts out, reading the exit code after it; what follows the
// mark's line is dropped. A possible start of the mark is held back
// until it is known not to be one.
type markWriter struct {
	w    io.Writer
	mark []byte
	held []byte
	done bool
	seen func(code int)
}

func (m *markWriter) Write(p []byte) (int, error) {
	if m.done {
		return len(p), nil
	}
	m.held = append(m.held, p...)
	if i := bytes.Index(m.held, m.mark); i >= 0 {
		if i > 0 {
			m.w.Write(m.held[:i])
			m.held = append(m.held[:0], m.held[i:]...)
		}
		rest := m.held[len(m.mark):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return len(p), nil
		}
		code, err := strconv.Atoi(string(rest[:nl]))
		if err != nil {
			code = -1
		}
		m.done, m.held = true, nil
		m.seen(code)
		return len(p), nil
	}
	keep := partialSuffix(m.held, m.mark)
	if n := len(m.held) - keep; n > 0 {
		m.w.Write(m.held[:n])
		m.held = append(m.held[:0], m.held[n:]...)
	}
	return len(p), nil
}

// flush writes what was held back: at the end of the stream it was not
// the mark.
func (m *markWriter) flush() {
	if !m.done && len(m.held) > 0 {
		m.w.Write(m.held)
	}
	m.held = nil
}

// partialSuffix is the length of the longest suffix of b that is a proper
// prefix of mark.
func partialSuffix(b, mark []byte) int {
	for n := min(len(b), len(mark)-1); n > 0; n-- {
		if bytes.Equal(b[len(b)-n:], mark[:n]) {
			return n
		}
	}
	return 0
}
