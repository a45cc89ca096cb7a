package fastexec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as the init for the protocol's tests: with
// FASTEXEC_TEST_SERVE set, the test binary serves on that socket (in a
// process of its own, since the server reaps every child of its process).
func TestMain(m *testing.M) {
	if sock := os.Getenv("FASTEXEC_TEST_SERVE"); sock != "" {
		srv := NewServer(ContainerEnv())
		go srv.Reap()
		l, err := net.ListenUnix("unix", &net.UnixAddr{Net: "unix", Name: sock})
		if err != nil {
			panic(err)
		}
		srv.Serve(l)
		return
	}
	code := m.Run()
	os.RemoveAll(InitTestDir())
	os.Exit(code)
}

// InitTestDir is where the integration tests build the init.
func InitTestDir() string {
	return filepath.Join(os.TempDir(), "airlock-init-test-"+strconv.Itoa(os.Getpid()))
}

// serve starts a server in a child process and returns its socket's
// directory.
func serve(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "FASTEXEC_TEST_SERVE="+filepath.Join(dir, SocketName), "FROM_INIT=yes")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(filepath.Join(dir, SocketName)); err == nil {
			return dir
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the test server never listened")
	return ""
}

type ran struct {
	exit           Exit
	stdout, stderr string
}

// start runs req in the server of dir with stdin as its input, and
// returns the process and a function that waits for the outcome.
func start(t *testing.T, dir string, req Request, stdin string) (*Process, func() ran) {
	t.Helper()
	inR, inW := pipe(t)
	outR, outW := pipe(t)
	errR, errW := pipe(t)
	p, err := Start(dir, req, inR, outW, errW)
	if err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	go func() {
		io.WriteString(inW, stdin)
		inW.Close()
	}()
	outC, errC := readAll(outR), readAll(errR)
	return p, func() ran {
		x, err := p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return ran{x, <-outC, <-errC}
	}
}

func pipe(t *testing.T) (*os.File, *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return r, w
}

func readAll(r *os.File) <-chan string {
	c := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		r.Close()
		c <- string(b)
	}()
	return c
}

func TestServe(t *testing.T) {
	dir := serve(t)
	scenarios := []struct {
		name  string
		req   Request
		stdin string
		want  ran
	}{
		{"streams and exit code", Request{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Dir: "/"}, "", ran{Exit{Code: 3}, "out\n", "err\n"}},
		{"stdin", Request{Argv: []string{"cat"}, Dir: "/"}, "in\n", ran{Exit{}, "in\n", ""}},
		{"directory", Request{Argv: []string{"pwd"}, Dir: "/tmp"}, "", ran{Exit{}, "/tmp\n", ""}},
		{"environment", Request{Argv: []string{"sh", "-c", `echo "$FROM_INIT $ADDED"`}, Env: []string{"ADDED=1"}, Dir: "/"}, "", ran{Exit{}, "yes 1\n", ""}},
		{"environment removed", Request{Argv: []string{"sh", "-c", `echo "${FROM_INIT-unset}"`}, Env: []string{"FROM_INIT"}, Dir: "/"}, "", ran{Exit{}, "unset\n", ""}},
		{"killed by a signal", Request{Argv: []string{"sh", "-c", "kill -9 $$"}, Dir: "/"}, "", ran{Exit{Code: 137, Signal: 9}, "", ""}},
		{"not found", Request{Argv: []string{"no-such-command"}, Dir: "/"}, "", ran{Exit{Code: 127}, "", "airlock: no-such-command: command not found in the session (check the image and PATH)\n"}},
		{"no such directory", Request{Argv: []string{"true"}, Dir: "/no/such/dir"}, "", ran{Exit{Code: 127}, "", "airlock: cannot run true: no such file or directory\n"}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			_, wait := start(t, dir, sc.req, sc.stdin)
			if got := wait(); got != sc.want {
				t.Errorf("got %+v, want %+v", got, sc.want)
			}
		})
	}
}

func TestServeSignal(t *testing.T) {
	dir := serve(t)
	p, wait := start(t, dir, Request{Argv: []string{"sleep", "30"}, Dir: "/"}, "")
	time.Sleep(100 * time.Millisecond)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan ran, 1)
	go func() { done <- wait() }()
	select {
	case got := <-done:
		if got.exit != (Exit{Code: 143, Signal: 15}) {
			t.Errorf("exit %+v, want 143 by SIGTERM", got.exit)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not end the command")
	}
}

// TestServeSurvivesBadRequests: a connection that breaks the protocol is
// dropped, and the server goes on serving.
func TestServeSurvivesBadRequests(t *testing.T) {
	dir := serve(t)
	sock := filepath.Join(dir, SocketName)
	for _, bad := range [][]byte{
		[]byte("garbage"),
		{0xff, 0xff, 0xff, 0xff, kindRequest},    // over the limit
		{0, 0, 0, 2, kindRequest, '{', '}'},      // no descriptors, no argv
		{0, 0, 0, 4, kindSignal, '{', '}', 0, 0}, // not a request
	} {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(bad)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 16)); n != 0 || !errors.Is(err, io.EOF) {
			t.Errorf("%q: read %d bytes, %v: want the connection closed", bad, n, err)
		}
		c.Close()
	}
	_, wait := start(t, dir, Request{Argv: []string{"true"}, Dir: "/"}, "")
	if got := wait(); got.exit.Code != 0 {
		t.Errorf("after bad requests: %+v", got)
	}
}

// TestDialRefuses: no socket, a file, or a link the session put there
// (to a socket of the host) is no init; the link is never followed.
func TestDialRefuses(t *testing.T) {
	host := serve(t) // stands for a host socket the link points at
	for _, setup := range []func(dir string) error{
		func(string) error { return nil },
		func(dir string) error { return os.WriteFile(filepath.Join(dir, SocketName), nil, 0o666) },
		func(dir string) error {
			return os.Symlink(filepath.Join(host, SocketName), filepath.Join(dir, SocketName))
		},
	} {
		dir := t.TempDir()
		if err := setup(dir); err != nil {
			t.Fatal(err)
		}
		null, _ := os.Open(os.DevNull)
		_, err := Start(dir, Request{Argv: []string{"true"}}, null, null, null)
		null.Close()
		if !errors.Is(err, ErrNoInit) {
			t.Errorf("%s: %v, want ErrNoInit", dir, err)
		}
	}
	// A directory that is a link is refused as well.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(host, link)
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	if _, err := Start(link, Request{Argv: []string{"true"}}, null, null, null); !errors.Is(err, ErrNoInit) {
		t.Errorf("linked directory: %v, want ErrNoInit", err)
	}
}

// TestWaitBoundsAForgedReply: what the caller reads comes from the
// session, which can serve its own socket: replies too long, of the wrong
// kind or out of range are errors, and descriptors it sends are dropped.
func TestWaitBoundsAForgedReply(t *testing.T) {
	header := func(n uint32, kind byte) []byte {
		b := make([]byte, headerLen)
		binary.BigEndian.PutUint32(b, n)
		b[4] = kind
		return b
	}
	frame := func(kind byte, body string) []byte { return append(header(uint32(len(body)), kind), body...) }
	for _, reply := range [][]byte{
		header(1<<30, kindExit),
		frame(kindSignal, `{"signal":9}`),
		frame(kindExit, `{"code":-1}`),
		frame(kindExit, `{"code":300}`),
		frame(kindExit, `not json`),
		frame(kindExit, `{"code":1`)[:8],
	} {
		dir := t.TempDir()
		l, err := net.ListenUnix("unix", &net.UnixAddr{Net: "unix", Name: filepath.Join(dir, SocketName)})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			defer c.Close()
			io.ReadFull(c, make([]byte, headerLen))
			c.Write(reply)
		}()
		null, _ := os.Open(os.DevNull)
		p, err := Start(dir, Request{Argv: []string{"true"}}, null, null, null)
		null.Close()
		if err != nil {
			t.Fatal(err)
		}
		if x, err := p.Wait(); err == nil {
			t.Errorf("reply %q: exit %+v, want an error", reply, x)
		}
		l.Close()
	}
}

func TestFrames(t *testing.T) {
	b, err := encodeFrame(kindRequest, Request{Argv: []string{"a"}, Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	kind, body, err := readFrame(bytes.NewReader(b), maxRequest)
	var req Request
	if err != nil || kind != kindRequest || decodeBody(body, &req) != nil || req.Argv[0] != "a" {
		t.Fatalf("round trip: %c %q %v", kind, body, err)
	}
	if _, _, err := readFrame(bytes.NewReader(b), 4); !errors.Is(err, ErrFrame) {
		t.Errorf("over the limit: %v", err)
	}
	if _, _, err := readFrame(bytes.NewReader(b[:len(b)-1]), maxRequest); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut short: %v", err)
	}
	if _, err := encodeFrame(kindRequest, Request{Argv: []string{strings.Repeat("x", maxRequest)}}); err == nil {
		t.Errorf("a request over the limit was encoded")
	}
}

func TestMergeEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/root", "A=1"}
	for _, sc := range []struct{ add, want []string }{
		{nil, base},
		{[]string{"B=2"}, []string{"PATH=/bin", "HOME=/root", "A=1", "B=2"}},
		{[]string{"HOME=/tmp"}, []string{"PATH=/bin", "A=1", "HOME=/tmp"}},
		{[]string{"A"}, []string{"PATH=/bin", "HOME=/root"}},
		{[]string{"A=", "A=3"}, []string{"PATH=/bin", "HOME=/root", "A=3"}},
	} {
		if got := mergeEnv(base, sc.add); !slices.Equal(got, sc.want) {
			t.Errorf("%v: %v, want %v", sc.add, got, sc.want)
		}
	}
	if base[2] != "A=1" {
		t.Errorf("mergeEnv changed its base: %v", base)
	}
}
