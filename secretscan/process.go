package secretscan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// Process is a Finder that asks a child process: the scanner's binary,
// started on the first Find, asked one request at a time, and stopped once
// no Find has come for Idle. A child that dies, or a Find whose context
// ends mid-request, costs that Find its answer (an error) and the child:
// the next Find starts another. Safe for concurrent use; Finds take
// turns, and one waiting for its turn returns when its context ends.
type Process struct {
	opts ProcessOptions

	turn   chan struct{} // holds a value while a Find has the child
	closed chan struct{} // closed by Close

	mu    sync.Mutex // guards what follows; never held while the child works
	child *child     // nil: none running
	last  time.Time  // when the last request ended
	timer *time.Timer
}

// ProcessOptions say which child to run and for how long.
type ProcessOptions struct {
	// Path is the scanner's binary (cmd/airlock-scan).
	Path string
	// Args and Env are the child's arguments and environment. Nil Env
	// is an empty one, not this process's: the child reads what sessions
	// wrote, and the engine's environment may hold API keys.
	Args, Env []string
	// Idle is how long a child is kept without a request (default 30 s).
	Idle time.Duration
}

// NewProcess returns a Finder that runs o.Path when it is first asked.
// Nothing is started, or checked, until then.
func NewProcess(o ProcessOptions) *Process {
	if o.Idle <= 0 {
		o.Idle = 30 * time.Second
	}
	return &Process{opts: o, turn: make(chan struct{}, 1), closed: make(chan struct{})}
}

var errClosed = errors.New("the secret scanner is closed")

// Find sends texts to the child, in one request, and returns what it
// found.
func (p *Process) Find(ctx context.Context, texts []string) ([][]Match, error) {
	size := 0
	for _, t := range texts {
		size += len(t)
	}
	if size > MaxText || len(texts) > maxTexts {
		return nil, fmt.Errorf("%d texts of %d bytes are over the secret scanner's limit of %d texts of %d bytes", len(texts), size, maxTexts, MaxText)
	}
	if len(texts) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case p.turn <- struct{}{}:
		defer func() { <-p.turn }()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.closed:
		return nil, errClosed
	}
	c, err := p.running()
	if err != nil {
		return nil, err
	}
	rep, err := c.ask(ctx, texts)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.child != c { // Close took it
			return nil, errClosed
		}
		how := p.stopChild()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the secret scanner failed: %w (%s)", err, how)
	}
	p.last = time.Now()
	if p.timer == nil {
		p.timer = time.AfterFunc(p.opts.Idle, p.stopIdle)
	} else {
		p.timer.Reset(p.opts.Idle)
	}
	if rep.Error != "" {
		return nil, errors.New("the secret scanner: " + rep.Error)
	}
	if len(rep.Matches) != len(texts) {
		return nil, fmt.Errorf("the secret scanner answered for %d texts, asked about %d", len(rep.Matches), len(texts))
	}
	return rep.Matches, nil
}

// running is the child, started if none runs.
func (p *Process) running() (*child, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		return nil, errClosed
	default:
	}
	if p.child == nil {
		c, err := p.start()
		if err != nil {
			return nil, err
		}
		p.child = c
	}
	return p.child, nil
}

// Running reports whether a child is running (for tests).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.child != nil
}

// Close stops the child, if any, without waiting for a Find it is
// working for (that Find fails); Finds after it fail.
func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.stopChild()
	return nil
}

// stopIdle stops the child once no request has come for Idle. A timer
// that fires while a Find has its turn leaves the child to it (it sets
// the timer again when it ends); one that fires as a Find ends finds last
// moved on.
func (p *Process) stopIdle() {
	select {
	case p.turn <- struct{}{}:
		defer func() { <-p.turn }()
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) >= p.opts.Idle {
		p.stopChild()
	}
}

// stopChild kills the child and reaps it, and says how it ended and what
// it last wrote to stderr. Killing rather than closing its input: a
// child in the middle of a text would finish it first.
func (p *Process) stopChild() string {
	if p.child == nil {
		return ""
	}
	c := p.child
	p.child = nil
	c.cmd.Process.Kill()
	how := "exited"
	if err := c.cmd.Wait(); err != nil {
		how = err.Error()
	}
	return how + c.stderr.said()
}

// child is a running scanner.
type child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tail
}

// start runs the scanner. Its input is a pipe only this process holds:
// when the engine dies the child reads the end of it and exits.
func (p *Process) start() (*child, error) {
	cmd := exec.Command(p.opts.Path, p.opts.Args...)
	cmd.Env = p.opts.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	c := &child{cmd: cmd, stderr: &tail{max: 2048}}
	cmd.Stderr = c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the secret scanner %s: %w (it is built beside the engine's binary: make build, or make install)", p.opts.Path, err)
	}
	c.in, c.out = in, bufio.NewReaderSize(out, 1<<16)
	return c, nil
}

// ask sends one request and reads the reply; ctx ending kills the child,
// and fails ask even when the reply came as it ended: the child is being
// killed all the same, and must not be asked again.
func (c *child) ask(ctx context.Context, texts []string) (reply, error) {
	stop := context.AfterFunc(ctx, func() { c.cmd.Process.Kill() })
	rep, err := c.exchange(texts)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	return rep, err
}

// exchange writes one request and reads its reply.
func (c *child) exchange(texts []string) (reply, error) {
	var rep reply
	w := bufio.NewWriterSize(c.in, 1<<16) // a text's frame header and a small text: one write
	if err := writeRequest(w, texts); err != nil {
		return rep, err
	}
	if err := w.Flush(); err != nil {
		return rep, err
	}
	b, err := readFrame(c.out, maxReply)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal([]byte(b), &rep); err != nil {
		return rep, fmt.Errorf("the secret scanner's reply: %w", err)
	}
	return rep, nil
}

// tail keeps the last max bytes written to it: a child's stderr.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// said is what the child last wrote to stderr, as the end of an error.
func (t *tail) said() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return ""
	}
	return "; it said: " + string(bytes.TrimSpace(t.b))
}
