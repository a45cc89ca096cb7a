package engine

import "context"

// Watch sends, in batches until ctx ends, the ids of sessions that
// changed: created, a state change (paused, resumed, failed), budgets,
// limits or policy set, removed, a command or an agent turn started or
// ended, files accepted or discarded. Get says what a session is now (a
// not-found error: it is gone). The store's writes publish them (see
// store.Watch); a reader that falls behind gets each id once.
func (e *Engine) Watch(ctx context.Context) <-chan []string { return e.store.Watch(ctx) }
