package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
)

// create makes a session over a new project, on one of the images.
func (s *soaker) create(ctx context.Context) error {
	img := s.images[s.rng.IntN(len(s.images))]
	p, err := s.newProject(ctx)
	if err != nil {
		return err
	}
	code, _, errs := s.cli(ctx, "run", "--project", p, "--image", img, "--", "sh", "-c", "echo start > start.txt")
	m := sessionLine.FindStringSubmatch(errs)
	if code != 0 || m == nil {
		s.violation("run on %s exited %d: %s", img, code, trim(strings.TrimSpace(errs), 600))
		return nil
	}
	t := s.addSession(m[1], p, img)
	t.files = append(t.files, "start.txt")
	s.noteCheckpoint(ctx, t)
	return nil
}

// script is a command of writes, deletes and renames in /workspace, and
// writes outside it (the container layer), drawn from the schedule.
func (s *soaker) script(t *session) string {
	var cmds []string
	for range 1 + s.rng.IntN(4) {
		t.n++
		switch s.rng.IntN(6) {
		case 0, 1: // a new file, maybe in new directories
			name := fmt.Sprintf("%d-%s", t.n, hostile[s.rng.IntN(len(hostile))])
			if i := strings.LastIndexByte(name, '/'); i >= 0 {
				cmds = append(cmds, "mkdir -p -- "+sq(name[:i]))
			}
			cmds = append(cmds, fmt.Sprintf("printf '%%s\\n' %s > %s", sq(fmt.Sprintf("content %d of %s", t.n, t.id)), sq(name)))
			t.files = append(t.files, name)
		case 2: // a line of the shared text file changed
			cmds = append(cmds, fmt.Sprintf("sed -i '%ds/.*/changed %d/' lines.txt", 1+s.rng.IntN(20), t.n))
		case 3: // a delete
			victims := append([]string{"README.md", "src/app.py"}, t.files...)
			cmds = append(cmds, "rm -f -- "+sq(victims[s.rng.IntN(len(victims))]))
		case 4: // a rename
			if len(t.files) > 0 {
				from := t.files[s.rng.IntN(len(t.files))]
				to := fmt.Sprintf("%d-renamed.txt", t.n)
				cmds = append(cmds, fmt.Sprintf("{ [ ! -e %s ] || mv -- %s %s; }", sq(from), sq(from), sq(to)))
				t.files = append(t.files, to)
			}
		case 5: // outside the workspace: the container layer
			cmds = append(cmds, fmt.Sprintf("mkdir -p /opt/soak && echo %d >> /opt/soak/state", t.n))
		}
	}
	return strings.Join(cmds, " && ")
}

func (s *soaker) exec(ctx context.Context, t *session) {
	if _, ok := s.must(ctx, "exec", t.id, "--", "sh", "-c", s.script(t)); ok {
		s.noteCheckpoint(ctx, t)
	}
}

func (s *soaker) turns(ctx context.Context, t *session) { s.newestCheckpoint(ctx, t) }

func (s *soaker) diff(ctx context.Context, t *session) {
	for _, f := range [][]string{{"--stat"}, {"--json"}, {"--patch"}} {
		s.must(ctx, append([]string{"diff", t.id}, f...)...)
	}
	s.checkProject(t, "diff")
}

// undo goes back to one of the session's checkpoints (its commands are
// no agent turns, so by checkpoint).
func (s *soaker) undo(ctx context.Context, t *session) {
	n, ok := s.newestCheckpoint(ctx, t)
	if !ok || n == 0 {
		return
	}
	cp := 1 + s.rng.Int64N(n)
	// Undo puts back only a running session's workspace (a hibernated
	// one refuses, exit 75): wake it first, as a user would.
	if _, ok := s.must(ctx, "wake", t.id); !ok {
		return
	}
	if _, ok := s.must(ctx, "undo", t.id, "--checkpoint", strconv.FormatInt(cp, 10)); ok {
		s.noteCheckpoint(ctx, t)
	}
	s.checkProject(t, "undo")
}

func (s *soaker) discard(ctx context.Context, t *session) {
	s.must(ctx, "discard", t.id)
	s.checkProject(t, "discard")
}

// reviewOf is the session's diff as JSON.
func (s *soaker) reviewOf(ctx context.Context, t *session) (api.Diff, bool) {
	var d api.Diff
	out, ok := s.must(ctx, "diff", t.id, "--json")
	if !ok {
		return d, false
	}
	if err := decodeJSON([]byte(out), &d); err != nil {
		s.violation("diff --json of %s: %v", t.id, err)
		return d, false
	}
	sort.Slice(d.Files, func(i, j int) bool { return d.Files[i].Path < d.Files[j].Path })
	return d, true
}

// accept accepts everything, one file or one hunk, and checks that the
// project changed exactly by it: all or nothing.
func (s *soaker) accept(ctx context.Context, t *session, kind string) {
	d, ok := s.reviewOf(ctx, t)
	if !ok {
		return
	}
	args := []string{"accept", t.id, "--json"}
	var only string // the path accepted alone
	switch kind {
	case "accept-file":
		if len(d.Files) == 0 {
			s.logf("  nothing to accept")
			return
		}
		f := d.Files[s.rng.IntN(len(d.Files))]
		args, only = append(args, "--hunk", f.ID), f.Path
	case "accept-hunk":
		var hunks [][2]string
		for _, f := range d.Files {
			for _, h := range f.Hunks {
				hunks = append(hunks, [2]string{h.ID, f.Path})
			}
		}
		if len(hunks) == 0 {
			s.logf("  no hunk to accept")
			return
		}
		h := hunks[s.rng.IntN(len(hunks))]
		args, only = append(args, "--hunk", h[0]), h[1]
	}
	if kind == "accept-all" && s.rng.IntN(2) == 0 {
		args = append(args, "--include-flagged") // names a terminal would misread
	}
	before := s.model[t.project]
	// An accept that leaves changes in the session (flagged names, held
	// by a policy, conflicts) exits 1 with its outcomes.
	code, out, errs := s.cli(ctx, args...)
	var res api.Outcomes
	jerr := json.Unmarshal([]byte(out), &res)
	ok = code == 0 || (code == 1 && jerr == nil)
	merged, err := readTree(s.merged(t.id), ".git")
	if err != nil {
		s.violation("read the workspace of %s: %v", t.id, err)
		return
	}
	got, err := readTree(t.project, ".git")
	if err != nil {
		s.violation("read the project: %v", err)
		return
	}
	s.fig.Checks++
	defer func() { s.model[t.project] = got }()
	if !ok {
		s.violation("airlock %s exited %d (%v in %s): %s", quoteArgs(args), code, jerr, names.Quote(trim(out, 300)), names.Quote(trim(strings.TrimSpace(errs), 600)))
		s.wholeOrNothing(t, before, merged, got, hostChangedIn(d), "a failed accept")
		return
	}
	if err := decodeJSON([]byte(out), &res); err != nil {
		s.violation("accept --json: %v", err)
		return
	}
	// A rename's outcome names the new path; the old one goes with it.
	from := map[string]string{}
	for _, f := range d.Files {
		if f.From != "" {
			from[f.Path] = f.From
		}
	}
	hostChanged := hostChangedIn(d)
	want := before
	take := func(p string) {
		if hostChanged[p] {
			want = want.withPath(got, p)
		} else {
			want = want.withPath(merged, p)
		}
		if f, ok := from[p]; ok {
			want = want.withPath(merged, f)
		}
	}
	switch kind {
	case "accept-all":
		for _, o := range res.Outcomes {
			if o.Applied {
				take(o.Path)
			}
		}
	case "accept-file":
		for _, o := range res.Outcomes {
			if o.Applied && o.Path == only {
				take(only)
			}
		}
	case "accept-hunk":
		for _, p := range changedPaths(before, got) {
			if p != only && p != from[only] && !strings.HasPrefix(only, p+"/") { // with the directories it needs
				s.violation("accept of a hunk of %s changed %s too", names.Quote(only), names.Quote(p))
			}
		}
		return
	}
	if diff := got.differences(want); len(diff) > 0 {
		s.violation("%s of %s: the project is not what was accepted: %s", kind, t.id, strings.Join(diff, "; "))
	}
}

// wholeOrNothing checks a project after an accept that may or may not
// have happened (it failed, or its client was killed): each path it
// changed holds the session's version whole, never a torn or stray one.
// (Which paths an accept of everything takes depends on conflicts with
// other sessions on the same project, so "all" is not checked here.)
func (s *soaker) wholeOrNothing(t *session, before, merged, got tree, hostChanged map[string]bool, why string) {
	s.fig.Checks++
	var torn []string
	for _, p := range changedPaths(before, got) {
		if got[p] != merged[p] && !hostChanged[p] {
			torn = append(torn, fmt.Sprintf("%s: has %q, the session %q, before %q", names.Quote(p), got[p], merged[p], before[p]))
		}
	}
	if len(torn) > 0 {
		s.violation("%s on %s left the project neither as it was nor as the session has it: %s", why, t.id, strings.Join(torn[:min(len(torn), 6)], "; "))
	}
}

// hostChangedIn lists the files the host changed too (a session forked
// from this one accepted into the same project): their accept writes a
// merge, which the model takes as it is.
func hostChangedIn(d api.Diff) map[string]bool {
	m := map[string]bool{}
	for _, f := range d.Files {
		m[f.Path] = f.HostChanged || f.Merged || f.Conflict
	}
	return m
}

func (s *soaker) snapshotRestore(ctx context.Context, t *session) {
	// A hibernated session refuses a snapshot (exit 75): wake it first.
	if _, ok := s.must(ctx, "wake", t.id); !ok {
		return
	}
	out, ok := s.must(ctx, "snapshot", t.id, "--json")
	if !ok {
		return
	}
	var snap api.Snapshot
	if err := decodeJSON([]byte(out), &snap); err != nil {
		s.violation("snapshot --json: %v", err)
		return
	}
	p, err := s.copyProject(ctx, t.project)
	if err != nil {
		s.violation("copy the project: %v", err)
		return
	}
	s.adopt(ctx, t, p, "restore", snap.ID, "--project", p, "--json")
}

func (s *soaker) forkCheckpoint(ctx context.Context, t *session) {
	n, ok := s.newestCheckpoint(ctx, t)
	if !ok || n == 0 {
		return
	}
	cp := n - int64(s.rng.IntN(int(n)))
	// A fork from a checkpoint keeps the session's project: the two
	// share it, and the model follows both.
	s.adopt(ctx, t, t.project, "fork", t.id, "--checkpoint", strconv.FormatInt(cp, 10), "-n", "1", "--json")
}

// adopt runs a restore or fork and takes its sessions into the soak.
func (s *soaker) adopt(ctx context.Context, from *session, project string, args ...string) {
	out, ok := s.must(ctx, args...)
	if !ok {
		return
	}
	var r api.Restored
	if err := decodeJSON([]byte(out), &r); err != nil {
		s.violation("%s --json: %v", args[0], err)
		return
	}
	for _, x := range r.Sessions {
		t := s.addSession(x.ID, project, from.image)
		t.files = append([]string(nil), from.files...)
		s.logf("  new session %s", x.ID)
	}
}

func (s *soaker) hibernate(ctx context.Context, t *session) {
	up, err := readTree(s.upper(t.id))
	if _, ok := s.must(ctx, "hibernate", t.id); !ok {
		return
	}
	l, ok := s.list(ctx)
	if !ok {
		return
	}
	x := l[t.id]
	s.fig.Checks++
	if x.State != api.StateHibernated || x.Hibernation == nil {
		s.violation("after hibernate %s is %s", t.id, x.State)
		return
	}
	if err == nil && x.Hibernation.Checkpoint != 0 {
		t.cps[int64(x.Hibernation.Checkpoint)] = up.digest()
		s.logf("  hibernated from checkpoint %d: upper %s", x.Hibernation.Checkpoint, up.digest())
	}
}

// wake wakes a session and checks its upper layer is its checkpoint's.
func (s *soaker) wake(ctx context.Context, t *session) {
	l, ok := s.list(ctx)
	if !ok {
		return
	}
	x := l[t.id]
	if _, ok := s.must(ctx, "wake", t.id); !ok {
		return
	}
	if x.State == api.StateHibernated && x.Hibernation != nil {
		s.checkUpper(t, int64(x.Hibernation.Checkpoint), "wake")
	}
}

// checkUpper compares a woken session's upper layer with what it held
// when checkpoint cp was taken.
func (s *soaker) checkUpper(t *session, cp int64, why string) {
	want, known := t.cps[cp]
	if !known {
		s.fig.Unverified++
		return
	}
	s.fig.Checks++
	up, err := readTree(s.upper(t.id))
	if err != nil {
		s.violation("%s: read the upper layer of %s: %v", why, t.id, err)
		return
	}
	if up.digest() != want {
		s.violation("%s: %s woke from checkpoint %d with upper layer %s, not %s", why, t.id, cp, up.digest(), want)
	}
}

func (s *soaker) remove(ctx context.Context, t *session) {
	s.drop(t)
	s.gone = append(s.gone, t.id)
	if _, ok := s.must(ctx, "rm", "-f", t.id); !ok {
		return
	}
	s.checkGone(ctx, t.id)
	s.checkProject(t, "rm")
}

// cliStart starts the CLI without waiting for it.
func (s *soaker) cliStart(args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(s.eng.cli, args...)
	cmd.Env = s.eng.env
	s.logf("  start airlock %s", quoteArgs(args))
	return cmd, cmd.Start()
}
