package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/engine/enginetest"
)

func engineNetworks(t *testing.T, e *enginetest.Engine) []string {
	t.Helper()
	var names []string
	for _, k := range egress.Nets("airlock:" + e.StateDir) {
		names = append(names, "airlock-"+k)
	}
	return names
}

// A session takes a spare network when one is ready, with its own policy
// and log, and the engine leaves no network behind when it stops.
func TestSpareNetworks(t *testing.T) {
	e := enginetest.Start(t, func(o *engine.Options) { o.SpareNetworks = 1 })
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for len(engineNetworks(t, e)) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	spare := engineNetworks(t, e)
	if len(spare) != 1 {
		t.Fatalf("networks %v: want one spare", spare)
	}
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t), Egress: &api.EgressPolicy{Mode: "custom", Allow: []string{"allowed.invalid"}}})
	must(t, err)
	code, out := run(t, e, s.ID, "wget", "-q", "-O-", "http://blocked.invalid/")
	if code == 0 || !strings.Contains(out, "403") {
		t.Fatalf("a blocked request: exit %d, %q", code, out)
	}
	log, err := e.EgressLog(ctx, s.ID, true, 0)
	must(t, err)
	if len(log) == 0 || log[len(log)-1].Host != "blocked.invalid" || log[len(log)-1].Rule != "no rule" {
		t.Fatalf("the session's log: %+v", log)
	}
	got, _ := e.Get(ctx, s.ID)
	if got.Egress == nil || got.Egress.Allow[0] != "allowed.invalid" {
		t.Errorf("policy %+v", got.Egress)
	}
	nets := engineNetworks(t, e)
	if len(nets) < 1 || !contains(nets, spare[0]) {
		t.Errorf("networks %v: the session should be on the spare %s", nets, spare[0])
	}
	must(t, e.Remove(ctx, s.ID))
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	e.Close(cctx)
	if left := engineNetworks(t, e); len(left) != 0 {
		t.Errorf("networks left after the engine stopped: %v", left)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
