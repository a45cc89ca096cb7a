package engine

import (
	"bytes"
	"fmt"
	"testing"
)

// The mark is cut out wherever the stream's chunks split it, and what
// precedes it arrives intact, including a last line without a newline.
func TestMarkWriterSplitsAnywhere(t *testing.T) {
	mark := "airlock-exit-0123456789abcdef:"
	body := "out line\npartial airlock-exit-0123 not a mark\nno newline at the end"
	stream := body + mark + "42\n" + "stray output after the mark\n"
	for cut1 := 0; cut1 <= len(stream); cut1++ {
		for _, cut2 := range []int{cut1, cut1 + 1, cut1 + 7, len(stream)} {
			if cut2 > len(stream) {
				continue
			}
			var got bytes.Buffer
			code := -1
			m := &markWriter{w: &got, mark: []byte(mark), seen: func(c int) { code = c }}
			for _, chunk := range []string{stream[:cut1], stream[cut1:cut2], stream[cut2:]} {
				if n, err := m.Write([]byte(chunk)); n != len(chunk) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			m.flush()
			if got.String() != body || code != 42 {
				t.Fatalf("cuts %d,%d: got %q code %d, want %q code 42", cut1, cut2, got.String(), code, body)
			}
		}
	}
}

// A stream that ends without the mark loses nothing, even bytes that
// looked like the mark's start.
func TestMarkWriterWithoutMark(t *testing.T) {
	mark := []byte("airlock-exit-ff:")
	for _, s := range []string{"", "plain", "ends with airlock-ex", "airlock-exit-ff"} {
		var got bytes.Buffer
		m := &markWriter{w: &got, mark: mark, seen: func(int) { t.Fatalf("no mark in %q", s) }}
		for i := 0; i < len(s); i++ {
			m.Write([]byte{s[i]})
		}
		m.flush()
		if got.String() != s {
			t.Errorf("got %q, want %q", got.String(), s)
		}
	}
}

func TestFirstCommandScript(t *testing.T) {
	f := &firstRun{argv: []string{"echo", "a b", "$HOME"}, mark: "m:"}
	cmd := f.cmd()
	if cmd[0] != "/bin/sh" || cmd[1] != "-c" || fmt.Sprint(cmd[3:]) != fmt.Sprint([]string{"airlock", "m:", "echo", "a b", "$HOME"}) {
		t.Fatalf("main process %q: the argv must pass through as positional parameters, unquoted", cmd)
	}
}
