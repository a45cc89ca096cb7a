package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Question is what the proxy asks about a connection or request no rule
// decided under the ask mode.
type Question struct {
	Kind   string // connect, http, https
	Host   string
	Port   int
	Method string // "" for a connection (CONNECT) whose requests the proxy does not read
	Path   string
}

// Destination is what one question stands for: its host and port. While
// a question is open, every other connection or request to the same
// destination waits for its answer instead of asking again.
func (q Question) Destination() string { return net.JoinHostPort(q.Host, strconv.Itoa(q.Port)) }

// Answers.
const (
	AllowOnce   = "allow-once"   // this connection or request (and those waiting on it)
	AllowAlways = "allow-always" // the asker also adds a rule to the running policy
	DenyAnswer  = "deny"
)

// Asker puts questions to the user. The engine's holds each as pending
// until `airlock net decide`, the UI or the desktop app answers.
type Asker interface {
	// Ask blocks until the user answers (AllowOnce, AllowAlways or
	// DenyAnswer) or ctx ends, which is an error. For AllowAlways it has
	// changed the proxy's policy before it returns.
	Ask(ctx context.Context, q Question) (string, error)
}

// defaultAskTimeout is how long a question waits for an answer when the
// policy's AskTimeout is 0.
const defaultAskTimeout = 60 * time.Second

// asking is the set of open questions, by destination.
type asking struct {
	mu   sync.Mutex
	open map[string]*question
}

type question struct {
	done    chan struct{}
	d       Decision
	waiting int // other connections or requests held on the answer
}

// decide turns a decision the policy left to the user into the user's:
// the question is put once per destination at a time, and an unanswered
// one is a deny with a logged reason. Where no one is asked (no Asker:
// airlock ci), undecided is denied.
func (x *Proxy) decide(ctx context.Context, d Decision, q Question) Decision {
	if !d.Ask {
		return d
	}
	if x.Asker == nil {
		return Decision{Rule: "ask", Reason: d.Reason + ", and no one is asked here: undecided is denied"}
	}
	x.asking.mu.Lock()
	if x.asking.open == nil {
		x.asking.open = map[string]*question{}
	}
	key := q.Destination()
	open, waiting := x.asking.open[key]
	if waiting {
		open.waiting++
	} else {
		open = &question{done: make(chan struct{})}
		x.asking.open[key] = open
	}
	x.asking.mu.Unlock()
	if waiting {
		select {
		case <-open.done:
			return open.d
		case <-ctx.Done():
			return Decision{Rule: "ask", Reason: "the client went away while " + key + " was being asked about"}
		}
	}
	timeout := x.Policy().AskTimeout
	if timeout <= 0 {
		timeout = defaultAskTimeout
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	answer, err := x.Asker.Ask(actx, q)
	cancel()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		open.d = Decision{Rule: "ask", Reason: fmt.Sprintf("%s: no answer within %s, so denied", d.Reason, timeout)}
	case err != nil:
		open.d = Decision{Rule: "ask", Reason: d.Reason + ", and asking failed: " + err.Error()}
	case answer == AllowOnce || answer == AllowAlways:
		open.d = Decision{Allowed: true, Rule: "asked: " + answer}
	default:
		open.d = Decision{Rule: "asked: " + DenyAnswer, Reason: "the user denied " + key}
	}
	x.asking.mu.Lock()
	delete(x.asking.open, key)
	x.asking.mu.Unlock()
	close(open.done)
	return open.d
}
