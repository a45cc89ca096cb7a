package engine

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
)

// reviewable returns the session's layers, for sessions whose workspace is
// mounted. Reading a diff never needs the container.
func (e *Engine) reviewable(ctx context.Context, id string) (string, *live, review.Layers, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return "", nil, review.Layers{}, err
	}
	l := e.liveSession(rec.ID)
	if l == nil {
		return "", nil, review.Layers{}, errdefs.Conflictf("session %s has no workspace: %s", rec.ID, orNone(rec.Error))
	}
	e.touch(rec.ID) // someone is looking: not idle (a paused session stays paused)
	layers := review.Layers{Upper: l.ws.Upper(), Project: rec.Project, Base: l.base, Cache: l.cache}
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
// and conflicts.
func (e *Engine) Diff(ctx context.Context, id string, paths []string) (api.Diff, error) {
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return api.Diff{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t0 := time.Now()
	all, err := e.review(layers)
	if err != nil {
		return api.Diff{}, err
	}
	files, err := review.SelectFiles(all, paths)
	if err != nil {
		return api.Diff{}, selectErr(err)
	}
	t1 := time.Now()
	commits, err := review.Commits(layers.Project, l.ws.Merged())
	e.log.Debug("diff", "session", sid, "files", len(files), "review", t1.Sub(t0), "commits", time.Since(t1))
	if err != nil {
		e.log.Warn("read the session's commits", "session", sid, "err", err)
	}
	return api.Diff{Session: sid, Files: files, Stats: review.Stats(files), Workspace: e.usage(l), Commits: commits}, nil
}

// Patch writes the session's changes at paths as a git-apply patch.
func (e *Engine) Patch(ctx context.Context, id string, paths []string, w io.Writer) error {
	_, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	all, err := review.Review(layers)
	if err != nil {
		return err
	}
	files, err := review.SelectFiles(all, paths)
	if err != nil {
		return selectErr(err)
	}
	changes := make([]review.Change, len(files))
	for i, f := range files {
		changes[i] = f.Change
	}
	return review.Patch(w, layers, changes)
}

// Accept writes the selected changes into the project, all or nothing, and
// imports the session's commits as a branch when asked. This is the only
// operation that writes the project.
func (e *Engine) Accept(ctx context.Context, id string, sel review.Selection) (api.Outcomes, error) {
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return api.Outcomes{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var res api.Outcomes
	if sel.Commits {
		res.Branch = sel.Branch
		if res.Branch == "" {
			res.Branch = "airlock/" + sid
		}
		if res.Commits, err = review.ImportCommits(layers.Project, l.ws.Merged(), res.Branch); err != nil {
			return res, selectErr(err)
		}
		e.log.Info("imported commits", "session", sid, "branch", res.Branch, "commits", len(res.Commits))
		if len(sel.Paths) == 0 && len(sel.RawPaths) == 0 && len(sel.Hunks) == 0 && len(sel.Digests) == 0 && !sel.Auto {
			res.Outcomes = []review.Outcome{}
			return res, nil
		}
	}
	res.Outcomes, err = e.acceptFiles(sid, layers, sel)
	return res, err
}

func (e *Engine) acceptFiles(sid string, layers review.Layers, sel review.Selection) ([]review.Outcome, error) {
	// Whole files named one by one need no hunks; anything that may take
	// a file the selection does not name (everything, a directory, --auto)
	// needs the policy and the scanners, whose secrets scanner reads hunks.
	var all []review.FileDiff
	var err error
	t0 := time.Now()
	if len(sel.Hunks) > 0 || len(sel.Lines) > 0 || sel.Patch != "" || sel.Auto || !sel.IncludeFlagged {
		all, err = e.review(layers)
	} else {
		all, err = review.ReviewWith(layers, review.Options{})
	}
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	out, err := review.Accept(layers, all, sel, e.journalPath(sid))
	e.log.Info("accept", "session", sid, "selected", len(out), "err", err, "review", t1.Sub(t0), "write", time.Since(t1))
	var changed *review.ChangedError
	if errors.As(err, &changed) {
		return nil, errdefs.Wrap(errdefs.Conflict, err)
	}
	return out, selectErr(err)
}

// Discard drops the selected changes from the session, through the
// session's own view of the workspace.
func (e *Engine) Discard(ctx context.Context, id string, sel review.Selection) (api.Outcomes, error) {
	out, err := e.discard(ctx, id, sel)
	return api.Outcomes{Outcomes: out}, err
}

func (e *Engine) discard(ctx context.Context, id string, sel review.Selection) ([]review.Outcome, error) {
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	all, err := review.Review(layers)
	if err != nil {
		return nil, err
	}
	out, err := review.Discard(layers, l.ws.Merged(), all, sel)
	e.log.Info("discard", "session", sid, "selected", len(out), "err", err)
	return out, selectErr(err)
}

// review lists the session's changes and applies the project's accept
// policy, read from the host's copy of the project (never the session's).
func (e *Engine) review(layers review.Layers) ([]review.FileDiff, error) {
	t0 := time.Now()
	all, err := review.Review(layers)
	if err != nil {
		return nil, err
	}
	defer func() { e.log.Debug("review", "files", len(all), "changes+hunks", time.Since(t0)) }()
	file, optional := filepath.Join(layers.Project, review.PolicyFile), true
	if e.policy != "" {
		file, optional = e.policy, false
	}
	pol, err := review.LoadPolicy(file, optional)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.Invalid, err)
	}
	if err := pol.Check(layers, all); err != nil {
		return nil, err
	}
	return all, nil
}

func (e *Engine) journalPath(id string) string {
	return filepath.Join(e.sessionDir(id), "accept.journal")
}
