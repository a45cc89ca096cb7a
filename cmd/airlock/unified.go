package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
)

// printUnified writes a diff for a person: like a patch, but binary,
// special and directory changes get a one-line summary, and conflicts,
// holds and findings are said where they apply. color adds ANSI colours
// for a terminal. Each file is written whole or not at all.
func printUnified(w io.Writer, diffs []api.FileDiff, color bool) error {
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	var buf bytes.Buffer
	for _, d := range diffs {
		buf.Reset()
		unifiedHead(&buf, d, paint)
		unifiedConflicts(&buf, d.Conflicts, paint)
		for _, h := range d.Hunks {
			fmt.Fprintln(&buf, paint("36", hunkHeader(h))+" "+paint("2", "#"+h.ID))
			for _, line := range h.Lines {
				text := strings.TrimSuffix(line, "\n")
				switch line[0] {
				case '+':
					text = paint("32", text)
				case '-':
					text = paint("31", text)
				}
				buf.WriteString(text)
				buf.WriteByte('\n')
				if !strings.HasSuffix(line, "\n") {
					buf.WriteString("\\ No newline at end of file\n")
				}
			}
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// unifiedHead writes a file's title line, its hold and findings, and
// what stands for its content when it has no hunks.
func unifiedHead(buf *bytes.Buffer, d api.FileDiff, paint func(code, s string) string) {
	quote := names.Quote
	title := fmt.Sprintf("%s %s", d.Kind, quote(d.Path))
	if d.Type == api.TypeDir || (d.Type == "" && d.OldType == api.TypeDir) {
		title += "/"
	}
	if d.Kind == api.KindRenamed {
		title = fmt.Sprintf("renamed %s -> %s (%d%% similar)", quote(d.From), quote(d.Path), d.Similarity)
	}
	switch {
	case d.Conflict:
		title += " " + paint("1;31", "CONFLICT: "+d.ConflictReason)
	case d.Merged:
		title += " (merged with changes made on the host since the session started)"
	}
	fmt.Fprintln(buf, paint("1", "=== "+title))
	if d.Held != "" {
		fmt.Fprintln(buf, paint("1;33", "HELD: "+d.Held))
	}
	for _, f := range d.Findings {
		where := ""
		if f.Line > 0 {
			where = fmt.Sprintf(" (line %d)", f.Line)
		}
		fmt.Fprintln(buf, paint("1;33", "FINDING "+f.Scanner+where+": "+f.Message))
	}
	switch {
	case d.Note != "":
		fmt.Fprintf(buf, "%s (%s)\n", d.Note, d.Type)
	case d.Type == api.TypeDir || d.OldType == api.TypeDir && d.Type == "":
		if d.Kind == api.KindMode || d.OldMode != d.Mode && d.OldType != "" && d.Type != "" {
			fmt.Fprintf(buf, "mode %v -> %v\n", d.OldMode, d.Mode)
		}
	case d.Binary && d.TooLarge != "":
		fmt.Fprintf(buf, "no text diff (%s): %d -> %d bytes%s\n", d.TooLarge, d.OldSize, d.Size, sumSuffix(d.ContentSum))
	case d.Binary:
		fmt.Fprintf(buf, "binary %s: %d -> %d bytes%s\n", d.ContentType, d.OldSize, d.Size, sumSuffix(d.ContentSum))
	case d.Kind == api.KindMode:
		fmt.Fprintf(buf, "mode %v -> %v\n", d.OldMode, d.Mode)
	}
	if d.Kind == api.KindModified && d.OldMode != d.Mode {
		fmt.Fprintf(buf, "mode %v -> %v\n", d.OldMode, d.Mode)
	}
	if (d.Type == api.TypeSymlink || d.OldType == api.TypeSymlink) && (d.OldLink != "" || d.Link != "") {
		fmt.Fprintf(buf, "symlink %s -> %s\n", quote(d.OldLink), quote(d.Link))
	}
}

// unifiedConflicts writes each conflict as git-style markers, or says
// how to settle a whole-file one.
func unifiedConflicts(buf *bytes.Buffer, conflicts []api.Conflict, paint func(code, s string) string) {
	for _, c := range conflicts {
		if c.Host == nil && c.Agent == nil && c.Base == nil {
			fmt.Fprintf(buf, "%s whole file: --take agent or --take host\n", paint("1;31", "conflict #"+c.ID))
			continue
		}
		fmt.Fprintf(buf, "%s at line %d of the project's file\n", paint("1;31", "conflict #"+c.ID), c.HostStart)
		for _, part := range []struct {
			name  string
			lines []string
		}{{"<<<<<<< host", c.Host}, {"||||||| base", c.Base}, {"======= session", c.Agent}} {
			fmt.Fprintln(buf, paint("33", part.name))
			for _, l := range part.lines {
				buf.WriteString(strings.TrimSuffix(l, "\n") + "\n")
			}
		}
		fmt.Fprintln(buf, paint("33", ">>>>>>>"))
	}
}

// hunkHeader is a hunk's "@@ -a,b +c,d @@" line as diff writes it (a
// length of one is left out).
func hunkHeader(h api.Hunk) string {
	span := func(start, n int) string {
		if n == 1 {
			return strconv.Itoa(start)
		}
		return strconv.Itoa(start) + "," + strconv.Itoa(n)
	}
	return "@@ -" + span(h.OldStart, h.OldLines) + " +" + span(h.NewStart, h.NewLines) + " @@"
}

func sumSuffix(sum string) string {
	if sum == "" {
		return ""
	}
	return ", " + sum
}
