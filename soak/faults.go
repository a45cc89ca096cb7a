package soak

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
)

// awakeUppers is the upper layer's digest of each session that is not
// hibernated.
func (s *soaker) awakeUppers(ctx context.Context) map[string]string {
	l, ok := s.list(ctx)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for _, t := range s.live {
		if x, ok := l[t.id]; ok && x.State != api.StateHibernated {
			if up, err := readTree(s.upper(t.id)); err == nil {
				out[t.id] = up.digest()
			}
		}
	}
	return out
}

// killEngine kills the engine with SIGKILL and starts it again: every
// session comes back, none failed, the work in each tmpfs unchanged.
func (s *soaker) killEngine(ctx context.Context) error {
	uppers := s.awakeUppers(ctx)
	if err := s.eng.kill9(); err != nil {
		return err
	}
	s.logf("  engine killed (SIGKILL)")
	if err := s.eng.start(ctx); err != nil {
		s.violation("the engine does not start after a SIGKILL: %v", err)
		return err
	}
	s.checkAll(ctx, "after kill -9 of the engine")
	for _, t := range s.live {
		want, ok := uppers[t.id]
		if !ok {
			continue
		}
		s.fig.Checks++
		up, err := readTree(s.upper(t.id))
		if err != nil {
			s.violation("after kill -9 of the engine: read the upper layer of %s: %v", t.id, err)
		} else if up.digest() != want {
			s.violation("after kill -9 of the engine the upper layer of %s is %s, was %s", t.id, up.digest(), want)
		}
	}
	return nil
}

// reboot is a host reboot as the engine sees it: killed with SIGKILL,
// every container of the engine gone, every mount under its state
// directory gone, then started again. Every session comes back
// hibernated from its newest checkpoint, and wakes with what it held.
func (s *soaker) reboot(ctx context.Context) error {
	if err := s.eng.kill9(); err != nil {
		return err
	}
	n, err := s.eng.removeContainers(ctx)
	if err != nil {
		return err
	}
	m, err := unmountAll(s.eng.state)
	if err != nil {
		return err
	}
	s.logf("  engine killed, %d containers removed, %d mounts unmounted", n, m)
	if err := s.eng.start(ctx); err != nil {
		s.violation("the engine does not start after a reboot: %v", err)
		return err
	}
	l := s.checkAll(ctx, "after a reboot")
	if l == nil {
		return nil
	}
	for _, t := range s.live {
		x := l[t.id]
		s.fig.Checks++
		if x.State != api.StateHibernated || x.Hibernation == nil {
			s.violation("after a reboot %s is %s, not hibernated", t.id, x.State)
			continue
		}
		// The first exec after a reboot wakes it (the bare image
		// failed exactly here).
		if _, ok := s.must(ctx, "exec", t.id, "--", "true"); ok {
			s.checkUpper(t, int64(x.Hibernation.Checkpoint), "first exec after a reboot")
		}
	}
	return nil
}

// killCLI starts a streamed accept or diff and kills the CLI after a
// short delay drawn from the schedule: the project is whole or
// untouched, and the session goes on.
func (s *soaker) killCLI(ctx context.Context, t *session) {
	accept := s.rng.IntN(2) == 0
	delay := time.Duration(s.rng.IntN(400)) * time.Millisecond
	merged, d, before, ok := s.beforeClients(ctx, t)
	if !ok {
		return
	}
	args := []string{"diff", t.id, "--json"}
	if accept {
		args = []string{"accept", t.id, "--json", "--include-flagged"}
	}
	cmd, err := s.cliStart(args...)
	if err != nil {
		s.violation("start the CLI: %v", err)
		return
	}
	time.Sleep(delay)
	killGroup(cmd)
	cmd.Wait()
	s.logf("  killed after %v", delay)
	// What the engine still does for the killed client ends before the
	// next request on the session is answered.
	s.must(ctx, "diff", t.id, "--stat")
	got, err := readTree(t.project, ".git")
	if err != nil {
		s.violation("read the project: %v", err)
		return
	}
	s.wholeOrNothing(t, before, merged, got, hostChangedIn(d), "a killed accept")
	s.model[t.project] = got
	s.checkAll(ctx, "after a killed client")
}

// beforeClients wakes session t and reads what a fault among its clients
// is checked against: its workspace, its review and the project's model.
func (s *soaker) beforeClients(ctx context.Context, t *session) (merged map[string]string, d api.Diff, before map[string]string, ok bool) {
	if _, ok := s.must(ctx, "wake", t.id); !ok {
		return nil, d, nil, false
	}
	merged, err := readTree(s.merged(t.id), ".git")
	if err != nil {
		s.violation("read the workspace of %s: %v", t.id, err)
		return nil, d, nil, false
	}
	if d, ok = s.reviewOf(ctx, t); !ok {
		return nil, d, nil, false
	}
	return merged, d, s.model[t.project], true
}

// concurrent reviews, accepts and maybe removes one session from
// several clients at once: rm succeeds, the project is whole or
// untouched, nothing of a removed session is left.
func (s *soaker) concurrent(ctx context.Context, t *session) {
	withRm := s.rng.IntN(2) == 0
	merged, d, before, ok := s.beforeClients(ctx, t)
	if !ok {
		return
	}
	cmds := [][]string{{"diff", t.id, "--json"}, {"diff", t.id, "--stat"}, {"accept", t.id, "--json", "--include-flagged"}, {"diff", t.id, "--patch"}}
	if withRm {
		cmds = append(cmds, []string{"rm", "-f", t.id})
	}
	codes := make([]int, len(cmds))
	errs := make([]string, len(cmds))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, e := s.cliQuiet(ctx, c...)
			mu.Lock()
			codes[i], errs[i] = code, e
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i, c := range cmds {
		s.logf("  airlock %s -> %d %s", quoteArgs(c), codes[i], names.Quote(trim(firstLine(errs[i]), 200)))
	}
	got, err := readTree(t.project, ".git")
	if err != nil {
		s.violation("read the project: %v", err)
		return
	}
	s.wholeOrNothing(t, before, merged, got, hostChangedIn(d), "an accept beside other clients")
	s.model[t.project] = got
	if withRm {
		s.drop(t)
		s.gone = append(s.gone, t.id)
		if codes[len(codes)-1] != 0 {
			s.violation("rm %s beside other clients exited %d: %s", t.id, codes[len(codes)-1], names.Quote(trim(errs[len(errs)-1], 600)))
			s.must(ctx, "rm", "-f", t.id)
		}
		s.checkGone(ctx, t.id)
	}
	s.checkAll(ctx, fmt.Sprintf("after %d clients at once", len(cmds)))
}
