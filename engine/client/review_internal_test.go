package client

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/api"
)

// TestReadFilesJSON: the files of a streamed diff are handed on as the
// engine wrote them, the rest decoded; a stream cut short is an error.
func TestReadFilesJSON(t *testing.T) {
	whole := `{"files":[{"id":"a","lines":["+x\n"]},{"id":"b"}],"session":"s1","workspace":{"used":3,"size":0,"full":false,"files":1},"ignored":{"paths":2,"bytes":5}}` + "\n"
	var got []string
	var d api.Diff
	err := readFilesJSON(strings.NewReader(whole), &d, func(f []byte) error {
		got = append(got, string(f))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != `{"id":"a","lines":["+x\n"]}` || got[1] != `{"id":"b"}` {
		t.Errorf("files %q", got)
	}
	if d.Session != "s1" || d.Workspace.Used != 3 || d.Ignored == nil || d.Ignored.Paths != 2 || d.Files != nil {
		t.Errorf("rest %+v", d)
	}

	if err := readFilesJSON(strings.NewReader(`{"files":null,"session":"s2"}`), &d, nil); err != nil || d.Session != "s2" {
		t.Errorf("no files: %v, %+v", err, d)
	}
	for _, cut := range []int{0, 1, 12, len(whole) / 2, len(whole) - 3} {
		err := readFilesJSON(strings.NewReader(whole[:cut]), &api.Diff{}, func([]byte) error { return nil })
		var syn *json.SyntaxError
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &syn) {
			t.Errorf("cut at %d: %v, want an error saying so", cut, err)
		}
	}
	stop := errors.New("stop")
	if err := readFilesJSON(strings.NewReader(whole), &d, func([]byte) error { return stop }); err != stop {
		t.Errorf("each's error: %v", err)
	}
}
