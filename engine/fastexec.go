package engine

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/fastexec"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/overlay"
	"github.com/docker/docker/api/types/mount"
)

// The fast exec path: a session's container runs airlock-init (package
// engine/fastexec) as its main process, which runs the engine's commands
// on request over a socket in the session's directory, at a fraction of
// a Docker exec's cost. Commands with a TTY or another user, and
// containers without the init, go through `docker exec`.

// fastExecID stands, in a command's record, for "run by the session's
// init" where other commands name their Docker exec. (After an engine
// restart Docker does not know it: such a command is settled as
// interrupted.)
const fastExecID = "fastexec"

// initName is the init's binary beside the engine's (the Makefile builds
// both into bin/).
const initName = "airlock-init"

// besideExecutable is the path of name in the engine's executable's
// directory (name alone when that is unknown).
func besideExecutable(name string) string {
	exe, err := os.Executable()
	if err != nil {
		return name
	}
	return filepath.Join(filepath.Dir(exe), name)
}

// findInit is the init to bind into containers: configured, beside the
// engine's executable, or none.
func findInit(configured string) string {
	switch configured {
	case "none":
		return ""
	case "":
		configured = besideExecutable(initName)
	}
	p, err := filepath.Abs(configured)
	if err != nil {
		return ""
	}
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return ""
	}
	return p
}

// fastDir is the host side of a session's socket directory: beside the
// workspace's upper directory, in its size-capped tmpfs, so that what the
// session writes there counts against its workspace and not the host's
// disk. The tmpfs's root is root's alone (0700): no one else on the host
// reaches the socket.
func fastDir(sessionDir string) string {
	ws := overlay.Workspace{Dir: sessionDir}
	return filepath.Join(filepath.Dir(ws.Upper()), "fastexec")
}

// fastMounts are the init (read-only) and its socket directory, for a
// session's container; none when the engine has no init. The directory is
// open to the container's user, whoever that is.
func (e *Engine) fastMounts(rec store.Session) []mount.Mount {
	if e.initPath == "" {
		return nil
	}
	dir := fastDir(rec.Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.log.Warn("no fast exec for the session", "session", rec.ID, "err", err)
		return nil
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		e.log.Warn("no fast exec for the session", "session", rec.ID, "err", err)
		return nil
	}
	return []mount.Mount{
		{Type: mount.TypeBind, Source: e.initPath, Target: fastexec.InitPath, ReadOnly: true},
		{Type: mount.TypeBind, Source: dir, Target: fastexec.SocketDir},
	}
}

// startFast starts req through the session's init. An error wrapping
// fastexec.ErrNoInit means none serves: nothing started.
func (e *Engine) startFast(rec store.Session, req api.ExecRequest) (*fastCommand, error) {
	var stdinR, stdinW *os.File
	var err error
	if req.Stdin {
		stdinR, stdinW, err = os.Pipe()
	} else {
		stdinR, err = os.Open(os.DevNull)
	}
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeFiles(stdinR, stdinW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles(stdinR, stdinW, outR, outW)
		return nil, err
	}
	dir := fastDir(rec.Dir)
	freq := fastexec.Request{Argv: req.Argv, Env: req.Env, Dir: workspacePath}
	p, err := fastexec.Start(dir, freq, stdinR, outW, errW)
	// A container made with the init (its directory is there) that has
	// just started may not listen yet: a few milliseconds.
	for i := 0; i < 50 && errors.Is(err, fastexec.ErrNoInit) && initStarting(dir); i++ {
		time.Sleep(2 * time.Millisecond)
		p, err = fastexec.Start(dir, freq, stdinR, outW, errW)
	}
	closeFiles(stdinR, outW, errW) // the command's ends, now the init's
	if err != nil {
		closeFiles(stdinW, outR, errR)
		return nil, err
	}
	return &fastCommand{p: p, stdin: stdinW, stdout: outR, stderr: errR}, nil
}

// initStarting says whether the socket directory dir is there without its
// socket yet.
func initStarting(dir string) bool {
	if _, err := os.Lstat(dir); err != nil {
		return false
	}
	_, err := os.Lstat(filepath.Join(dir, fastexec.SocketName))
	return errors.Is(err, fs.ErrNotExist)
}

// fastCommand is a command run by the session's init.
type fastCommand struct {
	p              *fastexec.Process
	stdin          *os.File // its stdin's write end; nil without stdin
	stdinOnce      sync.Once
	stdout, stderr *os.File // its output's read ends
	code           *int
	state          string
}

func (f *fastCommand) execID() string { return fastExecID }

func (f *fastCommand) feed(r io.Reader) {
	io.Copy(f.stdin, r)
	f.closeStdin()
}

func (f *fastCommand) closeStdin() {
	f.stdinOnce.Do(func() { closeFiles(f.stdin) })
}

func (f *fastCommand) pump(stdout, stderr io.Writer) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	copyOut := func(w io.Writer, r *os.File) {
		defer wg.Done()
		io.Copy(&lockedWriter{mu: &mu, w: w}, r)
		r.Close()
	}
	wg.Add(2)
	go copyOut(stdout, f.stdout)
	go copyOut(stderr, f.stderr)
	x, err := f.p.Wait()
	wg.Wait() // output ends once every process holding it has
	f.closeStdin()
	switch {
	case err == nil:
		f.code, f.state = &x.Code, "exited"
	case errors.Is(err, fastexec.ErrInitGone):
		// The container stopped, and SIGKILL ended its processes, as
		// Docker reports for an exec it had.
		code := 128 + int(syscall.SIGKILL)
		f.code, f.state, err = &code, "exited", nil
	default:
		f.state = "interrupted"
	}
	return err
}

func (f *fastCommand) exit() (*int, string)      { return f.code, f.state }
func (f *fastCommand) signal(sig syscall.Signal) { f.p.Signal(sig) }

func (f *fastCommand) abort() {
	f.p.Close()
	f.closeStdin()
	closeFiles(f.stdout, f.stderr)
}

// lockedWriter keeps the writes of a command's two output streams from
// overlapping: the caller's writers may share one connection.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
