package engine

import (
	"context"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// ExecIO connects a command to its caller. Nil fields are unused.
type ExecIO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer // ignored with a TTY, where all output is on Stdout
	// Resize delivers terminal size changes for a TTY.
	Resize <-chan api.Resize
	// Signal delivers signals for the command's process.
	Signal <-chan syscall.Signal
	// Started is called once the command runs, with its record's id.
	Started func(commandID int64)
	// noCheckpoint: the command is part of an agent turn, whose end is
	// checkpointed instead.
	noCheckpoint bool
	// asFirst: the command is a session's first, run as an exec (the
	// session started warm): it runs as firstShell says.
	asFirst bool
}

// Output kept per command: the head and the tail, so that both how it
// started and how it ended survive a flood.
const (
	outputHead = 64 << 10
	outputTail = 960 << 10
)

// Exec runs a command in a session and returns its exit code once it ends.
// The command is recorded with its output and exit code. If the caller goes
// away (ctx ends) the command keeps running and is still recorded.
//
// (Longer than most: the session's busy mark, the control forwarding and
// the output pump it starts hand over to each other here, and read best
// in one place.)
func (e *Engine) Exec(ctx context.Context, id string, req api.ExecRequest, sio ExecIO) (int, error) {
	if len(req.Argv) == 0 {
		return -1, errdefs.Invalidf("no command given: put it after `--`, e.g. `airlock exec ID -- make test`")
	}
	// New work wakes a paused session, and keeps it awake while it runs.
	rec, done, err := e.working(ctx, id)
	if err != nil {
		return -1, err
	}
	running := false
	defer func() {
		if !running {
			done()
		}
	}()
	if rec.State != api.StateRunning {
		return -1, errdefs.Conflictf("session %s is %s: %s", rec.ID, rec.State, orNone(rec.Error))
	}
	user := req.User
	if user == "" {
		user = rec.User
	}
	// The last command's checkpoint, still being written in the
	// background, is finished before this one can write: its writes
	// would otherwise land in that checkpoint (and an undo to it).
	e.timeline.Settle(rec.ID)
	run := req
	if sio.asFirst {
		run.Argv = firstShell(req.Argv)
	}
	cmd, err := e.startCommand(ctx, rec, run, user)
	if err != nil {
		return -1, err
	}
	started := time.Now()
	cmdID, err := e.store.StartCommand(context.WithoutCancel(ctx), store.Command{
		Command: api.Command{Session: rec.ID, Argv: req.Argv, TTY: req.TTY, User: user, Started: started},
		ExecID:  cmd.execID(),
	})
	if err != nil {
		cmd.abort()
		return -1, err
	}
	if sio.Started != nil {
		sio.Started(cmdID)
	}
	rc := newRecorder(e.store, cmdID)
	cpuStart := e.sessionCPU(rec.ID)
	rc.cpuUsed = func() int64 { return max(0, e.sessionCPU(rec.ID)-cpuStart) }

	if sio.Stdin != nil && req.Stdin {
		go cmd.feed(sio.Stdin)
	}
	ctrlDone := make(chan struct{})
	defer close(ctrlDone)
	resize := sio.Resize
	if !req.TTY {
		resize = nil // only a terminal has a size
	}
	go e.forwardControls(cmd.execID(), resize, sio.Signal, cmd.signal, ctrlDone)

	// The output pump runs detached from ctx: a caller that disconnects
	// stops receiving output, but the recording goes on.
	stdout := &detachable{w: sio.Stdout}
	stderr := &detachable{w: sio.Stderr}
	pumpDone := make(chan error, 1)
	running = true
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		err := cmd.pump(io.MultiWriter(rc, stdout), io.MultiWriter(rc, stderr))
		code, state := cmd.exit()
		rc.finish(code, state)
		if !sio.noCheckpoint {
			e.checkpointCommand(rec.ID, cmdID, started)
		}
		done()
		pumpDone <- err
	}()
	select {
	case <-pumpDone:
	case <-ctx.Done():
		stdout.detach()
		stderr.detach()
		return -1, ctx.Err()
	}
	code := rc.exitCode()
	if code == nil {
		return -1, errdefs.Unavailablef("the command's exit code could not be read (its container stopped, or Docker did not say)")
	}
	return *code, nil
}

// execOptions is the exec of req, run as user in the workspace.
func execOptions(req api.ExecRequest, user string) container.ExecOptions {
	opts := container.ExecOptions{
		User:         user,
		Tty:          req.TTY,
		AttachStdin:  req.Stdin,
		AttachStdout: true,
		AttachStderr: true,
		Env:          req.Env,
		WorkingDir:   workspacePath,
		Cmd:          req.Argv,
	}
	if req.TTY && req.Width > 0 && req.Height > 0 {
		opts.ConsoleSize = &[2]uint{req.Height, req.Width}
	}
	return opts
}

// runningCommand is a command started in a session, through Docker's
// exec or the session's own init (fastexec.go).
type runningCommand interface {
	// execID names the command in its record.
	execID() string
	// feed copies r to the command's stdin and closes that at r's end.
	feed(r io.Reader)
	// pump copies the command's output (all of it to stdout with a TTY)
	// until it ends. Writes to stdout and stderr never overlap.
	pump(stdout, stderr io.Writer) error
	// exit is how the command ended, once pump returned: nil and
	// "interrupted" when that cannot be known.
	exit() (*int, string)
	// signal delivers sig to the command's process.
	signal(sig syscall.Signal)
	// abort drops the connection to a command that will not be recorded;
	// the command may go on.
	abort()
}

// startCommand starts req in rec's container as user: through the
// session's init when it can run the command (no TTY, the session's own
// user) and serves, else as a Docker exec.
func (e *Engine) startCommand(ctx context.Context, rec store.Session, req api.ExecRequest, user string) (runningCommand, error) {
	if !req.TTY && user == rec.User {
		cmd, err := e.startFast(rec, req)
		if err == nil {
			return cmd, nil
		}
		e.log.Debug("fast exec unavailable, using docker exec", "session", rec.ID, "err", err)
	}
	opts := execOptions(req, user)
	created, hj, err := e.startExec(ctx, rec, opts)
	if err != nil {
		return nil, err
	}
	return &dockerCommand{e: e, id: created.ID, tty: req.TTY, hj: hj}, nil
}

// dockerCommand is a command run as a Docker exec.
type dockerCommand struct {
	e   *Engine
	id  string
	tty bool
	hj  types.HijackedResponse
}

func (d *dockerCommand) execID() string { return d.id }

func (d *dockerCommand) feed(r io.Reader) {
	io.Copy(d.hj.Conn, r)
	d.hj.CloseWrite()
}

func (d *dockerCommand) pump(stdout, stderr io.Writer) error {
	defer d.hj.Close()
	if d.tty {
		_, err := io.Copy(stdout, d.hj.Reader)
		return err
	}
	_, err := stdcopy.StdCopy(stdout, stderr, d.hj.Reader)
	return err
}

func (d *dockerCommand) exit() (*int, string)      { return d.e.execExit(d.id) }
func (d *dockerCommand) signal(sig syscall.Signal) { d.e.signalExec(d.id, sig) }
func (d *dockerCommand) abort()                    { d.hj.Close() }

// startExec creates the exec of opts in rec's container and attaches to
// it, which starts it.
func (e *Engine) startExec(ctx context.Context, rec store.Session, opts container.ExecOptions) (container.ExecCreateResponse, types.HijackedResponse, error) {
	tExec := time.Now()
	created, err := e.docker.ContainerExecCreate(ctx, rec.ContainerID, opts)
	if err != nil {
		return created, types.HijackedResponse{}, dockerError("start the command", err)
	}
	tAttach := time.Now()
	hj, err := e.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: opts.Tty, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return created, hj, dockerError("attach to the command", err)
	}
	e.log.Debug("exec timing", "session", rec.ID, "create", tAttach.Sub(tExec), "attach+start", time.Since(tAttach))
	if opts.ConsoleSize != nil {
		go e.sizeTTY(created.ID, opts.ConsoleSize[0], opts.ConsoleSize[1])
	}
	return created, hj, nil
}

// sizeTTY sizes an exec's TTY once its process exists, as the docker CLI
// does: API 1.41 (Engine 20.10) ignores ConsoleSize on create.
func (e *Engine) sizeTTY(execID string, height, width uint) {
	for i := 0; i < 10; i++ {
		if e.docker.ContainerExecResize(context.Background(), execID, container.ResizeOptions{Height: height, Width: width}) == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// forwardControls passes the caller's resizes on to exec execID (a nil
// resize: none come) and its signals to deliver, until done is closed.
func (e *Engine) forwardControls(execID string, resize <-chan api.Resize, signal <-chan syscall.Signal, deliver func(syscall.Signal), done <-chan struct{}) {
	for {
		select {
		case sz, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			e.docker.ContainerExecResize(context.Background(), execID, container.ResizeOptions{Height: sz.Height, Width: sz.Width})
		case sig, ok := <-signal:
			if !ok {
				signal = nil
				continue
			}
			deliver(sig)
		case <-done:
			return
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "start a new session with `airlock run`"
	}
	return s
}

// execExit waits briefly for Docker to mark the exec finished after its
// output stream closed, then reads the exit code.
func (e *Engine) execExit(execID string) (*int, string) {
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		ins, err := e.docker.ContainerExecInspect(ctx, execID)
		if err != nil {
			return nil, "interrupted"
		}
		if !ins.Running {
			code := ins.ExitCode
			return &code, "exited"
		}
		time.Sleep(time.Duration(min(i+1, 20)) * time.Millisecond)
	}
	return nil, "interrupted"
}

// signalExec delivers sig to the command's process. Docker has no API for
// this, but the exec's Pid is a host pid and the engine runs as root.
func (e *Engine) signalExec(execID string, sig syscall.Signal) {
	ins, err := e.docker.ContainerExecInspect(context.Background(), execID)
	if err != nil || !ins.Running || ins.Pid <= 0 {
		return
	}
	if err := syscall.Kill(ins.Pid, sig); err != nil {
		e.log.Debug("signal command", "exec", execID, "err", err)
	}
}

// detachable is a writer that can be cut from its destination, after
// which writes succeed and go nowhere.
type detachable struct {
	mu sync.Mutex
	w  io.Writer
}

func (d *detachable) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil {
		return len(p), nil
	}
	if _, err := d.w.Write(p); err != nil {
		d.w = nil // the caller went away; keep recording
	}
	return len(p), nil
}

func (d *detachable) detach() {
	d.mu.Lock()
	d.w = nil
	d.mu.Unlock()
}

// recorder keeps a command's output (head and tail) and flushes it to the
// store at most once a second while the command runs.
type recorder struct {
	st    *store.Store
	id    int64
	mu    sync.Mutex
	head  []byte
	tail  []byte // ring of the last outputTail bytes once head is full
	cut   bool
	dirty bool
	code  *int
	done  chan struct{}
	// cpuUsed is the session's CPU ns since the command started.
	cpuUsed func() int64
}

func newRecorder(st *store.Store, id int64) *recorder {
	r := &recorder{st: st, id: id, done: make(chan struct{})}
	go r.flushLoop()
	return r
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if room := outputHead - len(r.head); room > 0 {
		k := min(room, len(p))
		r.head = append(r.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		r.tail = append(r.tail, p...)
		if over := len(r.tail) - outputTail; over > 0 {
			r.tail = append(r.tail[:0], r.tail[over:]...)
			r.cut = true
		}
	}
	r.dirty = true
	return n, nil
}

func (r *recorder) snapshot() ([]byte, bool) {
	out := make([]byte, 0, len(r.head)+len(r.tail)+64)
	out = append(out, r.head...)
	if r.cut {
		out = append(out, "\n[... output truncated by airlock ...]\n"...)
	}
	out = append(out, r.tail...)
	return out, r.cut
}

func (r *recorder) flushLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.mu.Lock()
			if !r.dirty {
				r.mu.Unlock()
				continue
			}
			out, cut := r.snapshot()
			r.dirty = false
			r.mu.Unlock()
			r.st.SetOutput(context.Background(), r.id, out, cut)
		case <-r.done:
			return
		}
	}
}

func (r *recorder) finish(code *int, state string) {
	close(r.done)
	r.mu.Lock()
	out, cut := r.snapshot()
	r.code = code
	r.mu.Unlock()
	ctx := context.Background()
	r.st.SetOutput(ctx, r.id, out, cut)
	if r.cpuUsed != nil {
		r.st.SetCommandCPU(ctx, r.id, r.cpuUsed())
	}
	r.st.FinishCommand(ctx, r.id, state, code, time.Now())
}

func (r *recorder) exitCode() *int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code
}

// Commands lists what ran in a session, with output when asked.
func (e *Engine) Commands(ctx context.Context, id string, withOutput bool) ([]api.Command, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	cmds, err := e.store.Commands(ctx, rec.ID, withOutput)
	if err != nil {
		return nil, err
	}
	out := make([]api.Command, len(cmds))
	for i, c := range cmds {
		out[i] = c.Command
	}
	return out, nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
