package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
	"github.com/airlock/airlock/secretscan"
)

// reviewable returns the session's layers, for sessions whose workspace is
// mounted. Reading a diff never needs the container.
func (e *Engine) reviewable(ctx context.Context, id string) (string, *live, review.Layers, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return "", nil, review.Layers{}, err
	}
	l := e.liveSession(rec.ID)
	if l == nil && rec.State == api.StateHibernated {
		// Read from its checkpoint: looking does not wake it.
		if l, err = e.peek(ctx, rec); err != nil {
			return "", nil, review.Layers{}, err
		}
	}
	if l == nil {
		return "", nil, review.Layers{}, errdefs.Conflictf("session %s has no workspace: %s", rec.ID, orNone(rec.Error))
	}
	e.touch(rec.ID) // someone is looking: not idle (a paused session stays paused)
	layers := review.Layers{Upper: l.ws.Upper(), Project: rec.Project, Base: l.base, Cache: l.cache,
		Ignoring: ignoringFor(rec.Project, l.ws.Upper())}
	if err := l.base.Ready(); err != nil {
		// Without its base a session still reviews, against the current
		// project only; say so in the log rather than refuse.
		e.log.Warn("the session's base is unavailable: no conflict detection", "session", rec.ID, "err", err)
		layers.Base = nil
	}
	return rec.ID, l, layers, nil
}

func (e *Engine) usage(l *live) api.Workspace {
	u, err := l.ws.Usage()
	if err != nil {
		return api.Workspace{}
	}
	return api.Workspace{Used: u.Used, Size: u.Size, Full: u.Full, Files: u.Files}
}

func selectErr(err error) error {
	switch err.(type) {
	case *review.NoMatchError, *review.NotFoundError:
		return errdefs.Wrap(errdefs.NotFound, err)
	case nil:
		return nil
	case *review.PathError:
		return errdefs.Wrap(errdefs.Invalid, err)
	}
	return err
}

// Diff returns the session's changes at paths (all when empty) with hunks
// and conflicts. It gives up when ctx ends (the client went away).
func (e *Engine) Diff(ctx context.Context, id string, paths []string) (api.Diff, error) {
	var files []api.FileDiff
	d, err := e.DiffEach(ctx, id, api.DiffQuery{Paths: paths}, func(f api.FileDiff) error {
		files = append(files, f)
		return nil
	})
	if err != nil {
		return api.Diff{}, err
	}
	d.Files, d.Stats = files, api.Stats(files)
	return d, nil
}

// DiffEach is Diff handing the files to each in path order instead of
// returning them, so that the engine never holds a large session's whole
// diff: the api.Diff it returns has everything but Files and Stats. The
// review slot is given back while each runs (a slow client holds up its
// own session only). Nothing reaches each before the review can fail
// cleanly; a failure after that is returned after some files were handed
// on, and the caller must say the diff is incomplete.
//
// Each file is converted to the wire's type as it is handed on (a
// summary is DiffStatLines). q.Ignored says what becomes of the changes
// ignore rules cover (summarised in the api.Diff by default).
func (e *Engine) DiffEach(ctx context.Context, id string, q api.DiffQuery, each func(api.FileDiff) error) (api.Diff, error) {
	mode, err := ignoredMode(q.Ignored)
	if err != nil {
		return api.Diff{}, err
	}
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return api.Diff{}, err
	}
	h, err := e.heavy(ctx, sid, l)
	if err != nil {
		return api.Diff{}, err
	}
	defer h.done()
	n := 0
	var ignored review.IgnoredSummary
	opts := review.Options{Hunks: true, Paths: q.Paths, Ignored: mode, OnIgnored: func(s review.IgnoredSummary) { ignored = s },
		ScanIgnored: e.scanner}
	err = e.reviewEach(ctx, sid, layers, opts, func(batch []review.FileDiff) error {
		return h.without(ctx, func() error {
			for _, f := range batch {
				if err := each(wireFileDiff(f)); err != nil {
					return err
				}
			}
			n += len(batch)
			return nil
		})
	})
	if err != nil {
		return api.Diff{}, selectErr(err)
	}
	commits, err := review.Commits(layers.Project, l.ws.Merged())
	if err != nil {
		e.log.Warn("read the session's commits", "session", sid, "err", err)
	}
	e.log.Debug("diff", "session", sid, "files", n, "ignored", ignored.Project.Paths, "session_ignored", ignored.Session.Paths)
	return api.Diff{Session: sid, Workspace: e.usage(l), Commits: wireCommits(commits),
		Ignored: wireIgnored(ignored.Project), SessionIgnored: wireIgnored(ignored.Session)}, nil
}

// Patch writes the session's changes at paths as a git-apply patch,
// streamed file by file; files over the review limits are named in a
// comment instead. Nothing is written to w before the review is done, so a
// failure to start is an error with nothing written; a failure after the
// first byte leaves the patch incomplete (the caller must say so).
func (e *Engine) Patch(ctx context.Context, id string, paths []string, w io.Writer) error {
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return err
	}
	h, err := e.heavy(ctx, sid, l)
	if err != nil {
		return err
	}
	defer h.done()
	// The patch reads each file again as it writes it: the review needs
	// no hunks. It is written a batch of files at a time, and the review
	// slot is given back while the client is written to: a slow reader
	// holds up its own session, never the others'.
	out := &slotWriter{ctx: ctx, w: w, h: h}
	opts := review.PatchOptions{Limits: e.reviewLimits(), Session: sid}
	changes := make([]review.Change, 0, 256)
	err = e.reviewEach(ctx, sid, layers, review.Options{Paths: paths}, func(batch []review.FileDiff) error {
		changes = changes[:0]
		for _, f := range batch {
			changes = append(changes, f.Change)
		}
		err := review.PatchContext(ctx, out, layers, changes, opts)
		clear(changes)
		return err
	})
	return selectErr(err)
}

// without runs f with the request's review slot given back, and takes a
// slot again after it.
func (h *hold) without(ctx context.Context, f func() error) error {
	if !h.slot {
		return ctx.Err()
	}
	h.e.reviewers.Release()
	h.slot = false
	err := f()
	if aerr := h.e.reviewers.Acquire(ctx); aerr != nil {
		if err == nil {
			err = aerr
		}
		return err
	}
	h.slot = true
	return err
}

// slotWriter gives its request's review slot back around each write.
type slotWriter struct {
	ctx context.Context
	w   io.Writer
	h   *hold
}

func (s *slotWriter) Write(b []byte) (n int, err error) {
	err = s.h.without(s.ctx, func() error {
		var werr error
		n, werr = s.w.Write(b)
		return werr
	})
	return n, err
}

// Accept writes the selected changes into the project, all or nothing, and
// imports the session's commits as a branch when asked. This is the only
// operation that writes the project.
func (e *Engine) Accept(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error) {
	outcomes := []api.Outcome{}
	res, err := e.AcceptEach(ctx, id, sel, func(o api.Outcome) error {
		outcomes = append(outcomes, o)
		return nil
	})
	res.Outcomes = outcomes
	return res, err
}

// AcceptEach is Accept handing the outcomes to each, in path order, once
// the changes are written, instead of returning them: the engine never
// holds an outcome per file (see review.AcceptEach). The api.Outcomes it
// returns has everything but Outcomes. An error before each was called
// means nothing was written.
func (e *Engine) AcceptEach(ctx context.Context, id string, wsel api.Selection, each func(api.Outcome) error) (api.Outcomes, error) {
	sel := reviewSelection(wsel)
	if err := e.awake(ctx, id); err != nil { // accepting changes the workspace
		return api.Outcomes{}, err
	}
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return api.Outcomes{}, err
	}
	defer l.sums.invalidate()  // the base and the project move
	defer e.store.Changed(sid) // its count of changes
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return api.Outcomes{}, errGone(sid)
	}
	var res api.Outcomes
	if sel.Commits {
		res.Branch = sel.Branch
		if res.Branch == "" {
			res.Branch = "airlock/" + sid
		}
		commits, err := review.ImportCommits(layers.Project, l.ws.Merged(), res.Branch)
		if err != nil {
			return res, selectErr(err)
		}
		res.Commits = wireCommits(commits)
		e.log.Info("imported commits", "session", sid, "branch", res.Branch, "commits", len(res.Commits))
		if len(sel.Paths) == 0 && len(sel.RawPaths) == 0 && len(sel.Hunks) == 0 && len(sel.Digests) == 0 && !sel.Auto {
			return res, nil
		}
	}
	ignored, err := e.acceptFiles(ctx, sid, layers, sel, func(o review.Outcome) error { return each(wireOutcome(o)) })
	res.Ignored, res.SessionIgnored = wireIgnored(ignored.Project), wireIgnored(ignored.Session)
	return res, err
}

// acceptFiles accepts sel's files, and says what ignore rules covered
// that the selection left.
func (e *Engine) acceptFiles(ctx context.Context, sid string, layers review.Layers, sel review.Selection, each func(review.Outcome) error) (review.IgnoredSummary, error) {
	ctx = context.WithoutCancel(ctx) // an accept, once started, finishes
	// Whole files named one by one need no hunks; anything that may take
	// a file the selection does not name (everything, a directory, --auto)
	// needs the policy and the scanners, whose secrets scanner reads hunks.
	// The review hands its files on a batch at a time and the accept
	// plans and stages each batch as it comes.
	var ignored review.IgnoredSummary
	opts := ignoredOptions(sel, review.Options{OnIgnored: func(s review.IgnoredSummary) { ignored = s }})
	reviewed := func(batch func([]review.FileDiff) error) error {
		return review.ReviewEach(ctx, layers, opts, batch)
	}
	if len(sel.Hunks) > 0 || len(sel.Lines) > 0 || sel.Patch != "" || sel.Auto || !sel.IncludeFlagged {
		opts.Hunks = true
		reviewed = func(batch func([]review.FileDiff) error) error {
			return e.reviewEach(ctx, sid, layers, opts, batch)
		}
	}
	t0 := time.Now()
	n := 0
	err := review.AcceptEach(layers, sel, e.journalPath(sid), reviewed, func(o review.Outcome) error {
		n++
		return each(o)
	})
	e.log.Info("accept", "session", sid, "selected", n, "err", err, "took", time.Since(t0))
	var changed *review.ChangedError
	if errors.As(err, &changed) {
		return ignored, errdefs.Wrap(errdefs.Conflict, err)
	}
	return ignored, selectErr(err)
}

// Discard drops the selected changes from the session, through the
// session's own view of the workspace. It stops between files when ctx
// ends; what was discarded by then is reported.
func (e *Engine) Discard(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error) {
	out, ignored, err := e.discard(ctx, id, reviewSelection(sel))
	return api.Outcomes{Outcomes: wireOutcomes(out), Ignored: wireIgnored(ignored.Project), SessionIgnored: wireIgnored(ignored.Session)}, err
}

func (e *Engine) discard(ctx context.Context, id string, sel review.Selection) ([]review.Outcome, review.IgnoredSummary, error) {
	var ignored review.IgnoredSummary
	if err := e.awake(ctx, id); err != nil {
		return nil, ignored, err
	}
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return nil, ignored, err
	}
	defer e.store.Changed(sid) // its count of changes
	defer l.sums.invalidate()
	h, err := e.heavy(ctx, sid, l)
	if err != nil {
		return nil, ignored, err
	}
	defer h.done()
	opts := ignoredOptions(sel, review.Options{Hunks: true, OnIgnored: func(s review.IgnoredSummary) { ignored = s }})
	all, err := e.reviewWith(ctx, sid, layers, opts)
	if err != nil {
		return nil, ignored, err
	}
	out, err := review.DiscardContext(ctx, layers, l.ws.Merged(), all, sel)
	e.log.Info("discard", "session", sid, "selected", len(out), "err", err)
	return out, ignored, selectErr(e.reviewErr(sid, err))
}

// reviewWith is review with options, under the engine's review limits and
// its shared workers, abandoned when ctx ends.
func (e *Engine) reviewWith(ctx context.Context, sid string, layers review.Layers, opts review.Options) ([]review.FileDiff, error) {
	var all []review.FileDiff
	opts.Sized = func(n int) { all = make([]review.FileDiff, 0, n) }
	err := e.reviewEach(ctx, sid, layers, opts, func(batch []review.FileDiff) error {
		all = append(all, batch...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// scanName is the secret scanner's binary beside the engine's
// (cmd/airlock-scan, built into bin/ with it): reviews look for secrets
// through it (Options.Secrets).
const scanName = "airlock-scan"

// reviewEach is reviewWith handing the files on a batch at a time (see
// review.ReviewEach), each batch checked against the accept policy. A
// batch's check (its round trip to the secret scanner, which scans in
// its own process) runs while the next batch is reviewed: each gets a
// batch once it is checked and the next one is reviewed, or the review
// ended. each runs on the caller's goroutine, batches in path order.
func (e *Engine) reviewEach(ctx context.Context, sid string, layers review.Layers, opts review.Options, each func([]review.FileDiff) error) error {
	t0 := time.Now()
	file, optional := filepath.Join(layers.Project, review.PolicyFile), true
	if e.policy != "" {
		file, optional = e.policy, false
	}
	pol, err := review.LoadPolicy(file, optional)
	if err != nil {
		return errdefs.Wrap(errdefs.Invalid, err)
	}
	opts.Limits, opts.Workers = e.reviewLimits(), e.reviewers
	if !pol.ScansSecrets() {
		opts.ScanIgnored = nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	handOn := func(c *checkedBatch) error {
		<-c.done
		if c.err != nil {
			return c.err
		}
		n += len(c.files)
		return each(c.files)
	}
	var checking *checkedBatch
	err = review.ReviewEach(ctx, layers, opts, func(batch []review.FileDiff) error {
		prev := checking
		// A copy: ReviewEach reuses batch's array once this returns.
		checking = checkBatch(ctx, pol, layers, slices.Clone(batch), e.scanner)
		if prev == nil {
			return nil
		}
		return handOn(prev)
	})
	if checking != nil {
		if err == nil {
			err = handOn(checking)
		}
		cancel()
		<-checking.done
	}
	e.log.Debug("review", "session", sid, "files", n, "took", time.Since(t0))
	return e.reviewErr(sid, err)
}

// checkedBatch is a batch being checked against the policy: done is
// closed when it is.
type checkedBatch struct {
	files []review.FileDiff
	err   error
	done  chan struct{}
}

// checkBatch checks files against pol on a goroutine of its own. A panic
// in the check fails the review (as a bug) rather than the engine.
func checkBatch(ctx context.Context, pol review.Policy, layers review.Layers, files []review.FileDiff, find secretscan.Finder) *checkedBatch {
	c := &checkedBatch{files: files, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer func() {
			if v := recover(); v != nil {
				c.err = &review.PanicError{What: "the policy's check of a batch of files", Value: v, Stack: debug.Stack()}
			}
		}()
		c.err = pol.Check(ctx, layers, c.files, find)
	}()
	return c
}

// reviewLimits are the review limits of the engine's settings.
func (e *Engine) reviewLimits() review.Limits {
	r := e.defs().Review
	return review.Limits{MaxText: r.MaxText, MaxLine: r.MaxLine, MaxTotalText: r.MaxTotalText}
}

// reviewErr classes a review's failure: a panic (a bug) is logged with its
// stack and reported as an internal error of this request only; a request
// abandoned by its client is unavailable.
func (e *Engine) reviewErr(sid string, err error) error {
	var pe *review.PanicError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		e.log.Error("review panicked", "session", sid, "what", pe.What, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		return errdefs.New(errdefs.Internal, "%w", err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return errdefs.Unavailablef("the review of session %s was abandoned: %w", sid, err)
	}
	return err
}

// reviewSlots is how many goroutines may do review work at once, across
// all sessions: half the cores (at least one), so that however many
// sessions are reviewed, and whatever they hold, the engine's other work
// (and the sessions themselves) keep the other half.
func reviewSlots() int { return max(1, runtime.NumCPU()/2) }

// heavy waits for the session's review lock and a review slot, or for ctx
// to end. One session's diffs, patches and discards run one at a time (an
// accept takes the same lock); the slot bounds all sessions' review work
// together. The hold's done releases both.
func (e *Engine) heavy(ctx context.Context, sid string, l *live) (*hold, error) {
	if err := lockCtx(ctx, &l.mu); err != nil {
		return nil, errdefs.Unavailablef("another review of session %s is running and the request ended first: %v", sid, err)
	}
	if l.gone {
		l.mu.Unlock()
		return nil, errGone(sid)
	}
	if err := e.reviewers.Acquire(ctx); err != nil {
		l.mu.Unlock()
		return nil, errdefs.Unavailablef("the engine is busy reviewing other sessions and the request ended first: %v", err)
	}
	return &hold{e: e, l: l, slot: true}, nil
}

// hold is a request's session lock and, while slot is set, review slot.
type hold struct {
	e    *Engine
	l    *live
	slot bool
}

func (h *hold) done() {
	if h.slot {
		h.e.reviewers.Release()
	}
	h.l.mu.Unlock()
}

// lockCtx locks mu, or gives up when ctx ends first. A lock given up on is
// released by its waiting goroutine as soon as it gets it.
func lockCtx(ctx context.Context, mu *sync.Mutex) error {
	if mu.TryLock() {
		return nil
	}
	got := make(chan struct{})
	abandoned := make(chan struct{})
	go func() {
		mu.Lock()
		select {
		case got <- struct{}{}:
		case <-abandoned:
			mu.Unlock()
		}
	}()
	select {
	case <-got:
		return nil
	case <-ctx.Done():
		close(abandoned)
		return ctx.Err()
	}
}

func (e *Engine) journalPath(id string) string {
	return filepath.Join(e.sessionDir(id), "accept.journal")
}
