package main

import (
	"context"
	"testing"
)

// TestUnknownCommands: an unknown command or flag exits with the usage
// code, never 0 after printing help (no engine is needed for any of these).
func TestUnknownCommands(t *testing.T) {
	for _, args := range [][]string{
		{"nosuch"},
		{"net", "nosuch"},
		{"image", "nosuch"},
		{"secret", "nosuch"},
		{"completion", "nosuch"},
		{"ls", "--format", "{{.ID"},
		{"ls", "--json", "--format", "{{.ID}}"},
		{"diff", "--color", "sometimes", "x"},
		{"diff", "--nosuch", "x"},
		{"net", "--nosuch"},
		{"schedule", "nosuch"},
		{"schedule", "add", "x", "--nosuch"},
	} {
		if code := run(context.Background(), args); code != 64 {
			t.Errorf("airlock %v exited %d, want 64", args, code)
		}
	}
	if code := run(context.Background(), []string{"net"}); code != 0 {
		t.Errorf("airlock net (help) exited %d, want 0", code)
	}
}
