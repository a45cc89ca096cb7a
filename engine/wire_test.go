package engine

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/agent"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/harness"
	"github.com/airlock/airlock/review"
)

// oldDiff is api.Diff as it was when it carried the review's types: what
// the frontend and existing clients read.
type oldDiff struct {
	Session   string            `json:"session"`
	Files     []review.FileDiff `json:"files"`
	Commits   []review.Commit   `json:"commits,omitempty"`
	Stats     []api.Stat        `json:"stats"`
	Workspace api.Workspace     `json:"workspace"`
}

type oldOutcomes struct {
	Outcomes []review.Outcome `json:"outcomes"`
	Branch   string           `json:"branch,omitempty"`
	Commits  []review.Commit  `json:"commits,omitempty"`
}

// filled sets every exported field of v (a pointer) to a value that is not
// zero, so that a field the wire or its conversion lacks shows in the
// JSON.
func filled[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem())
	return v
}

func fill(v reflect.Value) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 11, 2, 10, 4, 5, 6, time.UTC)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"answer":42}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("+" + v.Type().Name()) // lines start with + - or space
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Uint32, reflect.Uint8, reflect.Uint, reflect.Uint64:
		v.SetUint(0o755)
	case reflect.Float64:
		v.SetFloat(0.25)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0))
		fill(v.Index(1))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

func sameJSON(t *testing.T, what string, old, wire any) {
	t.Helper()
	a, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(wire)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("%s: the wire's JSON differs from the engine's\nengine: %s\nwire:   %s", what, a, b)
	}
}

// The wire's diff is, byte for byte, the JSON it was when it carried the
// review's types: for every field set, and for the empty and nil slices
// whose JSON differs (null against []).
func TestWireDiffKeepsItsJSON(t *testing.T) {
	full := filled[review.FileDiff]()
	plain := review.FileDiff{Change: review.Change{ID: "f1", Path: "a.txt", Kind: review.Added, Type: review.File, Size: 3},
		Hunks: []review.Hunk{{ID: "h1", NewStart: 1, NewLines: 1, Lines: []string{"+a\n"}}}}
	whole := review.FileDiff{Change: review.Change{Path: "b", Kind: review.Modified, Conflict: true}, Conflicts: []review.Conflict{{ID: "c1"}}}
	for name, files := range map[string][]review.FileDiff{
		"every field": {full}, "a plain addition": {plain}, "a whole-file conflict": {whole},
		"no files (nil)": nil, "no files (empty)": {},
	} {
		commits := []review.Commit{filled[review.Commit]()}
		wfiles := wireAll(files, wireFileDiff)
		old := oldDiff{Session: "s1", Files: files, Commits: commits, Stats: api.Stats(wfiles), Workspace: api.Workspace{Used: 1, Size: 2}}
		wire := api.Diff{Session: "s1", Files: wfiles, Commits: wireCommits(commits), Stats: api.Stats(wfiles), Workspace: api.Workspace{Used: 1, Size: 2}}
		if files == nil {
			old.Stats, wire.Stats = nil, nil
		}
		sameJSON(t, name, old, wire)
	}
}

func TestWireOutcomesKeepTheirJSON(t *testing.T) {
	for name, outs := range map[string][]review.Outcome{
		"every field": {filled[review.Outcome]()},
		"applied":     {{Path: "a", Kind: review.Deleted, Applied: true}},
		"none":        {},
	} {
		commits := []review.Commit{filled[review.Commit]()}
		sameJSON(t, name, oldOutcomes{Outcomes: outs, Branch: "airlock/s1", Commits: commits},
			api.Outcomes{Outcomes: wireOutcomes(outs), Branch: "airlock/s1", Commits: wireCommits(commits)})
	}
}

// A selection from the wire reaches the review whole, and every field the
// review takes is on the wire.
func TestWireSelectionReachesTheReview(t *testing.T) {
	sent := filled[api.Selection]()
	sameJSON(t, "api to review", reviewSelection(sent), sent)

	all := filled[review.Selection]()
	b, _ := json.Marshal(all)
	var wire api.Selection
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "review's fields on the wire", all, wire)
}

func TestWireEventsKeepTheirJSON(t *testing.T) {
	code := 3
	for name, ev := range map[string]harness.Event{
		"every field": filled[harness.Event](),
		"a command":   {Type: harness.EventCommand, Time: time.Unix(5, 0).UTC(), Command: "go test", ExitCode: &code},
		"a message":   {Type: harness.EventMessage, Text: "done"},
	} {
		sameJSON(t, name, ev, agent.APIEvent(ev))
	}
	if agent.APIEvents(nil) != nil || agent.APIEvents([]harness.Event{}) == nil {
		t.Error("APIEvents must keep nil nil and empty empty")
	}
	u := filled[harness.Usage]()
	sameJSON(t, "usage", u, api.Usage(u))
}
