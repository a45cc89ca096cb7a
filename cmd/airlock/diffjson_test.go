package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// TestDiffJSONAsDecoded: `diff --json` passes the engine's files through,
// indented, and prints what decoding the whole diff and encoding it again
// printed, byte for byte.
func TestDiffJSONAsDecoded(t *testing.T) {
	files := []api.FileDiff{
		{Change: api.Change{ID: "a1", Path: "src/<b>&\u2028.js", Kind: "modified", Type: "file", OldType: "file", Mode: 0o644, OldMode: 0o755, Size: 12, OldSize: 9},
			Hunks: []api.Hunk{{ID: "h1", OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 3, Digest: "d",
				Lines: []string{" same\n", "-old \"quoted\"\n", "+new\ttab\n", "+\\back\n", "+last, no newline"}}},
			Findings: []api.Finding{{Scanner: "secrets", Message: "looks like a secret", Line: 2, Rule: "aws-access-token"}}, Held: "held by policy (*.js)", Digest: "sha256:1"},
		{Change: api.Change{ID: "b2", Path: "bin/x", RawPath: []byte{'x', 0xff}, Kind: "added", Type: "file", Binary: true, ContentType: "application/octet-stream", Size: 3, ContentSum: "sha256:2"}},
		{Change: api.Change{ID: "c3", Path: "gone.txt", Kind: "deleted", OldType: "file", OldSize: 4, Generated: "lockfile"},
			Hunks: []api.Hunk{{ID: "h2", OldStart: 1, OldLines: 1, Lines: []string{"-x\n"}}}, Conflicts: []api.Conflict{{ID: "k", Base: []string{}, Host: nil, Agent: []string{"a"}}}},
		{Change: api.Change{ID: "d4", Path: "l", Kind: "added", Type: "symlink", Link: "../x", Mode: fs.ModeSymlink | 0o777}, AutoAccept: true},
	}
	rest := api.Diff{Session: "3f2a00000001", Workspace: api.Workspace{Used: 10, Size: 20, Files: 4},
		Commits: []api.Commit{{Hash: "abc", Author: "a", Email: "a@b", When: time.Date(2026, 11, 29, 7, 0, 0, 123, time.UTC), Subject: "s"}},
		Ignored: &api.Ignored{Paths: 3, Bytes: 100, Dirs: []api.IgnoredDir{{Path: "node_modules/", Paths: 3, Bytes: 100}}}}
	for _, n := range []int{0, 1, len(files)} {
		// What the engine streams: each file, then the rest.
		var j diffJSON
		for _, f := range files[:n] {
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.add(b); err != nil {
				t.Fatal(err)
			}
		}
		var got bytes.Buffer
		if err := j.write(&got, rest); err != nil {
			t.Fatal(err)
		}

		// What the CLI printed before: the whole diff decoded, then encoded.
		whole := rest
		whole.Files = append([]api.FileDiff{}, files[:n]...)
		b, err := json.Marshal(whole)
		if err != nil {
			t.Fatal(err)
		}
		var d api.Diff
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		d.Stats = api.Stats(d.Files)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d files: printed\n%s\nwant\n%s", n, got.String(), want.String())
		}
	}
}
