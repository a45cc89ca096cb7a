package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/airlock/airlock/engine/egress"
)

// Spare networks: Docker takes tens of milliseconds to make a network,
// which a session's start would otherwise wait for. The engine keeps
// Options.SpareNetworks of them ready, their egress up under a deny-all
// policy and nobody on them; a new session takes one, gets its own policy
// set on the running proxy, and a replacement is made in the background.

func randomKey() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// takeSpare returns a ready network for session id with policy pol, or
// nil if none is ready.
func (e *Engine) takeSpare(id string, pol *egress.Policy) *egressState {
	e.mu.Lock()
	var st *egressState
	if n := len(e.spares); n > 0 {
		st, e.spares = e.spares[n-1], e.spares[:n-1]
	}
	e.mu.Unlock()
	if st == nil {
		return nil
	}
	st.proxy.SetPolicy(pol)
	st.session.Store(id)
	e.fillSpares()
	return st
}

// fillSpares makes spare networks in the background up to the target.
func (e *Engine) fillSpares() {
	e.mu.Lock()
	if e.filling || len(e.spares) >= e.spareTarget || e.closing {
		e.mu.Unlock()
		return
	}
	e.filling = true
	e.mu.Unlock()
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer func() {
			e.mu.Lock()
			e.filling = false
			e.mu.Unlock()
		}()
		for {
			e.mu.Lock()
			need := len(e.spares) < e.spareTarget && !e.closing
			e.mu.Unlock()
			if !need {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			key := randomKey()
			gw, err := e.createNetwork(ctx, key)
			cancel()
			if err != nil {
				e.log.Warn("make a spare network", "err", err)
				return
			}
			st, err := e.startEgress(key, gw, &egress.Policy{Mode: egress.DenyAll}, "")
			if err != nil {
				e.log.Warn("start a spare network's egress", "err", err)
				removeNetwork(networkName(key))
				return
			}
			e.mu.Lock()
			closing := e.closing
			if !closing {
				e.spares = append(e.spares, st)
			}
			e.mu.Unlock()
			if closing {
				st.close()
				removeNetwork(networkName(key))
				return
			}
		}
	}()
}

// closeSpares removes the spare networks (the engine is stopping).
func (e *Engine) closeSpares() {
	e.mu.Lock()
	e.closing = true
	spares := e.spares
	e.spares = nil
	e.mu.Unlock()
	for _, st := range spares {
		st.close()
		removeNetwork(networkName(st.key))
	}
}

// removeStrayNetworks removes this engine's networks that no session
// uses: spares of a previous run, or a network made by a create that
// crashed before recording it.
func (e *Engine) removeStrayNetworks(_ context.Context, used map[string]bool) error {
	for _, key := range egress.Nets(e.netOwner()) {
		if !used[networkName(key)] {
			removeNetwork(networkName(key))
		}
	}
	return nil
}
