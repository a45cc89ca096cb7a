package agent

import (
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/harness"
)

// APIEvent is an agent's event as the API carries it (the same JSON).
func APIEvent(e harness.Event) api.Event {
	w := api.Event{Type: e.Type, Time: e.Time, Turn: e.Turn, Text: e.Text, Tool: e.Tool, Input: e.Input,
		Path: e.Path, Command: e.Command, ExitCode: e.ExitCode, Session: e.Session, Result: e.Result, ID: e.ID, Wrote: e.Wrote}
	if e.Usage != nil {
		u := api.Usage(*e.Usage)
		w.Usage = &u
	}
	return w
}

// APIEvents is APIEvent of each (nil stays nil, empty stays empty).
func APIEvents(evs []harness.Event) []api.Event {
	if evs == nil {
		return nil
	}
	out := make([]api.Event, len(evs))
	for i, e := range evs {
		out[i] = APIEvent(e)
	}
	return out
}
