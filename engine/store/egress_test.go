package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/store"
)

// A request the proxy read keeps its method, path and rule in the log;
// a connection has none.
func TestEgressRequestEntries(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	if err := s.PutSession(ctx, store.Session{ID: "s1", Project: "/p", Image: "img", State: api.StateRunning, Created: time.Now(), Dir: "/d/s1"}); err != nil {
		t.Fatal(err)
	}
	in := []api.EgressEntry{
		{Time: time.Now(), Kind: "connect", Host: "api.test", Port: 443, Allowed: true, Rule: "allow GET api.test/repos/** (inspected)"},
		{Time: time.Now(), Kind: "https", Host: "api.test", Port: 443, Method: "POST", Path: "/repos/x", Rule: "deny POST api.test/**", Reason: "POST api.test/repos/x is denied"},
	}
	for _, e := range in {
		if _, err := s.AddEgress(ctx, "s1", e); err != nil {
			t.Fatal(err)
		}
	}
	log, err := s.EgressLog(ctx, "s1", false, 0)
	if err != nil || len(log) != 2 {
		t.Fatalf("log: %+v, %v", log, err)
	}
	if log[0].Method != "" || log[1].Method != "POST" || log[1].Path != "/repos/x" || log[1].Rule != "deny POST api.test/**" {
		t.Errorf("log: %+v", log)
	}
	one, err := s.EgressEntry(ctx, "s1", log[1].ID)
	if err != nil || one.Method != "POST" || one.Path != "/repos/x" {
		t.Errorf("entry: %+v, %v", one, err)
	}
}
