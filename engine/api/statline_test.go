package api

import (
	"reflect"
	"testing"
)

func TestStatLineRoundTrips(t *testing.T) {
	for _, s := range []Stat{
		{Path: "a.txt", Kind: "added", Added: 3},
		{Path: "dir/b", Kind: "modified", Added: 1, Removed: 2, Conflict: true, Held: true, Findings: []string{"secret", "large"}},
		{Path: "new", From: "old", Kind: "renamed", Merged: true},
		{Path: "bin", Kind: "added", Binary: true, TooLarge: true},
		{Path: "package-lock.json", Kind: "modified", Generated: true, Added: 9},
		{Path: "node_modules/x.js", Kind: "added", Ignored: IgnoredProject},
		{Path: "web/dist/a.js", Kind: "added", Ignored: IgnoredSession, Generated: true},
		{Path: "tab\there\nnewline\\back\x01ctl\x7f{", Kind: "added", From: "\t"},
		{Path: "{\"json\":1}", Kind: "deleted"},
		{Path: "ünï", Kind: "added", Findings: []string{"with,comma"}},
	} {
		line := AppendStatLine(nil, s)
		for _, c := range line {
			if c == '\n' {
				t.Fatalf("%q: a newline in the line", s.Path)
			}
		}
		got, err := ParseStatLine(line)
		if s.Findings != nil && s.Findings[0] == "with,comma" {
			s.Findings = []string{"with comma"}
		}
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Errorf("%q: got %+v, %v", line, got, err)
		}
	}
}

func FuzzParseStatLine(f *testing.F) {
	f.Add([]byte("added\t1\t0\tbh\tsecret\t\tp"))
	f.Add([]byte("added\t1\t0\t\t\t\\x4\t\\"))
	f.Fuzz(func(t *testing.T, line []byte) {
		s, err := ParseStatLine(line)
		if err != nil {
			return
		}
		again, err := ParseStatLine(AppendStatLine(nil, s))
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("%q: parsed %+v, again %+v, %v", line, s, again, err)
		}
	})
}
