package review

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
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

	lookalike *lookalike // a name in the same directory this one looks like (see lookalikes)
}

// sides returns the old and new text of a file or symlink change (a side
// of another type is empty), or why it gets no text diff (its size or a
// line's length).
func sides(r *roots, c Change, lim Limits) (old, new, why string, err error) {
	if d := c.data; d != nil && (d.hasOld || c.OldType != File) && (d.hasNew || c.Type != File) && c.Kind != Renamed &&
		c.OldType != Symlink && c.Type != Symlink {
		for _, b := range [][]byte{d.old, d.new} {
			if int64(len(b)) > lim.MaxText {
				return "", "", tooLarge(int64(len(b)), lim), nil
			}
			if longestLine(b) > lim.MaxLine {
				return "", "", fmt.Sprintf("a line is longer than %s", sizeStr(int64(lim.MaxLine))), nil
			}
		}
		return string(d.old), string(d.new), "", nil
	}
	from := c.Path
	if c.Kind == Renamed {
		from = c.From
	}
	if old, why, err = readTextAt(r.project, from, c.OldType, lim); err != nil || why != "" {
		return "", "", why, err
	}
	new, why, err = readTextAt(r.upper, c.Path, c.Type, lim)
	return old, new, why, err
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
	return PatchContext(context.Background(), w, l, changes, PatchOptions{})
}

// PatchOptions tune a patch.
type PatchOptions struct {
	// Limits.MaxText is the largest file (either side) a patch carries.
	Limits Limits
	// Session names the session in the notes on files left out.
	Session string
}

// PatchContext is Patch, streamed: each file is read and written in turn,
// so that the patch is never whole in memory, and the work stops when ctx
// ends. A file larger than the limit (text or binary, either side) or one
// that cannot be read as it was reviewed is left out, and a comment line
// in its place (which git apply and patch skip) says so and how to take it:
//
//	# airlock: left out big.bin (added, 42949672960 bytes, sha256-sparse:…): larger than 8 MiB, the patch limit; take it with `airlock accept SESSION big.bin`
func PatchContext(ctx context.Context, w io.Writer, l Layers, changes []Change, opts PatchOptions) error {
	r, err := openRoots(l)
	if err != nil {
		return err
	}
	defer r.close()
	p := &patcher{ctx: ctx, w: w, r: r, lim: opts.Limits.withDefaults(), session: opts.Session, moved: map[string]bool{}}
	if p.session == "" {
		p.session = "SESSION"
	}
	for _, c := range changes {
		if c.Kind == Renamed {
			p.moved[c.From] = true // rename sources, not deletions
		}
	}
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := p.safely(c); err != nil {
			return err
		}
	}
	return nil
}

// safely is one turning a panic into an error.
func (p *patcher) safely(c Change) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicked(c.Path, v)
		}
	}()
	return p.one(c)
}

// patcher writes one patch.
type patcher struct {
	ctx     context.Context
	w       io.Writer
	r       *roots
	lim     Limits
	session string
	moved   map[string]bool
	buf     bytes.Buffer // one section at a time
}

type side struct {
	t    Type
	mode fs.FileMode
	data []byte
}

// leftOut is a file a patch does not carry, and why.
type leftOut struct{ why string }

func (e *leftOut) Error() string { return e.why }

// flush writes the section in buf.
func (p *patcher) flush() error {
	_, err := p.w.Write(p.buf.Bytes())
	p.buf.Reset()
	if p.buf.Cap() > 1<<20 {
		p.buf = bytes.Buffer{} // a large file's buffer goes with it
	}
	return err
}

// note writes the comment that stands for a file left out.
func (p *patcher) note(c Change, why string) error {
	desc := string(c.Kind)
	if c.Type == File || c.Type == None && c.OldType == File {
		size := c.Size
		if c.Type == None {
			size = c.OldSize
		}
		desc += fmt.Sprintf(", %d bytes", size)
	}
	if c.ContentSum != "" {
		desc += ", " + c.ContentSum
	}
	p.buf.Reset()
	fmt.Fprintf(&p.buf, "# airlock: left out %s (%s): %s; take it with `airlock accept %s %s`\n",
		quote(c.Path), desc, strings.ReplaceAll(why, "\n", " "), p.session, shellQuote(c.Path))
	return p.flush()
}

func (p *patcher) one(c Change) error {
	if c.Type == Special {
		return nil
	}
	if c.Kind == Renamed {
		return p.renamed(c)
	}
	// A deleted or replaced directory deletes every file under it; a new
	// directory in place of a file adds nothing by itself.
	if c.OldType == Dir && c.Type != Dir {
		if err := p.deleteTree(c.Path); err != nil {
			return err
		}
	}
	if c.Kind == Mode && c.Type == File && c.OldType == File {
		// Only the mode: nothing to read.
		p.buf.Reset()
		a, b := quote("a/"+c.Path), quote("b/"+c.Path)
		fmt.Fprintf(&p.buf, "diff --git %s %s\nold mode %s\nnew mode %s\n", a, b, gitMode(File, c.OldMode), gitMode(File, c.Mode))
		return p.flush()
	}
	old, err := p.load(p.r.project, c.Path, c.OldType, c.OldMode)
	if err == nil {
		var nw *side
		if nw, err = p.load(p.r.upper, c.Path, c.Type, c.Mode); err == nil {
			return p.sections(c.Path, old, nw)
		}
	}
	var lo *leftOut
	if errors.As(err, &lo) {
		return p.note(c, lo.why)
	}
	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	return p.note(c, fmt.Sprintf("it could not be read as it was reviewed (%v): look at the diff again", err))
}

func (p *patcher) sections(path string, old, nw *side) error {
	if old != nil && nw != nil && gitMode(old.t, old.mode) != gitMode(nw.t, nw.mode) && old.t != nw.t {
		// git records a type change as a deletion plus an addition.
		if err := p.section(path, old, nil); err != nil {
			return err
		}
		return p.section(path, nil, nw)
	}
	if old == nil && nw == nil {
		return nil
	}
	return p.section(path, old, nw)
}

// load reads one side of a change for a patch: nil for a type without
// content, a *leftOut error for a file over the limit.
func (p *patcher) load(root *confined.Root, rel string, t Type, m fs.FileMode) (*side, error) {
	if root == nil && t != None && t != Dir {
		return nil, errNoProject
	}
	switch t {
	case File:
		fd, st, err := root.OpenFd(rel)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		if st.Size > p.lim.MaxText {
			return nil, &leftOut{fmt.Sprintf("larger than %s, the patch limit", sizeStr(p.lim.MaxText))}
		}
		b, grew, err := preadAll(fd, st.Size, p.lim.MaxText)
		if err != nil {
			return nil, err
		}
		if grew {
			return nil, &leftOut{fmt.Sprintf("it grew past %s, the patch limit, while it was read", sizeStr(p.lim.MaxText))}
		}
		return &side{t, m, b}, nil
	case Symlink:
		s, err := root.Readlink(rel)
		return &side{t, m, []byte(s)}, err
	}
	return nil, nil
}

// renamed writes a git rename, with the edits if any.
func (p *patcher) renamed(c Change) error {
	od, err := p.load(p.r.project, c.From, File, c.OldMode)
	var nd *side
	if err == nil {
		nd, err = p.load(p.r.upper, c.Path, File, c.Mode)
	}
	if err != nil {
		var lo *leftOut
		if errors.As(err, &lo) {
			return p.note(c, lo.why)
		}
		if p.ctx.Err() != nil {
			return p.ctx.Err()
		}
		return p.note(c, fmt.Sprintf("it could not be read as it was reviewed (%v): look at the diff again", err))
	}
	buf := &p.buf
	buf.Reset()
	fmt.Fprintf(buf, "diff --git %s %s\n", quote("a/"+c.From), quote("b/"+c.Path))
	om, nm := gitMode(File, c.OldMode), gitMode(File, c.Mode)
	if om != nm {
		fmt.Fprintf(buf, "old mode %s\nnew mode %s\n", om, nm)
	}
	fmt.Fprintf(buf, "similarity index %d%%\nrename from %s\nrename to %s\n", c.Similarity, quoteBare(c.From), quoteBare(c.Path))
	if !bytes.Equal(od.data, nd.data) {
		fmt.Fprintf(buf, "index %s..%s\n", blobID(od.data), blobID(nd.data))
		if isBinary(od.data) || isBinary(nd.data) {
			buf.WriteString("GIT binary patch\n")
			if err := binaryLiteral(buf, nd.data); err != nil {
				return err
			}
			if err := binaryLiteral(buf, od.data); err != nil {
				return err
			}
		} else {
			from, to := quote("a/"+c.From), quote("b/"+c.Path)
			fmt.Fprintf(buf, "--- %s%s\n+++ %s%s\n", from, tabIfSpace(from), to, tabIfSpace(to))
			for _, h := range Hunks(string(od.data), string(nd.data)) {
				buf.WriteString(h.Header())
				buf.WriteByte('\n')
				writeLines(buf, h.Lines)
			}
		}
	}
	return p.flush()
}

// quoteBare quotes a name for "rename from/to" lines, which carry no a/ b/
// prefix.
func quoteBare(name string) string { return quote(name) }

// deleteTree writes deletions for every file and symlink under dir in the
// project, one at a time (the walk visits each directory's entries in
// lexical order).
func (p *patcher) deleteTree(dir string) error {
	if p.r.project == nil {
		return nil
	}
	root := filepath.Join(p.r.project.Name(), filepath.FromSlash(dir))
	return filepath.WalkDir(root, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := p.ctx.Err(); err != nil {
			return err
		}
		t := typeOf(d.Type())
		if t != File && t != Symlink {
			return nil
		}
		rel, _ := filepath.Rel(p.r.project.Name(), fp)
		rel = filepath.ToSlash(rel)
		if p.moved[rel] {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		s, err := p.load(p.r.project, rel, t, fi.Mode())
		var lo *leftOut
		if errors.As(err, &lo) {
			return p.note(Change{Path: rel, Kind: Deleted, OldType: t, OldSize: fi.Size()}, lo.why)
		}
		if err != nil {
			return err
		}
		return p.section(rel, s, nil)
	})
}

func blobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

const zeroID = "0000000000000000000000000000000000000000"

// section writes one "diff --git" section. old or nw may be nil.
func (p *patcher) section(path string, old, nw *side) error {
	buf := &p.buf
	buf.Reset()
	a, b := quote("a/"+path), quote("b/"+path)
	fmt.Fprintf(buf, "diff --git %s %s\n", a, b)
	var od, nd []byte
	oid, nid := zeroID, zeroID
	switch {
	case old == nil:
		fmt.Fprintf(buf, "new file mode %s\n", gitMode(nw.t, nw.mode))
	case nw == nil:
		fmt.Fprintf(buf, "deleted file mode %s\n", gitMode(old.t, old.mode))
	case gitMode(old.t, old.mode) != gitMode(nw.t, nw.mode):
		fmt.Fprintf(buf, "old mode %s\nnew mode %s\n", gitMode(old.t, old.mode), gitMode(nw.t, nw.mode))
	}
	if old != nil {
		od, oid = old.data, blobID(old.data)
	}
	if nw != nil {
		nd, nid = nw.data, blobID(nw.data)
	}
	if bytes.Equal(od, nd) && old != nil && nw != nil {
		return p.flush() // mode change only
	}
	binary := isBinary(od) || isBinary(nd)
	modeSuffix := ""
	if old != nil && nw != nil && gitMode(old.t, old.mode) == gitMode(nw.t, nw.mode) {
		modeSuffix = " " + gitMode(nw.t, nw.mode)
	}
	fmt.Fprintf(buf, "index %s..%s%s\n", oid, nid, modeSuffix)
	from, to := a, b
	if old == nil {
		from = "/dev/null"
	}
	if nw == nil {
		to = "/dev/null"
	}
	if binary {
		fmt.Fprintf(buf, "GIT binary patch\n")
		if err := binaryLiteral(buf, nd); err != nil {
			return err
		}
		if err := binaryLiteral(buf, od); err != nil {
			return err
		}
		return p.flush()
	}
	fmt.Fprintf(buf, "--- %s%s\n+++ %s%s\n", from, tabIfSpace(from), to, tabIfSpace(to))
	for _, h := range Hunks(string(od), string(nd)) {
		buf.WriteString(h.Header())
		buf.WriteByte('\n')
		writeLines(buf, h.Lines)
	}
	return p.flush()
}

// shellQuote quotes a path for a command line a user copies.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./+,:@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
// QuotePath quotes a path as git does in patch headers (C-style, in
// double quotes) when it holds a control character, a quote, a backslash
// or a byte outside ASCII; other paths are returned as they are.
func QuotePath(name string) string { return quote(name) }

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
