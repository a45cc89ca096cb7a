package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
)

// printDiffJSON prints a session's diff as `airlock diff --json` always
// has: the api.Diff, indented by two spaces, with the files' stats. The
// engine's JSON of each file is indented as it comes, not decoded and
// encoded again (tens of megabytes for a large session: seconds), and
// of each only what its stat needs is decoded. The output is what
// decoding and encoding printed, byte for byte, but for bytes that are
// not UTF-8: the engine escapes each as \ufffd, which stays so, where
// encoding again printed the character itself.
func printDiffJSON(ctx context.Context, c *client.Client, id string, q api.DiffQuery, w io.Writer) error {
	var files diffJSON
	d, err := c.DiffEachJSON(ctx, id, q, files.add)
	if err != nil {
		return err
	}
	return files.write(w, d)
}

// diffJSON gathers a diff's files, indented, and their stats: the
// session's ID comes before them in what is printed, and after them from
// the engine.
type diffJSON struct {
	chunks [][]byte // the files array's text, in pieces of about chunkSize
	stats  []api.Stat
	scrap  bytes.Buffer
}

const chunkSize = 1 << 20

func (j *diffJSON) add(file []byte) error {
	st, err := statOfJSON(file)
	if err != nil {
		return err
	}
	b := &j.scrap
	b.Reset()
	if len(j.stats) == 0 {
		b.WriteString("[\n    ")
	} else {
		b.WriteString(",\n    ")
	}
	if err := json.Indent(b, file, "    ", "  "); err != nil {
		return err
	}
	j.stats = append(j.stats, st)
	for p := b.Bytes(); len(p) > 0; {
		k := len(j.chunks) - 1
		if k < 0 || len(j.chunks[k]) == cap(j.chunks[k]) {
			j.chunks, k = append(j.chunks, make([]byte, 0, chunkSize)), k+1
		}
		n := min(len(p), cap(j.chunks[k])-len(j.chunks[k]))
		j.chunks[k], p = append(j.chunks[k], p[:n]...), p[n:]
	}
	return nil
}

// write prints d with the files gathered: d encoded with no files, which
// it shows as null, and the files' text in place of that null.
func (j *diffJSON) write(w io.Writer, d api.Diff) error {
	d.Files, d.Stats = nil, j.stats
	if d.Stats == nil {
		d.Stats = []api.Stat{}
	}
	var rest bytes.Buffer
	enc := json.NewEncoder(&rest)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return err
	}
	session, err := json.Marshal(d.Session)
	if err != nil {
		return err
	}
	head := "{\n  \"session\": " + string(session) + ",\n  \"files\": "
	tail, ok := bytes.CutPrefix(rest.Bytes(), []byte(head+"null"))
	if !ok {
		return fmt.Errorf("internal error: the diff's JSON does not start with its session and files")
	}
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	for _, c := range j.chunks {
		if _, err := w.Write(c); err != nil {
			return err
		}
	}
	end := "\n  ]"
	if len(j.stats) == 0 {
		end = "[]"
	}
	if _, err := io.WriteString(w, end); err != nil {
		return err
	}
	_, err = w.Write(tail)
	return err
}

// fileStatJSON is what a file's stat needs of its JSON: all but its
// lines, of which only the first character.
type fileStatJSON struct {
	api.Change
	Held     string        `json:"held"`
	Findings []api.Finding `json:"findings"`
	Hunks    []struct {
		Lines []lineSign `json:"lines"`
	} `json:"hunks"`
}

// lineSign is a hunk line's first character: ' ', '-' or '+'.
type lineSign byte

func (l *lineSign) UnmarshalJSON(b []byte) error {
	if len(b) > 2 && b[0] == '"' && b[1] != '\\' && b[1] != '"' {
		*l = lineSign(b[1]) // a string whose first character is not escaped
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s != "" {
		*l = lineSign(s[0])
	}
	return nil
}

// statOfJSON is api.Stats of one file, from its JSON.
func statOfJSON(file []byte) (api.Stat, error) {
	var f fileStatJSON
	if err := json.Unmarshal(file, &f); err != nil {
		return api.Stat{}, err
	}
	st := api.Stats([]api.FileDiff{{Change: f.Change, Held: f.Held, Findings: f.Findings}})[0]
	for _, h := range f.Hunks {
		for _, l := range h.Lines {
			switch l {
			case '+':
				st.Added++
			case '-':
				st.Removed++
			}
		}
	}
	return st, nil
}
