package fastexec

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoInit is a session whose container has no init serving: made
// before the fast path existed, or by an engine without the init binary,
// or not started yet. Run the command another way.
var ErrNoInit = errors.New("fastexec: no init serves this session")

// sendTimeout bounds the sending of a request.
const sendTimeout = 10 * time.Second

// ErrInitGone is an init that went away before the command ended: its
// container stopped (the init is what keeps it up), which killed the
// command too.
var ErrInitGone = errors.New("fastexec: the session's init went away")

// Process is a command the init runs for the caller.
type Process struct {
	conn *net.UnixConn
	mu   sync.Mutex // serializes writes
}

// Start asks the init serving in dir (the host side of SocketDir) to run
// req with stdin, stdout and stderr as its standard streams. The caller
// keeps its copies of the descriptors and closes them when it likes (the
// write ends at once, to see EOF when the command ends). It returns an
// error wrapping ErrNoInit when no init serves there.
func Start(dir string, req Request, stdin, stdout, stderr *os.File) (*Process, error) {
	if len(req.Argv) == 0 {
		return nil, errors.New("fastexec: no command")
	}
	frame, err := encodeFrame(kindRequest, req)
	if err != nil {
		return nil, err
	}
	conn, err := dial(dir)
	if err != nil {
		return nil, err
	}
	rights := unix.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	// A peer that does not read (the session serving the socket itself)
	// must not hold the caller.
	conn.SetWriteDeadline(time.Now().Add(sendTimeout))
	n, _, err := conn.WriteMsgUnix(frame, rights, nil)
	if err == nil && n < len(frame) {
		_, err = conn.Write(frame[n:])
	}
	conn.SetWriteDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("fastexec: send the command to the session's init: %w", err)
	}
	return &Process{conn: conn}, nil
}

// dial connects to the socket in dir. The session can write there, so
// the socket is opened without following a link (a link to a host socket
// would make the engine its client) and must be a socket; the connection
// goes through the opened file, which also keeps the address short.
func dial(dir string) (*net.UnixConn, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoInit, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, SocketName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoInit, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%w: %s is not a socket", ErrNoInit, filepath.Join(dir, SocketName))
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Net: "unix", Name: "/proc/self/fd/" + strconv.Itoa(fd)})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoInit, err)
	}
	return conn, nil
}

// Signal asks the init to deliver sig to the command.
func (p *Process) Signal(sig syscall.Signal) error {
	b, err := encodeFrame(kindSignal, signalMsg{Signal: int(sig)})
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = p.conn.Write(b)
	return err
}

// Wait waits for the command to end and closes the connection. An error
// means the init went away first (ErrInitGone) or answered what the
// protocol does not allow; the exit is then unknown.
func (p *Process) Wait() (Exit, error) {
	defer p.conn.Close()
	// Read, never ReadMsgUnix: descriptors the peer might send are
	// dropped by the kernel.
	kind, body, err := readFrame(p.conn, maxReply)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return Exit{}, fmt.Errorf("%w: %v", ErrInitGone, err)
		}
		return Exit{}, fmt.Errorf("fastexec: read the command's exit: %w", err)
	}
	var x Exit
	if kind != kindExit {
		return Exit{}, ErrFrame
	}
	if err := decodeBody(body, &x); err != nil {
		return Exit{}, err
	}
	if x.Code < 0 || x.Code > 255 || x.Signal < 0 || x.Signal > 64 {
		return Exit{}, fmt.Errorf("%w: exit code %d, signal %d", ErrFrame, x.Code, x.Signal)
	}
	return x, nil
}

// Close drops the connection; the command goes on.
func (p *Process) Close() error { return p.conn.Close() }
