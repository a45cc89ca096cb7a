package review

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
)

// Limits bound what a review reads and renders, whatever a session holds.
// The zero value means the defaults.
type Limits struct {
	// MaxText is the largest file (either side) given a text diff or put
	// in a patch; a larger one is shown like a binary, with its size and
	// its SHA-256, and a patch names it instead of carrying it.
	MaxText int64
	// MaxLine is the longest line a text diff shows; a file with a longer
	// line is shown like a binary.
	MaxLine int
	// MaxTotalText bounds the text one review diffs, over all its files
	// (both sides counted); files past it, in path order, are shown like
	// binaries with a note to diff them alone.
	MaxTotalText int64
}

// The default limits. 8 MiB of text is about 200,000 lines: more than
// anyone reads as a diff, and a few times the largest source files in big
// repositories; a larger text file is generated data, shown by size and
// digest. 64 KiB lines leave room for long generated lines (a minified
// bundle's lines can be longer: it then shows as binary), and keep lines
// that browsers' highlighters and the secret scanner's regular expressions
// choke on out of a diff. 64 MiB of text per review keeps a review's memory
// to a few hundred MiB at most.
const (
	DefaultMaxText      = 8 << 20
	DefaultMaxLine      = 64 << 10
	DefaultMaxTotalText = 64 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxText <= 0 {
		l.MaxText = DefaultMaxText
	}
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultMaxLine
	}
	if l.MaxTotalText <= 0 {
		l.MaxTotalText = DefaultMaxTotalText
	}
	return l
}

// maxPath is the longest path a review lists as a change (PATH_MAX less
// its NUL): longer ones cannot be handed to most tools, and bounding it
// bounds how deep a walk goes.
const maxPath = unix.PathMax - 1

// roots are the two sides of a review, opened once. Every read of the
// session's side goes through upper (confined: beneath the layer, never
// through a symlink, never a FIFO or device); the project's side through
// project, which is the user's own tree, confined the same way so that a
// path the session named can never lead elsewhere either.
type roots struct {
	upper   *confined.Root
	project *confined.Root // nil when the project is missing
}

func openRoots(l Layers) (*roots, error) {
	u, err := confined.OpenRoot(l.Upper)
	if err != nil {
		return nil, fmt.Errorf("open the session's layer: %w", err)
	}
	r := &roots{upper: u}
	if p, err := confined.OpenRoot(l.Project); err == nil {
		r.project = p
	}
	return r, nil
}

func (r *roots) close() {
	r.upper.Close()
	r.project.Close()
}

// hostFd is the project root's descriptor, or -1.
func (r *roots) hostFd() int {
	if r.project == nil {
		return -1
	}
	return r.project.Fd()
}

// errNoProject reads as "not found" for a missing project.
var errNoProject = fmt.Errorf("the project is missing: %w", fs.ErrNotExist)

// readTextAt reads a file's text or a symlink's target from root for a diff.
// why is set (and the text empty) when the file gets no text diff: larger
// than lim.MaxText (or grown past it while read), or a line longer than
// lim.MaxLine.
func readTextAt(root *confined.Root, rel string, t Type, lim Limits) (text, why string, err error) {
	if root == nil {
		return "", "", errNoProject
	}
	switch t {
	case Symlink:
		s, err := root.Readlink(rel)
		return s, "", err
	case File:
	default:
		return "", "", nil
	}
	fd, st, err := root.OpenFd(rel)
	if err != nil {
		return "", "", err
	}
	defer unix.Close(fd)
	if st.Size > lim.MaxText {
		return "", tooLarge(st.Size, lim), nil
	}
	b, grew, err := preadAll(fd, st.Size, lim.MaxText)
	if err != nil {
		return "", "", &confined.Error{Op: "read", Path: rel, Err: err}
	}
	if grew {
		return "", fmt.Sprintf("it grew past %s while it was read", sizeStr(lim.MaxText)), nil
	}
	if longestLine(b) > lim.MaxLine {
		return "", fmt.Sprintf("a line is longer than %s", sizeStr(int64(lim.MaxLine))), nil
	}
	return string(b), "", nil
}

func tooLarge(size int64, lim Limits) string {
	return fmt.Sprintf("larger than %s, the text diff limit", sizeStr(lim.MaxText))
}

// preadAll reads fd from offset 0: size bytes as stat'd, and what was
// appended since, up to limit bytes; grew is set when there was more.
func preadAll(fd int, size, limit int64) (b []byte, grew bool, err error) {
	b = make([]byte, 0, min(size, limit)+1)
	for {
		if int64(len(b)) > limit {
			return nil, true, nil
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Pread(fd, b[len(b):cap(b)], int64(len(b)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			return b, false, nil
		}
		b = b[:len(b)+n]
	}
}

func longestLine(b []byte) int {
	longest := 0
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return max(longest, len(b))
		}
		longest = max(longest, i)
		b = b[i+1:]
	}
	return longest
}

func sizeStr(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// sniffAt reads the first 8 KiB of a regular file to tell text from binary.
func sniffAt(root *confined.Root, rel string) (binary bool, contentType string) {
	if root == nil {
		return false, ""
	}
	fd, _, err := root.OpenFd(rel)
	if err != nil {
		return false, ""
	}
	defer unix.Close(fd)
	var buf [8192]byte
	n := 0
	for n < len(buf) {
		k, err := unix.Pread(fd, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil || k == 0 {
			break
		}
		n += k
	}
	return sniffBytes(buf[:n])
}

// readChunk is the read size of streaming reads: a review holds one or two of
// these per file it streams, never a file.
const readChunk = 64 << 10

// sparseDigestFrom is the size from which a file with holes is digested by
// its non-zero blocks: hashing a hole's zeros costs a second per GiB.
const sparseDigestFrom = 64 << 20

// Sum digests a regular file's content, streaming, beneath root:
// "sha256:<hex>", what sha256sum prints, for a file without holes or of at
// most 64 MiB; for a larger file with holes "sha256-sparse:<hex>", the
// SHA-256 of each 4 KiB block that is not all zeros (its 8-byte big-endian
// index, then the block) and then the 8-byte size, so that its cost
// follows the data, not the size (a 40 GB sparse file is hashed in
// milliseconds), and equal contents have equal digests however their holes
// lie. It reads at most the size the file had when opened.
func Sum(ctx context.Context, root *confined.Root, rel string) (string, error) {
	fd, st, err := root.OpenFd(rel)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	size := st.Size
	if size > sparseDigestFrom {
		if hole, err := unix.Seek(fd, 0, unix.SEEK_HOLE); err == nil && hole < size {
			s, err := sparseSum(ctx, fd, size)
			if err != nil {
				return "", &confined.Error{Op: "read", Path: rel, Err: err}
			}
			return "sha256-sparse:" + s, nil
		}
	}
	h := sha256.New()
	buf := make([]byte, readChunk)
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := unix.Pread(fd, buf[:min(int64(len(buf)), size-off)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", &confined.Error{Op: "read", Path: rel, Err: err}
		}
		if n == 0 {
			return "", &confined.Error{Op: "read", Path: rel, Err: errors.New("it shrank while it was read")}
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func sparseSum(ctx context.Context, fd int, size int64) (string, error) {
	const block = 4096
	h := sha256.New()
	buf := make([]byte, readChunk)
	zero := make([]byte, block)
	var idx [8]byte
	next := int64(0) // first block not yet hashed
	err := extents(fd, size, func(start, end int64) error {
		for b := max(start/block, next); b*block < end; {
			if err := ctx.Err(); err != nil {
				return err
			}
			off := b * block
			want := min(int64(len(buf)), roundUp(end, block)-off, size-off)
			n, err := unix.Pread(fd, buf[:want], off)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return errors.New("it shrank while it was read")
			}
			for k := 0; k < n; k += block {
				blk := buf[k:min(k+block, n)]
				if !bytes.Equal(blk, zero[:len(blk)]) {
					binary.BigEndian.PutUint64(idx[:], uint64(b))
					h.Write(idx[:])
					h.Write(blk)
				}
				b++
			}
			next = b
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	binary.BigEndian.PutUint64(idx[:], uint64(size))
	h.Write(idx[:])
	return hex.EncodeToString(h.Sum(nil)), nil
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// extents calls f with each data region of fd below size, in order
// (SEEK_DATA/SEEK_HOLE; the whole file where they are not supported).
func extents(fd int, size int64, f func(start, end int64) error) error {
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			return nil // only a hole is left
		}
		if err != nil {
			return f(off, size)
		}
		if data >= size {
			return nil
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil || hole > size {
			hole = size
		}
		if err := f(data, hole); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// sameFile compares two regular files' contents, streaming. Ranges that
// are holes in both are not read, so two large sparse files compare at
// the cost of their data.
func sameFile(ctx context.Context, a, b *confined.Root, arel, brel string) (bool, error) {
	if a == nil || b == nil {
		return false, nil
	}
	fa, sa, err := a.OpenFd(arel)
	if err != nil {
		return false, err
	}
	defer unix.Close(fa)
	fb, sb, err := b.OpenFd(brel)
	if err != nil {
		return false, nil // the other side is gone or not a file: not the same
	}
	defer unix.Close(fb)
	if sa.Size != sb.Size {
		return false, nil
	}
	size := sa.Size
	ba, bb := make([]byte, readChunk), make([]byte, readChunk)
	nextData := func(fd int, off int64) int64 {
		d, err := unix.Seek(fd, off, unix.SEEK_DATA)
		switch {
		case err == unix.ENXIO:
			return size
		case err != nil:
			return off // no SEEK_DATA: all data
		}
		return d
	}
	dataEnd := func(fd int, off int64) int64 {
		h, err := unix.Seek(fd, off, unix.SEEK_HOLE)
		if err != nil || h > size {
			return size
		}
		return h
	}
	for off := int64(0); off < size; {
		da, db := nextData(fa, off), nextData(fb, off)
		if start := min(da, db); start > off {
			off = start // a hole in both
			continue
		}
		// At off at least one side has data; compare up to where either
		// side's run (data or hole) ends.
		end := size
		for _, s := range []struct {
			fd   int
			data int64
		}{{fa, da}, {fb, db}} {
			if s.data == off {
				end = min(end, dataEnd(s.fd, off))
			} else {
				end = min(end, s.data)
			}
		}
		for off < end {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			want := min(int64(readChunk), end-off)
			na, err := preadFull(fa, ba[:want], off)
			if err != nil {
				return false, err
			}
			nb, err := preadFull(fb, bb[:want], off)
			if err != nil {
				return false, err
			}
			if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
				return false, nil
			}
			if na == 0 {
				return true, nil // both shrank alike
			}
			off += int64(na)
		}
	}
	return true, nil
}

func preadFull(fd int, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, nil
}

// isNotExist reports a missing entry, confined or not.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist)
}
