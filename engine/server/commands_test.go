package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/airlock/airlock/engine/api"
)

// threeCommands is an engine whose every session ran commands 1, 2 and 3.
type threeCommands struct{ quiet }

func (threeCommands) Commands(context.Context, string, bool) ([]api.Command, error) {
	return []api.Command{{ID: 1}, {ID: 2}, {ID: 3}}, nil
}

func TestCommandsSince(t *testing.T) {
	s, _ := newServer(threeCommands{})
	for _, tc := range []struct {
		query  string
		status int
		ids    []int64
	}{
		{"", 200, []int64{1, 2, 3}},
		{"?since=2", 200, []int64{2, 3}},
		{"?since=9", 200, []int64{}},
		{"?since=x", 400, nil},
		{"?since=-1", 400, nil},
	} {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions/s1/commands"+tc.query, nil))
		if w.Code != tc.status {
			t.Errorf("%q: status %d, want %d: %s", tc.query, w.Code, tc.status, w.Body)
			continue
		}
		if tc.status != 200 {
			continue
		}
		var got []api.Command
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got) != len(tc.ids) {
			t.Errorf("%q: %s %v", tc.query, w.Body, err)
			continue
		}
		for i, c := range got {
			if c.ID != tc.ids[i] {
				t.Errorf("%q: ids %v, want %v", tc.query, got, tc.ids)
			}
		}
	}
}

func TestVersionHasTheLevel(t *testing.T) {
	s, _ := newServer(quiet{})
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/version", nil))
	var v api.VersionInfo
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &v) != nil || v.API != api.Version || v.Level != api.Level {
		t.Errorf("version: %d %s", w.Code, w.Body)
	}
}
