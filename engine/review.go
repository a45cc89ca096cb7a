package engine

import (
	"context"
	"io"

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
	return rec.ID, l, review.Layers{Upper: l.ws.Upper(), Project: rec.Project}, nil
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
	case *review.NoMatchError:
		return errdefs.Wrap(errdefs.NotFound, err)
	case *review.PathError:
		return errdefs.Wrap(errdefs.Invalid, err)
	}
	return err
}

// Diff returns the session's changes at paths (all when empty) with hunks.
func (e *Engine) Diff(ctx context.Context, id string, paths []string) (api.Diff, error) {
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return api.Diff{}, err
	}
	all, err := review.Changes(layers)
	if err != nil {
		return api.Diff{}, err
	}
	sel, err := review.Select(all, paths)
	if err != nil {
		return api.Diff{}, selectErr(err)
	}
	files, err := review.Diff(layers, sel)
	if err != nil {
		return api.Diff{}, err
	}
	return api.Diff{Session: sid, Files: files, Stats: review.Stats(files), Workspace: e.usage(l)}, nil
}

// Patch writes the session's changes at paths as a git-apply patch.
func (e *Engine) Patch(ctx context.Context, id string, paths []string, w io.Writer) error {
	_, _, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return err
	}
	all, err := review.Changes(layers)
	if err != nil {
		return err
	}
	sel, err := review.Select(all, paths)
	if err != nil {
		return selectErr(err)
	}
	return review.Patch(w, layers, sel)
}

// Accept writes the session's changes at paths (all when empty) into the
// project. This is the only operation that writes the project.
func (e *Engine) Accept(ctx context.Context, id string, paths []string) ([]review.Outcome, error) {
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	all, err := review.Changes(layers)
	if err != nil {
		return nil, err
	}
	sel, err := review.Select(all, paths)
	if err != nil {
		return nil, selectErr(err)
	}
	out, err := review.Accept(layers, sel)
	e.log.Info("accept", "session", sid, "changes", len(sel), "err", err)
	return out, err
}

// Discard drops the session's changes at paths (all when empty), through
// the session's own view of the workspace.
func (e *Engine) Discard(ctx context.Context, id string, paths []string) ([]review.Outcome, error) {
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	all, err := review.Changes(layers)
	if err != nil {
		return nil, err
	}
	sel, err := review.Select(all, paths)
	if err != nil {
		return nil, selectErr(err)
	}
	out, err := review.Discard(layers, l.ws.Merged(), sel)
	e.log.Info("discard", "session", sid, "changes", len(sel), "err", err)
	return out, err
}
