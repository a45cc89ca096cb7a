package fastexec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Server is the init's side: it runs the commands it is sent and reaps
// every process that ends below it.
type Server struct {
	env []string // the container's environment, which commands start from

	mu      sync.Mutex
	running map[int]chan syscall.WaitStatus // by pid, until reaped
}

// NewServer returns a server whose commands start from env. It takes over
// SIGCHLD: call Reap in a goroutine before serving.
func NewServer(env []string) *Server {
	return &Server{env: env, running: map[int]chan syscall.WaitStatus{}}
}

// Reap waits for every child of the init that ends: its commands (their
// orphans go to the container's pid 1). It never returns.
func (s *Server) Reap() {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGCHLD)
	for {
		s.reapAll()
		<-ch
	}
}

func (s *Server) reapAll() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 {
			return
		}
		s.mu.Lock()
		if done, ok := s.running[pid]; ok {
			delete(s.running, pid)
			done <- ws
		}
		s.mu.Unlock()
	}
}

// Signal delivers sig to every running command.
func (s *Server) Signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range s.running {
		syscall.Kill(pid, sig)
	}
}

// Serve answers the connections of l, one command each, until l fails.
func (s *Server) Serve(l *net.UnixListener) error {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go s.handle(c)
	}
}

func (s *Server) handle(c *net.UnixConn) {
	defer c.Close()
	req, files, rest, err := readRequest(c)
	if err != nil {
		return
	}
	exit := s.run(io.MultiReader(bytes.NewReader(rest), c), req, files)
	if b, err := encodeFrame(kindExit, exit); err == nil {
		c.Write(b)
	}
}

// run starts req with files as its standard streams, forwards the
// signals the caller sends, and waits for it to end. A caller that goes
// away leaves the command running, as with `docker exec`.
func (s *Server) run(c io.Reader, req Request, files [3]*os.File) Exit {
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	env := mergeEnv(s.env, req.Env)
	path, err := lookPath(req.Argv[0], env)
	if err != nil {
		fmt.Fprintf(files[2], "airlock: %s: command not found in the session (check the image and PATH)\n", req.Argv[0])
		return Exit{Code: 127}
	}
	done := make(chan syscall.WaitStatus, 1)
	attr := &syscall.ProcAttr{Dir: req.Dir, Env: env, Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		// A session of its own, as runc gives an exec: `kill 0` in a
		// command ends its own group, not the init's.
		Sys: &syscall.SysProcAttr{Setsid: true}}
	// The reaper waits for the lock before it hands an exit on, so the
	// pid is known before its exit can be.
	s.mu.Lock()
	pid, err := syscall.ForkExec(path, req.Argv, attr)
	if err == nil {
		s.running[pid] = done
	}
	s.mu.Unlock()
	if err != nil {
		fmt.Fprintf(files[2], "airlock: cannot run %s: %v\n", req.Argv[0], err)
		if errors.Is(err, syscall.ENOENT) {
			return Exit{Code: 127}
		}
		return Exit{Code: 126}
	}
	for _, f := range files {
		f.Close() // the command has its own; the caller sees EOF when it ends
	}
	go s.forwardSignals(c, pid)
	ws := <-done
	if ws.Signaled() {
		return Exit{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
	}
	return Exit{Code: ws.ExitStatus()}
}

// forwardSignals delivers the signals the caller sends to pid while it
// runs.
func (s *Server) forwardSignals(c io.Reader, pid int) {
	for {
		kind, body, err := readFrame(c, maxReply)
		if err != nil {
			return
		}
		var m signalMsg
		if kind != kindSignal || decodeBody(body, &m) != nil || m.Signal <= 0 || m.Signal > 64 {
			return
		}
		s.mu.Lock()
		if _, ok := s.running[pid]; ok {
			syscall.Kill(pid, syscall.Signal(m.Signal))
		}
		s.mu.Unlock()
	}
}

// readRequest reads the request frame and the three descriptors sent with
// it, and returns what came after the frame (a signal sent at once).
func readRequest(c *net.UnixConn) (Request, [3]*os.File, []byte, error) {
	var files [3]*os.File
	var fds []int
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	var data []byte
	want := -1
	for want < 0 || len(data) < want {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if oobn > 0 {
			fds = append(fds, rights(oob[:oobn])...)
		}
		data = append(data, buf[:n]...)
		if want < 0 && len(data) >= headerLen {
			size := int(binary.BigEndian.Uint32(data))
			if data[4] != kindRequest || size > maxRequest {
				err = ErrFrame
			}
			want = headerLen + size
		}
		if err == nil && n == 0 {
			err = ErrFrame
		}
		if err != nil {
			closeAll(fds)
			return Request{}, files, nil, err
		}
	}
	var req Request
	if len(fds) != 3 || decodeBody(data[headerLen:want], &req) != nil || len(req.Argv) == 0 {
		closeAll(fds)
		return Request{}, files, nil, ErrFrame
	}
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "stdio")
	}
	return req, files, data[want:], nil
}

func rights(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// mergeEnv is base with add's variables replacing those of the same name
// and a bare NAME in add removing it, as Docker merges an exec's.
func mergeEnv(base, add []string) []string {
	if len(add) == 0 {
		return base
	}
	env := append([]string(nil), base...)
	for _, kv := range add {
		name, _, hasValue := strings.Cut(kv, "=")
		kept := env[:0]
		for _, e := range env {
			if n, _, _ := strings.Cut(e, "="); n != name {
				kept = append(kept, e)
			}
		}
		env = kept
		if hasValue {
			env = append(env, kv)
		}
	}
	return env
}

// lookPath finds name as the command's own PATH would.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// ContainerEnv is the environment the init was started with, less what a
// shell adds on its way (the idle script execs the init), so commands see
// the environment a `docker exec` gives them.
func ContainerEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		switch name, _, _ := strings.Cut(e, "="); name {
		case "PWD", "OLDPWD", "SHLVL", "_":
			continue
		}
		env = append(env, e)
	}
	return env
}
