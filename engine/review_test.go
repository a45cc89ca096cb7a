package engine_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/errdefs"
)

// vmHWM resets the process's peak resident size (the engine runs in this
// process) and returns how to read its growth since.
func vmHWM(t *testing.T) func() int64 {
	t.Helper()
	field := func(name string) int64 {
		f, err := os.Open("/proc/self/status")
		must(t, err)
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), name); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				return kb << 10
			}
		}
		return 0
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	start := field("VmRSS:")
	return func() int64 { return field("VmHWM:") - start }
}

// sizeWriter counts a patch's bytes and keeps its comment lines.
type sizeWriter struct {
	n     int64
	notes strings.Builder
}

func (w *sizeWriter) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b[:min(len(b), 16)]), "# airlock:") {
		w.notes.Write(b)
	}
	w.n += int64(len(b))
	return len(b), nil
}

// A session that writes a 40 GB sparse file, 100 MB of random bytes, a
// FIFO and a socket: the engine's diff, stat and patch answer promptly,
// in little memory, and never open the FIFO.
func TestReviewOfHostileSession(t *testing.T) {
	e := enginetest.Start(t, func(o *engine.Options) {
		o.Defaults.Limits.WorkspaceSize = 256 << 20
		o.Defaults.Limits.Memory = 512 << 20
	})
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	code, out := run(t, e, s.ID, "sh", "-c", "truncate -s 40G sparse.bin && head -c 100000000 /dev/urandom > random.bin && mkfifo fifo && "+
		"awk 'BEGIN{for(i=0;i<300000;i++) printf \"%x\", i}' > oneline.txt && echo ok")
	if code != 0 {
		t.Fatalf("setup: %d %s", code, out)
	}
	peak := vmHWM(t)
	t0 := time.Now()
	d, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	tDiff := time.Since(t0)
	by := map[string]api.Stat{}
	for _, st := range d.Stats {
		by[st.Path] = st
	}
	if !by["sparse.bin"].Binary || !by["random.bin"].Binary || !by["oneline.txt"].TooLarge {
		t.Errorf("stats: %+v", d.Stats)
	}
	t1 := time.Now()
	var pw sizeWriter
	must(t, e.Patch(ctx, s.ID, nil, &pw))
	tPatch := time.Since(t1)
	grew := peak()
	t.Logf("diff %v, patch %v (%d bytes), peak RSS +%d MiB\n%s", tDiff, tPatch, pw.n, grew>>20, pw.notes.String())
	for _, n := range []string{"sparse.bin", "random.bin"} {
		if !strings.Contains(pw.notes.String(), "# airlock: left out "+n) {
			t.Errorf("the patch does not name %s as left out:\n%s", n, pw.notes.String())
		}
	}
	if grew > 300<<20 {
		t.Errorf("the diff and the patch took %d MiB more memory", grew>>20)
	}
	if tDiff > time.Minute || tPatch > time.Minute {
		t.Errorf("diff %v, patch %v", tDiff, tPatch)
	}
}

// blockingWriter blocks its first write until released, as a client that
// stops reading a patch does.
type blockingWriter struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	<-w.release
	return len(b), nil
}

// Review requests honour their context: a diff waiting for the session's
// review lock gives up when its caller goes away, a cancelled diff
// releases the lock, and the session's next diff runs.
func TestReviewHonoursContext(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, s.ID, "sh", "-c", "echo hi > a.txt")
	// A patch whose reader stalls holds the lock.
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	patched := make(chan error, 1)
	go func() { patched <- e.Patch(ctx, s.ID, nil, w) }()
	<-w.started
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	t0 := time.Now()
	_, err = e.Diff(wctx, s.ID, nil)
	cancel()
	if !errdefs.IsUnavailable(err) || time.Since(t0) > 5*time.Second {
		t.Errorf("a diff waiting behind a stalled patch: %v after %v, want unavailable after 300ms", err, time.Since(t0))
	}
	close(w.release)
	must(t, <-patched)
	// A cancelled diff fails as abandoned and leaves the lock free.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Diff(cctx, s.ID, nil); err == nil || !errors.Is(err, context.Canceled) && !errdefs.IsUnavailable(err) {
		t.Errorf("a cancelled diff: %v", err)
	}
	d, err := e.Diff(ctx, s.ID, nil)
	must(t, err)
	if len(d.Files) != 1 {
		t.Errorf("diff after a cancelled one: %+v", d.Stats)
	}
}

// A client that stops reading one session's patch holds up that session
// only: another session's diff runs meanwhile, though review work shares
// a few slots engine-wide.
func TestStalledPatchStarvesNoOtherSession(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	a, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	b, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	run(t, e, a.ID, "sh", "-c", "echo a > a.txt")
	run(t, e, b.ID, "sh", "-c", "echo b > b.txt")
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	patched := make(chan error, 1)
	go func() { patched <- e.Patch(ctx, a.ID, nil, w) }()
	<-w.started
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	t0 := time.Now()
	d, err := e.Diff(dctx, b.ID, nil)
	if err != nil || len(d.Files) != 1 {
		t.Errorf("session b's diff while a's patch is stalled: %v (%v)", err, time.Since(t0))
	}
	close(w.release)
	must(t, <-patched)
}
