package agent

import (
	"bytes"
	"reflect"
	"testing"
)

// A CLI's output is cut at newlines whatever the writes' pieces; a line
// with no end in sight is passed on once 4 MiB of it are held.
func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{fn: func(l []byte) { got = append(got, string(l)) }}
	for _, piece := range []string{"one\r\ntw", "o\n", "\nthree"} {
		w.Write([]byte(piece))
	}
	w.flush()
	if want := []string{"one", "two", "", "three"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	var sizes []int
	w = &lineWriter{fn: func(l []byte) { sizes = append(sizes, len(l)) }}
	w.Write(bytes.Repeat([]byte("x"), maxLine+10))
	w.Write([]byte("\n"))
	if want := []int{maxLine + 10, 0}; !reflect.DeepEqual(sizes, want) {
		t.Errorf("pieces of %v bytes, want %v", sizes, want)
	}
}
