package review

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// FileDiff is a change with its text hunks (none for binary files,
// directories and special files).
type FileDiff struct {
	Change
	Hunks []Hunk `json:"hunks,omitempty"`
	// Conflicts are the regions both sides changed (Conflict is set).
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Held says why the policy holds this change for a human; AutoAccept
	// is set when the policy would accept it without one (if nothing
	// holds it and no scanner flags it).
	Held       string    `json:"held,omitempty"`
	AutoAccept bool      `json:"auto_accept,omitempty"`
	Findings   []Finding `json:"findings,omitempty"`
	// Digest names the session's side of the file exactly as this review
	// read it (see digest.go): an accept pinned to it takes that version
	// or nothing. Empty when the file changed while it was reviewed.
	Digest string `json:"digest,omitempty"`

	target *string // what accepting the whole file writes, when not the session's file
	chunks []chunk // the three-way merge, when there was one
	whole  bool    // the conflict covers the whole file

	digested bool // Digest comes from the bytes the review read (or none could be given)
}

// sides returns the old and new text of a file or symlink change. A side of
// another type is empty.
func sides(l Layers, c Change) (string, string, error) {
	readAt := func(root, rel string, t Type) (string, error) {
		return readText(filepath.Join(root, filepath.FromSlash(rel)), t)
	}
	if d := c.data; d != nil && (d.hasOld || c.OldType != File) && (d.hasNew || c.Type != File) && c.Kind != Renamed &&
		c.OldType != Symlink && c.Type != Symlink {
		return string(d.old), string(d.new), nil
	}
	old := c
	if c.Kind == Renamed {
		old.Path = c.From
	}
	a, err := readAt(l.Project, old.Path, c.OldType)
	if err != nil {
		return "", "", err
	}
	b, err := readAt(l.Upper, c.Path, c.Type)
	return a, b, err
}

// gitMode is the mode git records for an object of type t with mode m.
func gitMode(t Type, m fs.FileMode) string {
	switch t {
	case Symlink:
		return "120000"
	case File:
		if m&0o100 != 0 {
			return "100755"
		}
		return "100644"
	}
	return ""
}

// Patch writes changes as a patch that `git apply` (and `patch -p1` for
// text) applies to the untouched project. Binary files use git's binary
// patch format; directories appear only through the files under them (git
// does not track empty directories); special files are left out.
func Patch(w io.Writer, l Layers, changes []Change) error {
	moved := map[string]bool{} // rename sources, not deletions
	for _, c := range changes {
		if c.Kind == Renamed {
			moved[c.From] = true
		}
	}
	for _, c := range changes {
		if err := patchOne(w, l, c, moved); err != nil {
			return err
		}
	}
	return nil
}

type side struct {
	t    Type
	mode fs.FileMode
	data []byte
}

func patchOne(w io.Writer, l Layers, c Change, moved map[string]bool) error {
	if c.Type == Special {
		return nil
	}
	if c.Kind == Renamed {
		return renameSection(w, l, c)
	}
	load := func(root string, t Type, m fs.FileMode) (*side, error) {
		p := filepath.Join(root, filepath.FromSlash(c.Path))
		switch t {
		case File:
			b, err := os.ReadFile(p)
			return &side{t, m, b}, err
		case Symlink:
			s, err := os.Readlink(p)
			return &side{t, m, []byte(s)}, err
		}
		return nil, nil
	}
	// A deleted or replaced directory deletes every file under it; a new
	// directory in place of a file adds nothing by itself.
	if c.OldType == Dir && c.Type != Dir {
		if err := deleteTree(w, l, c.Path, moved); err != nil {
			return err
		}
	}
	old, err := load(l.Project, c.OldType, c.OldMode)
	if err != nil {
		return err
	}
	nw, err := load(l.Upper, c.Type, c.Mode)
	if err != nil {
		return err
	}
	if old != nil && nw != nil && gitMode(old.t, old.mode) != gitMode(nw.t, nw.mode) && old.t != nw.t {
		// git records a type change as a deletion plus an addition.
		if err := section(w, c.Path, old, nil); err != nil {
			return err
		}
		return section(w, c.Path, nil, nw)
	}
	if old == nil && nw == nil {
		return nil
	}
	return section(w, c.Path, old, nw)
}

// renameSection writes a git rename, with the edits if any.
func renameSection(w io.Writer, l Layers, c Change) error {
	od, err := os.ReadFile(filepath.Join(l.Project, filepath.FromSlash(c.From)))
	if err != nil {
		return err
	}
	nd, err := os.ReadFile(filepath.Join(l.Upper, filepath.FromSlash(c.Path)))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "diff --git %s %s\n", quote("a/"+c.From), quote("b/"+c.Path))
	om, nm := gitMode(File, c.OldMode), gitMode(File, c.Mode)
	if om != nm {
		fmt.Fprintf(&buf, "old mode %s\nnew mode %s\n", om, nm)
	}
	fmt.Fprintf(&buf, "similarity index %d%%\nrename from %s\nrename to %s\n", c.Similarity, quoteBare(c.From), quoteBare(c.Path))
	if !bytes.Equal(od, nd) {
		fmt.Fprintf(&buf, "index %s..%s\n", blobID(od), blobID(nd))
		if isBinary(od) || isBinary(nd) {
			buf.WriteString("GIT binary patch\n")
			if err := binaryLiteral(&buf, nd); err != nil {
				return err
			}
			if err := binaryLiteral(&buf, od); err != nil {
				return err
			}
		} else {
			from, to := quote("a/"+c.From), quote("b/"+c.Path)
			fmt.Fprintf(&buf, "--- %s%s\n+++ %s%s\n", from, tabIfSpace(from), to, tabIfSpace(to))
			for _, h := range Hunks(string(od), string(nd)) {
				buf.WriteString(h.Header())
				buf.WriteByte('\n')
				writeLines(&buf, h.Lines)
			}
		}
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// quoteBare quotes a name for "rename from/to" lines, which carry no a/ b/
// prefix.
func quoteBare(name string) string { return quote(name) }

// deleteTree writes deletions for every file and symlink under dir in the
// project, in path order.
func deleteTree(w io.Writer, l Layers, dir string, moved map[string]bool) error {
	root := filepath.Join(l.Project, filepath.FromSlash(dir))
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(l.Project, p)
		if moved[filepath.ToSlash(rel)] {
			continue
		}
		s := &side{t: typeOf(fi.Mode()), mode: fi.Mode()}
		switch s.t {
		case File:
			s.data, err = os.ReadFile(p)
		case Symlink:
			var t string
			t, err = os.Readlink(p)
			s.data = []byte(t)
		default:
			continue
		}
		if err != nil {
			return err
		}
		if err := section(w, filepath.ToSlash(rel), s, nil); err != nil {
			return err
		}
	}
	return nil
}

func blobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

const zeroID = "0000000000000000000000000000000000000000"

// section writes one "diff --git" section. old or nw may be nil.
func section(w io.Writer, p string, old, nw *side) error {
	a, b := quote("a/"+p), quote("b/"+p)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "diff --git %s %s\n", a, b)
	var od, nd []byte
	oid, nid := zeroID, zeroID
	switch {
	case old == nil:
		fmt.Fprintf(&buf, "new file mode %s\n", gitMode(nw.t, nw.mode))
	case nw == nil:
		fmt.Fprintf(&buf, "deleted file mode %s\n", gitMode(old.t, old.mode))
	case gitMode(old.t, old.mode) != gitMode(nw.t, nw.mode):
		fmt.Fprintf(&buf, "old mode %s\nnew mode %s\n", gitMode(old.t, old.mode), gitMode(nw.t, nw.mode))
	}
	if old != nil {
		od, oid = old.data, blobID(old.data)
	}
	if nw != nil {
		nd, nid = nw.data, blobID(nw.data)
	}
	if bytes.Equal(od, nd) && old != nil && nw != nil {
		_, err := w.Write(buf.Bytes()) // mode change only
		return err
	}
	binary := isBinary(od) || isBinary(nd)
	modeSuffix := ""
	if old != nil && nw != nil && gitMode(old.t, old.mode) == gitMode(nw.t, nw.mode) {
		modeSuffix = " " + gitMode(nw.t, nw.mode)
	}
	fmt.Fprintf(&buf, "index %s..%s%s\n", oid, nid, modeSuffix)
	from, to := a, b
	if old == nil {
		from = "/dev/null"
	}
	if nw == nil {
		to = "/dev/null"
	}
	if binary {
		fmt.Fprintf(&buf, "GIT binary patch\n")
		if err := binaryLiteral(&buf, nd); err != nil {
			return err
		}
		if err := binaryLiteral(&buf, od); err != nil {
			return err
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	fmt.Fprintf(&buf, "--- %s%s\n+++ %s%s\n", from, tabIfSpace(from), to, tabIfSpace(to))
	for _, h := range Hunks(string(od), string(nd)) {
		buf.WriteString(h.Header())
		buf.WriteByte('\n')
		writeLines(&buf, h.Lines)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// writeLines writes hunk lines, marking a last line without a newline.
func writeLines(buf *bytes.Buffer, lines []string) {
	for _, l := range lines {
		buf.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			buf.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// tabIfSpace mirrors git, which ends a ---/+++ name containing a space with
// a tab so that the name's end is unambiguous.
func tabIfSpace(name string) string {
	if strings.Contains(name, " ") {
		return "\t"
	}
	return ""
}

func isBinary(b []byte) bool {
	sample := b
	if len(sample) > 8000 {
		sample = sample[:8000]
	}
	return bytes.IndexByte(sample, 0) >= 0
}

// quote applies git's C-style quoting to names with special bytes.
func quote(name string) string {
	needs := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			needs = true
			break
		}
	}
	if !needs {
		return name
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '\v':
			b.WriteString(`\v`)
		default:
			if c < 0x20 || c >= 0x7f {
				b.WriteString(`\` + strconv.FormatInt(int64(c)|0o1000, 8)[1:])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

const b85chars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// binaryLiteral writes data as a git "literal" binary hunk: zlib-deflated,
// base85-encoded in lines of at most 52 bytes, then a blank line.
func binaryLiteral(buf *bytes.Buffer, data []byte) error {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	fmt.Fprintf(buf, "literal %d\n", len(data))
	deflated := z.Bytes()
	for len(deflated) > 0 {
		n := min(len(deflated), 52)
		line := deflated[:n]
		deflated = deflated[n:]
		if n <= 26 {
			buf.WriteByte(byte('A' + n - 1))
		} else {
			buf.WriteByte(byte('a' + n - 27))
		}
		for i := 0; i < n; i += 4 {
			var v uint32
			for j := 0; j < 4; j++ {
				v <<= 8
				if i+j < n {
					v |= uint32(line[i+j])
				}
			}
			var enc [5]byte
			for k := 4; k >= 0; k-- {
				enc[k] = b85chars[v%85]
				v /= 85
			}
			buf.Write(enc[:])
		}
		buf.WriteByte('\n')
	}
	buf.WriteByte('\n')
	return nil
}

// Unified writes a human-oriented unified diff: like Patch but with a one
// line summary for binary, special and directory changes. color adds ANSI
// colors for a terminal.
func Unified(w io.Writer, diffs []FileDiff, color bool) error {
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	var buf bytes.Buffer
	for _, d := range diffs {
		buf.Reset()
		title := fmt.Sprintf("%s %s", d.Kind, quote(d.Path))
		if d.Type == Dir || (d.Type == None && d.OldType == Dir) {
			title += "/"
		}
		if d.Kind == Renamed {
			title = fmt.Sprintf("renamed %s -> %s (%d%% similar)", quote(d.From), quote(d.Path), d.Similarity)
		}
		switch {
		case d.Conflict:
			title += " " + paint("1;31", "CONFLICT: "+d.ConflictReason)
		case d.Merged:
			title += " (merged with changes made on the host since the session started)"
		}
		fmt.Fprintln(&buf, paint("1", "=== "+title))
		if d.Held != "" {
			fmt.Fprintln(&buf, paint("1;33", "HELD: "+d.Held))
		}
		for _, f := range d.Findings {
			where := ""
			if f.Line > 0 {
				where = fmt.Sprintf(" (line %d)", f.Line)
			}
			fmt.Fprintln(&buf, paint("1;33", "FINDING "+f.Scanner+where+": "+f.Message))
		}
		switch {
		case d.Note != "":
			fmt.Fprintf(&buf, "%s (%s)\n", d.Note, d.Type)
		case d.Type == Dir || d.OldType == Dir && d.Type == None:
			if d.Kind == Mode || d.OldMode != d.Mode && d.OldType != None && d.Type != None {
				fmt.Fprintf(&buf, "mode %v -> %v\n", d.OldMode, d.Mode)
			}
		case d.Binary:
			fmt.Fprintf(&buf, "binary %s: %d -> %d bytes\n", d.ContentType, d.OldSize, d.Size)
		case d.Kind == Mode:
			fmt.Fprintf(&buf, "mode %v -> %v\n", d.OldMode, d.Mode)
		}
		if d.Kind == Modified && d.OldMode != d.Mode {
			fmt.Fprintf(&buf, "mode %v -> %v\n", d.OldMode, d.Mode)
		}
		if d.Type == Symlink || d.OldType == Symlink {
			if d.OldLink != "" || d.Link != "" {
				fmt.Fprintf(&buf, "symlink %q -> %q\n", d.OldLink, d.Link)
			}
		}
		for _, c := range d.Conflicts {
			if c.Host == nil && c.Agent == nil && c.Base == nil {
				fmt.Fprintf(&buf, "%s whole file: --take agent or --take host\n", paint("1;31", "conflict #"+c.ID))
				continue
			}
			fmt.Fprintf(&buf, "%s at line %d of the project's file\n", paint("1;31", "conflict #"+c.ID), c.HostStart)
			for _, part := range []struct {
				name  string
				lines []string
			}{{"<<<<<<< host", c.Host}, {"||||||| base", c.Base}, {"======= session", c.Agent}} {
				fmt.Fprintln(&buf, paint("33", part.name))
				for _, l := range part.lines {
					buf.WriteString(strings.TrimSuffix(l, "\n") + "\n")
				}
			}
			fmt.Fprintln(&buf, paint("33", ">>>>>>>"))
		}
		for _, h := range d.Hunks {
			fmt.Fprintln(&buf, paint("36", h.Header())+" "+paint("2", "#"+h.ID))
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

// Stat is the per-file line counts of a diff.
type Stat struct {
	Path     string `json:"path"`
	Kind     Kind   `json:"kind"`
	Added    int    `json:"added"`
	Removed  int    `json:"removed"`
	Binary   bool   `json:"binary,omitempty"`
	From     string `json:"from,omitempty"`
	Conflict bool   `json:"conflict,omitempty"`
	Merged   bool   `json:"merged,omitempty"`
	Held     bool   `json:"held,omitempty"`
	// Findings names the scanners that flagged the file.
	Findings []string `json:"findings,omitempty"`
}

// Stats counts added and removed lines per file.
func Stats(diffs []FileDiff) []Stat {
	out := make([]Stat, 0, len(diffs))
	for _, d := range diffs {
		s := Stat{Path: d.Path, Kind: d.Kind, Binary: d.Binary, From: d.From, Conflict: d.Conflict, Merged: d.Merged, Held: d.Held != ""}
		for _, f := range d.Findings {
			s.Findings = append(s.Findings, f.Scanner)
		}
		for _, h := range d.Hunks {
			for _, l := range h.Lines {
				switch l[0] {
				case '+':
					s.Added++
				case '-':
					s.Removed++
				}
			}
		}
		out = append(out, s)
	}
	return out
}
