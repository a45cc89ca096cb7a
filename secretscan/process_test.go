package secretscan_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/secretscan"
)

// The tests' child is this test binary, serving fakeFinder.
func TestMain(m *testing.M) {
	if os.Getenv("SECRETSCAN_TEST_CHILD") == "1" {
		if err := secretscan.Serve(context.Background(), os.Stdin, os.Stdout, fakeFinder{}); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeFinder finds SECRET on a line; CRASH, SLOW, FAIL and GARBAGE make
// the child die, hang, fail the request, or answer with a frame claiming
// a terabyte.
type fakeFinder struct{}

func (fakeFinder) Find(ctx context.Context, texts []string) ([][]secretscan.Match, error) {
	found := make([][]secretscan.Match, len(texts))
	for i, t := range texts {
		var err error
		if found[i], err = findIn(t); err != nil {
			return nil, err
		}
	}
	return found, nil
}

func findIn(text string) ([]secretscan.Match, error) {
	var found []secretscan.Match
	for i, l := range strings.Split(text, "\n") {
		switch {
		case strings.Contains(l, "CRASH"):
			fmt.Fprintln(os.Stderr, "crashing on purpose")
			os.Exit(3)
		case strings.Contains(l, "SLOW"):
			time.Sleep(time.Minute)
		case strings.Contains(l, "FAIL"):
			return nil, errors.New("this text fails")
		case strings.Contains(l, "GARBAGE"):
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], 1<<40)
			os.Stdout.Write(n[:])
			time.Sleep(time.Minute)
		case strings.Contains(l, "SECRET"):
			found = append(found, secretscan.Match{Rule: "fake", Description: "a fake secret", Line: i + 1})
		}
	}
	return found, nil
}

func newProcess(t *testing.T, idle time.Duration) *secretscan.Process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := secretscan.NewProcess(secretscan.ProcessOptions{Path: exe, Env: append(os.Environ(), "SECRETSCAN_TEST_CHILD=1"), Idle: idle})
	t.Cleanup(func() { p.Close() })
	return p
}

// find asks p and wants the secret on line want (0: none found).
func find(t *testing.T, p *secretscan.Process, text string, want int) {
	t.Helper()
	all, err := p.Find(context.Background(), []string{text})
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	got := all[0]
	if want == 0 && len(got) != 0 || want != 0 && (len(got) != 1 || got[0].Line != want || got[0].Rule != "fake") {
		t.Fatalf("found %+v, want a secret on line %d", got, want)
	}
}

// TestProcessStartsOnFirstFind: nothing runs until a text is asked
// about, and the child answers text after text.
func TestProcessStartsOnFirstFind(t *testing.T) {
	p := newProcess(t, time.Minute)
	if p.Running() {
		t.Fatal("a child runs before any Find")
	}
	find(t, p, "a\nb SECRET\n", 2)
	find(t, p, "nothing here", 0)
	find(t, p, "", 0)
	if !p.Running() {
		t.Fatal("no child between Finds")
	}
}

// TestProcessStopsWhenIdle: the child goes once no Find came for Idle,
// and the next Find starts another.
func TestProcessStopsWhenIdle(t *testing.T) {
	p := newProcess(t, 50*time.Millisecond)
	find(t, p, "SECRET", 1)
	waitFor(t, "the idle child to stop", func() bool { return !p.Running() })
	find(t, p, "x\nSECRET", 2)
}

// TestProcessChildDies: a child that dies mid-request fails that Find
// with what it said; the next Find gets a new child.
func TestProcessChildDies(t *testing.T) {
	p := newProcess(t, time.Minute)
	_, err := p.Find(context.Background(), []string{"CRASH"})
	if err == nil || !strings.Contains(err.Error(), "crashing on purpose") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("a crashing child: %v; want its exit status and its last words", err)
	}
	if p.Running() {
		t.Fatal("the dead child is still counted as running")
	}
	find(t, p, "SECRET", 1)
}

// TestProcessContextEnds: a Find whose context ends returns at once with
// the context's error, and the busy child is killed.
func TestProcessContextEnds(t *testing.T) {
	p := newProcess(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := p.Find(ctx, []string{"SLOW"}); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a Find past its deadline: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a Find past its deadline did not return")
	}
	find(t, p, "SECRET", 1)
}

// TestProcessRequestFails: an error of the detector is that Find's; the
// child stays.
func TestProcessRequestFails(t *testing.T) {
	p := newProcess(t, time.Minute)
	if _, err := p.Find(context.Background(), []string{"FAIL"}); err == nil || !strings.Contains(err.Error(), "this text fails") {
		t.Fatalf("a failing request: %v", err)
	}
	if !p.Running() {
		t.Fatal("a failed request cost the child")
	}
	find(t, p, "SECRET", 1)
}

// TestProcessHostileReply: a child that claims a terabyte-long reply is
// refused before anything is allocated for it.
func TestProcessHostileReply(t *testing.T) {
	p := newProcess(t, time.Minute)
	_, err := p.Find(context.Background(), []string{"GARBAGE"})
	if err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("a terabyte reply: %v", err)
	}
	find(t, p, "SECRET", 1)
}

// TestProcessMissingBinary: no scanner beside the engine is an error
// that says where it was looked for and how to get it.
func TestProcessMissingBinary(t *testing.T) {
	p := secretscan.NewProcess(secretscan.ProcessOptions{Path: "/nonexistent/airlock-scan"})
	defer p.Close()
	_, err := p.Find(context.Background(), []string{"x"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/airlock-scan") || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("no scanner: %v", err)
	}
}

// TestProcessConcurrent: Finds from many reviews at once each get their
// own answer.
func TestProcessConcurrent(t *testing.T) {
	p := newProcess(t, time.Minute)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := strings.Repeat("x\n", i) + "SECRET\n"
			all, err := p.Find(context.Background(), []string{"x\n", text})
			if err != nil || len(all) != 2 || len(all[0]) != 0 || len(all[1]) != 1 || all[1][0].Line != i+1 {
				t.Errorf("find %d: %+v, %v; want line %d of the second text", i, all, err, i+1)
			}
		}()
	}
	wg.Wait()
}

// TestProcessClosed: Finds after Close fail, and no child is left.
func TestProcessClosed(t *testing.T) {
	p := newProcess(t, time.Minute)
	find(t, p, "SECRET", 1)
	p.Close()
	if p.Running() {
		t.Fatal("a child after Close")
	}
	if _, err := p.Find(context.Background(), []string{"SECRET"}); err == nil {
		t.Fatal("a Find after Close worked")
	}
}

// TestServeHostileRequests: requests Serve cannot read end it with an
// error, without reading a claimed length into memory.
func TestServeHostileRequests(t *testing.T) {
	frame := func(n uint64, body string) []byte {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], n)
		return append(b[:], body...)
	}
	one := func(b []byte) []byte { return append(frame(1, ""), b...) } // a request of one text
	for name, in := range map[string][]byte{
		"over the limit":       one(frame(secretscan.MaxText+1, "")),
		"too many texts":       frame(1<<40, ""),
		"cut short":            one(frame(100, "only this")),
		"a text short":         frame(2, string(frame(6, "SECRET"))),
		"half a header":        {0, 0, 0},
		"half a text's header": one([]byte{0, 0}),
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := secretscan.Serve(context.Background(), bytes.NewReader(in), &out, fakeFinder{}); err == nil {
				t.Fatal("served it")
			}
			if out.Len() != 0 {
				t.Fatalf("answered %q", out.String())
			}
		})
	}
	// The end of input between requests is the end of the work.
	if err := secretscan.Serve(context.Background(), io.MultiReader(bytes.NewReader(one(frame(6, "SECRET")))), io.Discard, fakeFinder{}); err != nil {
		t.Fatalf("a request then the end: %v", err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestProcessLargeText: a text of tens of megabytes goes through the pipe
// whole (the child reads it all before it answers).
func TestProcessLargeText(t *testing.T) {
	p := newProcess(t, time.Minute)
	lines := 4 << 20
	find(t, p, strings.Repeat("xxxxxxx\n", lines)+"SECRET\n", lines+1)
}

// TestProcessContextEndsAsReplyComes: a context that ends as the reply
// arrives still kills the child; the next Find must not be handed that
// dead child (and fail), but start another.
func TestProcessContextEndsAsReplyComes(t *testing.T) {
	p := newProcess(t, time.Minute)
	// Many matches: the reply takes a while to decode, and a context that
	// ends then ends after the reply was read.
	text := strings.Repeat("SECRET\n", 100_000)
	find(t, p, "", 0) // started: took is a request's time, not a start's
	t0 := time.Now()
	if _, err := p.Find(context.Background(), []string{text}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	for i := range 20 { // ending from 60% of the way to its end
		ctx, cancel := context.WithTimeout(context.Background(), took*time.Duration(60+2*i)/100)
		p.Find(ctx, []string{text}) // its answer or its context's error: either is right
		cancel()
		find(t, p, "SECRET", 1)
	}
}

// TestProcessWaitingFindEnds: a Find waiting for another's turn returns
// when its own context ends, and Close does not wait for a Find the
// child never answers: it stops the child, and that Find fails.
func TestProcessWaitingFindEnds(t *testing.T) {
	p := newProcess(t, time.Minute)
	slow := make(chan error, 1)
	go func() { _, err := p.Find(context.Background(), []string{"SLOW"}); slow <- err }()
	waitFor(t, "the slow Find to have the child", p.Running)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	waiting := make(chan error, 1)
	go func() { _, err := p.Find(ctx, []string{"SECRET"}); waiting <- err }()
	select {
	case err := <-waiting:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a waiting Find past its deadline: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Find waiting behind another did not return when its context ended")
	}

	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a Find the child never answers")
	}
	select {
	case err := <-slow:
		if err == nil {
			t.Fatal("the Find Close interrupted succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Find Close interrupted did not return")
	}
	if p.Running() {
		t.Fatal("a child after Close")
	}
}

// TestProcessEmptyEnvironment: by default the child gets none of the
// engine's environment (which may hold API keys).
func TestProcessEmptyEnvironment(t *testing.T) {
	t.Setenv("AIRLOCK_TEST_SECRET_KEY", "sk-should-not-reach-the-child")
	p := secretscan.NewProcess(secretscan.ProcessOptions{Path: "/bin/sh", Args: []string{"-c", `env >&2; exit 3`}})
	defer p.Close()
	_, err := p.Find(context.Background(), []string{"x"})
	if err == nil || strings.Contains(err.Error(), "sk-should-not-reach-the-child") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("the child's environment: %v", err)
	}
}
