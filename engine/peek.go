package engine

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
)

// peeks are hibernated sessions' workspaces restored for reading, by
// session id.
type peeks struct {
	mu sync.Mutex
	m  map[string]*live
}

func peekDir(sessionDir string) string { return filepath.Join(sessionDir, "peek") }

// peek is a hibernated session's workspace for reading: its newest
// checkpoint restored into a directory on disk (a disk workspace's own
// upper directory), kept until the session wakes or is removed.
func (e *Engine) peek(ctx context.Context, rec store.Session) (*live, error) {
	e.peeks.mu.Lock()
	defer e.peeks.mu.Unlock()
	if l := e.peeks.m[rec.ID]; l != nil {
		return l, nil
	}
	ws := &overlay.Workspace{Dir: rec.Dir, Lower: rec.Project, Disk: true}
	if rec.Workspace != api.WorkspaceDisk {
		cs, err := e.checkpoints(rec.ID)
		if err != nil {
			return nil, err
		}
		last, err := cs.Latest()
		if err != nil {
			return nil, err
		}
		if last == nil {
			return nil, errdefs.Conflictf("session %s has no checkpoint: its workspace is lost", rec.ID)
		}
		ws = &overlay.Workspace{Dir: peekDir(rec.Dir), Lower: rec.Project, Disk: true}
		os.RemoveAll(ws.Dir)
		if err := os.MkdirAll(ws.Upper(), 0o700); err != nil {
			return nil, err
		}
		if err := cs.RestoreDir(ctx, last.ID, ws.Upper()); err != nil {
			os.RemoveAll(ws.Dir)
			return nil, err
		}
	}
	l := &live{ws: ws, base: review.OpenBase(rec.Project, baseDir(rec.Dir)), cache: review.NewCache()}
	if e.peeks.m == nil {
		e.peeks.m = map[string]*live{}
	}
	e.peeks.m[rec.ID] = l
	return l, nil
}

// dropPeek removes a session's peek, once no review reads it.
func (e *Engine) dropPeek(id string) {
	e.peeks.mu.Lock()
	l := e.peeks.m[id]
	delete(e.peeks.m, id)
	e.peeks.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	l.base.Close()
	l.mu.Unlock()
	if l.ws.Dir != "" && filepath.Base(l.ws.Dir) == "peek" {
		os.RemoveAll(l.ws.Dir)
	}
}
