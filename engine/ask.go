package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/errdefs"
)

// asks are the questions of sessions under the ask mode that wait for
// an answer, numbered engine-wide (`airlock net pending`, `net decide N`).
type asks struct {
	mu   sync.Mutex
	next int64
	open map[int64]*pendingAsk
}

type pendingAsk struct {
	q      api.PendingQuestion
	answer chan string // buffered: Decide never blocks
}

// gatewayAsker puts a gateway's questions to the user as pending ones of
// the session the gateway serves.
type gatewayAsker struct {
	e  *Engine
	st *egressState
}

// Ask implements egress.Asker: the question is pending until Decide or
// ctx ends; an allow-always answer adds the destination to the session's
// running policy first.
func (a gatewayAsker) Ask(ctx context.Context, q egress.Question) (string, error) {
	id, _ := a.st.session.Load().(string)
	if id == "" {
		return "", errors.New("the network serves no session")
	}
	e := a.e
	e.asks.mu.Lock()
	if e.asks.open == nil {
		e.asks.open = map[int64]*pendingAsk{}
	}
	e.asks.next++
	p := &pendingAsk{q: api.PendingQuestion{ID: e.asks.next, Session: id, Time: time.Now(), Kind: q.Kind, Host: q.Host, Port: q.Port,
		Method: q.Method, Path: q.Path}, answer: make(chan string, 1)}
	e.asks.open[p.q.ID] = p
	e.asks.mu.Unlock()
	defer func() {
		e.asks.mu.Lock()
		delete(e.asks.open, p.q.ID)
		e.asks.mu.Unlock()
	}()
	select {
	case ans := <-p.answer:
		if ans == egress.AllowAlways {
			if _, err := e.Policy(context.WithoutCancel(ctx), id, api.PolicyChange{Allow: []string{q.Destination()}}); err != nil {
				return "", err
			}
		}
		return ans, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Pending lists the questions waiting for an answer, oldest first.
func (e *Engine) Pending(ctx context.Context) ([]api.PendingQuestion, error) {
	e.asks.mu.Lock()
	defer e.asks.mu.Unlock()
	out := []api.PendingQuestion{}
	for _, p := range e.asks.open {
		out = append(out, p.q)
	}
	slices.SortFunc(out, func(a, b api.PendingQuestion) int { return int(a.ID - b.ID) })
	return out, nil
}

// Decide answers pending question d.ID.
func (e *Engine) Decide(ctx context.Context, d api.Decide) error {
	switch d.Answer {
	case egress.AllowOnce, egress.AllowAlways, egress.DenyAnswer:
	default:
		return errdefs.Invalidf("answer %q: use allow-once, allow-always or deny", d.Answer)
	}
	e.asks.mu.Lock()
	p, ok := e.asks.open[d.ID]
	if ok {
		delete(e.asks.open, d.ID)
	}
	e.asks.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("no question %d is waiting (answered already, or timed out): see `airlock net pending`", d.ID)
	}
	p.answer <- d.Answer
	return nil
}
