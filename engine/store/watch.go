package store

import (
	"context"
	"sync"
)

// watchers are the readers of Watch. Every write of a session's record
// (and of its turns and commands, which change what its files hold and
// which agent it last ran) names the session to each of them.
type watchers struct {
	mu  sync.Mutex
	set map[*watcher]struct{}
}

// watcher is one reader's pending ids. A writer adds an id and rings
// ready without waiting; the reader takes every pending id at once, so
// an id that changes ten times before it reads comes once.
type watcher struct {
	mu    sync.Mutex
	ids   map[string]struct{}
	ready chan struct{} // capacity 1
}

// Watch sends the ids of sessions whose record changed (created,
// updated, deleted), or that Changed names, in batches until ctx ends;
// then the channel closes. A reader that is slow never holds up a writer:
// it gets each id that changed meanwhile once, in its next batch.
func (s *Store) Watch(ctx context.Context) <-chan []string {
	w := &watcher{ids: map[string]struct{}{}, ready: make(chan struct{}, 1)}
	s.watch.mu.Lock()
	if s.watch.set == nil {
		s.watch.set = map[*watcher]struct{}{}
	}
	s.watch.set[w] = struct{}{}
	s.watch.mu.Unlock()
	out := make(chan []string)
	go func() {
		defer close(out)
		defer func() {
			s.watch.mu.Lock()
			delete(s.watch.set, w)
			s.watch.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.ready:
			}
			w.mu.Lock()
			batch := make([]string, 0, len(w.ids))
			for id := range w.ids {
				batch = append(batch, id)
			}
			clear(w.ids)
			w.mu.Unlock()
			select {
			case out <- batch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Changed tells Watch's readers that session id changed in a way its
// record does not show (files accepted or discarded).
func (s *Store) Changed(id string) {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	for w := range s.watch.set {
		w.mu.Lock()
		w.ids[id] = struct{}{}
		w.mu.Unlock()
		select {
		case w.ready <- struct{}{}:
		default: // already rung
		}
	}
}

// changed is Changed after a write that succeeded.
func (s *Store) changed(id string, err error) error {
	if err == nil {
		s.Changed(id)
	}
	return err
}
