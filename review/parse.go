package review

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// PatchFile is one file's part of a unified diff.
type PatchFile struct {
	OldPath string // "" for /dev/null
	NewPath string // "" for /dev/null
	Hunks   []Hunk
}

// maxPatch bounds what ParsePatch reads.
const maxPatch = 256 << 20

// ParsePatch reads a unified diff (git's format or plain ---/+++ headers)
// with text hunks. Binary patches, renames and mode lines are not
// supported in an edited patch: accept those changes by path.
func ParsePatch(r io.Reader) ([]PatchFile, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxPatch))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var files []PatchFile
	var cur *PatchFile
	var h *Hunk
	oldLeft, newLeft := 0, 0
	lineNo := 0
	fail := func(format string, args ...any) error {
		return fmt.Errorf("patch line %d: %s", lineNo, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if h != nil && (oldLeft > 0 || newLeft > 0) {
			if line == "" {
				line = " " // some editors drop the space of an empty context line
			}
			switch line[0] {
			case ' ':
				oldLeft--
				newLeft--
			case '-':
				oldLeft--
			case '+':
				newLeft--
			case '\\':
				if err := noNewline(h); err != nil {
					return nil, fail("%v", err)
				}
				continue
			default:
				return nil, fail("expected a hunk line (' ', '-' or '+'), got %q", clip(line))
			}
			if oldLeft < 0 || newLeft < 0 {
				return nil, fail("hunk %s has more lines than its header says", h.Header())
			}
			h.Lines = append(h.Lines, line+"\n")
			continue
		}
		switch {
		case strings.HasPrefix(line, `\ `):
			if h == nil {
				return nil, fail("no-newline marker outside a hunk")
			}
			if err := noNewline(h); err != nil {
				return nil, fail("%v", err)
			}
		case strings.HasPrefix(line, "diff --git "):
			files = append(files, PatchFile{})
			cur, h = &files[len(files)-1], nil
		case strings.HasPrefix(line, "--- "):
			if cur == nil || len(cur.Hunks) > 0 || cur.NewPath != "" {
				files = append(files, PatchFile{})
				cur = &files[len(files)-1]
			}
			p, err := patchPath(line[4:], "a/")
			if err != nil {
				return nil, fail("%v", err)
			}
			cur.OldPath, h = p, nil
		case strings.HasPrefix(line, "+++ "):
			if cur == nil {
				return nil, fail("+++ without ---")
			}
			p, err := patchPath(line[4:], "b/")
			if err != nil {
				return nil, fail("%v", err)
			}
			cur.NewPath = p
		case strings.HasPrefix(line, "@@ "):
			if cur == nil || cur.OldPath == "" && cur.NewPath == "" {
				return nil, fail("hunk before file headers")
			}
			nh, err := parseHunkHeader(line)
			if err != nil {
				return nil, fail("%v", err)
			}
			cur.Hunks = append(cur.Hunks, nh)
			h = &cur.Hunks[len(cur.Hunks)-1]
			oldLeft, newLeft = nh.OldLines, nh.NewLines
		case strings.HasPrefix(line, "GIT binary patch"), strings.HasPrefix(line, "rename "), strings.HasPrefix(line, "old mode"), strings.HasPrefix(line, "new mode"):
			return nil, fail("%q is not supported in an edited patch: accept that change by path", clip(line))
		default:
			// index, mode and similarity lines, and free text between files
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if h != nil && (oldLeft > 0 || newLeft > 0) {
		return nil, fmt.Errorf("patch ends inside hunk %s", h.Header())
	}
	var out []PatchFile
	for _, f := range files {
		if f.OldPath != "" || f.NewPath != "" {
			out = append(out, f)
		}
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// noNewline drops the newline of the hunk's last line.
func noNewline(h *Hunk) error {
	if len(h.Lines) == 0 {
		return fmt.Errorf("no-newline marker before any line")
	}
	last := &h.Lines[len(h.Lines)-1]
	*last = strings.TrimSuffix(*last, "\n")
	return nil
}

// patchPath reads a ---/+++ name: /dev/null, a C-quoted name, or a plain
// one (ended by a tab when followed by a timestamp), without its prefix.
func patchPath(s, prefix string) (string, error) {
	if s == "/dev/null" || strings.HasPrefix(s, "/dev/null\t") {
		return "", nil
	}
	if strings.HasPrefix(s, `"`) {
		u, err := unquoteC(s)
		if err != nil {
			return "", err
		}
		s = u
	} else if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimPrefix(s, prefix)
	clean, err := CleanPath(s)
	if err != nil {
		return "", err
	}
	return clean, nil
}

// unquoteC undoes git's C-style quoting of a name.
func unquoteC(s string) (string, error) {
	end := strings.LastIndexByte(s, '"')
	if end <= 0 {
		return "", fmt.Errorf("unterminated quoted name %q", clip(s))
	}
	in := s[1:end]
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(in) {
			return "", fmt.Errorf("bad escape in %q", clip(s))
		}
		switch in[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'v':
			b.WriteByte('\v')
		case '"', '\\':
			b.WriteByte(in[i])
		default:
			if i+2 < len(in) {
				if v, err := strconv.ParseUint(in[i:i+3], 8, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
			}
			return "", fmt.Errorf("bad escape in %q", clip(s))
		}
	}
	return b.String(), nil
}

func parseHunkHeader(line string) (Hunk, error) {
	var h Hunk
	rest := strings.TrimPrefix(line, "@@ ")
	end := strings.Index(rest, " @@")
	if end < 0 {
		return h, fmt.Errorf("bad hunk header %q", clip(line))
	}
	parts := strings.Fields(rest[:end])
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "-") || !strings.HasPrefix(parts[1], "+") {
		return h, fmt.Errorf("bad hunk header %q", clip(line))
	}
	var err error
	if h.OldStart, h.OldLines, err = parseRange(parts[0][1:]); err != nil {
		return h, err
	}
	if h.NewStart, h.NewLines, err = parseRange(parts[1][1:]); err != nil {
		return h, err
	}
	return h, nil
}

func parseRange(s string) (int, int, error) {
	a, b, hasLen := strings.Cut(s, ",")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 || start > 1<<30 {
		return 0, 0, fmt.Errorf("bad hunk range %q", s)
	}
	n := 1
	if hasLen {
		if n, err = strconv.Atoi(b); err != nil || n < 0 || n > 1<<30 {
			return 0, 0, fmt.Errorf("bad hunk range %q", s)
		}
	}
	return start, n, nil
}
