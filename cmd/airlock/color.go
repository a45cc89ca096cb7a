package main

import (
	"os"

	"golang.org/x/term"
)

// colorOn reports whether output to f may carry ANSI colours: only on a
// terminal, and never when NO_COLOR is set to anything (no-color.org) or
// the terminal is "dumb". Every coloured line of the CLI asks here; an
// explicit `diff --color always` is the one override.
func colorOn(f *os.File) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
