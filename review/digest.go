package review

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"strconv"
	"sync"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/names"
	"golang.org/x/sys/unix"
)

// A digest names the session's side of a change exactly, so that an accept
// can take the version the user reviewed or nothing (docs/API.md):
//
//	digest  = "sha256:" + hex(SHA-256(header))
//	header  = "airlock-digest-v1\n" +
//	          "type " + TYPE + "\n" +          file, dir, symlink, special, none (deleted)
//	          "mode " + octal(MODE) + "\n" +   permission bits with setuid 04000, setgid 02000, sticky 01000; 0 for none
//	          ["from " + FROM + "\n"] +        renames only: the project path it moves from
//	          "content " + hex(CONTENT) + "\n"
//	CONTENT = SHA-256(SHA-256(block 0) || SHA-256(block 1) || ...)
//
// The blocks are the file's content (a symlink's target; nothing for the
// other types) in 1 MiB pieces, the last one shorter. Hashing block by block
// lets a hole of a sparse file cost nothing: an all-zero block's hash is
// known, so a 40 GB sparse file is digested in milliseconds.
const digestBlock = 1 << 20

var zeroBlockSum = sync.OnceValue(func() [32]byte { return sha256.Sum256(make([]byte, digestBlock)) })

// contentHash is CONTENT, fed in order.
type contentHash struct {
	outer hash.Hash
	block hash.Hash
	n     int // bytes of the current block fed so far
}

func newContentHash() *contentHash {
	return &contentHash{outer: sha256.New(), block: sha256.New()}
}

func (h *contentHash) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		k := min(len(p), digestBlock-h.n)
		h.block.Write(p[:k])
		h.n += k
		p = p[k:]
		if h.n == digestBlock {
			h.outer.Write(h.block.Sum(nil))
			h.block.Reset()
			h.n = 0
		}
	}
	return total, nil
}

// zeros feeds n zero bytes; whole blocks of them cost one precomputed hash.
func (h *contentHash) zeros(n int64) {
	var buf []byte
	for n > 0 {
		if h.n == 0 && n >= digestBlock {
			s := zeroBlockSum()
			h.outer.Write(s[:])
			n -= digestBlock
			continue
		}
		k := min(n, int64(digestBlock-h.n))
		if buf == nil {
			buf = make([]byte, digestBlock)
		}
		h.Write(buf[:k])
		n -= k
	}
}

func (h *contentHash) sum() []byte {
	if h.n > 0 {
		h.outer.Write(h.block.Sum(nil))
		h.block.Reset()
		h.n = 0
	}
	return h.outer.Sum(nil)
}

// digestMode is a mode's bits as the digest states them.
func digestMode(t Type, m fs.FileMode) uint32 {
	if t == None {
		return 0
	}
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// digestOf is the digest of c's session side with the given mode and
// content hash.
func digestOf(c *Change, mode fs.FileMode, content []byte) string {
	t := c.Type
	name := string(t)
	if t == None {
		name = "none"
	}
	// Built by hand rather than with fmt: a review digests every file.
	b := make([]byte, 0, 160+len(c.From))
	b = append(b, "airlock-digest-v1\ntype "...)
	b = append(b, name...)
	b = append(b, "\nmode "...)
	b = strconv.AppendUint(b, uint64(digestMode(t, mode)), 8)
	b = append(b, '\n')
	if c.Kind == Renamed && c.From != "" {
		b = append(b, "from "...)
		b = append(b, c.From...)
		b = append(b, '\n')
	}
	b = append(b, "content "...)
	b = hex.AppendEncode(b, content)
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// digestBytes is the digest of c with data as its content.
func digestBytes(c *Change, mode fs.FileMode, data []byte) string {
	var content [32]byte
	switch {
	case len(data) == 0:
		content = sha256.Sum256(nil)
	case len(data) <= digestBlock: // one block: CONTENT = SHA-256(SHA-256(data))
		block := sha256.Sum256(data)
		content = sha256.Sum256(block[:])
	default:
		h := newContentHash()
		h.Write(data)
		copy(content[:], h.sum())
	}
	return digestOf(c, mode, content[:])
}

// digestText records the digest of the session side as the review read it
// for its hunks (a file's text, a symlink's target), so that the digest
// names the very bytes the user is shown. A text that does not match what
// the review listed (a file whose size changed, a symlink retargeted while
// it was read) gives no digest: such a file cannot be accepted whole until
// it is reviewed again.
func (d *FileDiff) digestText(s string) {
	if d.digested {
		return
	}
	switch d.Type {
	case File:
		if int64(len(s)) == d.Size {
			d.Digest = digestBytes(&d.Change, d.Mode, []byte(s))
		}
	case Symlink:
		if s == d.Link {
			d.Digest = digestBytes(&d.Change, d.Mode, []byte(s))
		}
	default:
		return
	}
	d.digested = true
}

// digest gives d its digest unless the review already did (digestText):
// from the bytes the review holds, or read from the upper layer through
// root (confined: never through a symlink, never a FIFO or device).
func (d *FileDiff) digest(root *confined.Root) error {
	if d.digested {
		return nil
	}
	d.digested = true
	c := &d.Change
	switch c.Type {
	case File:
		if c.data != nil && c.data.hasNew {
			d.Digest = digestBytes(c, c.Mode, c.data.new)
			return nil
		}
		fd, st, err := root.OpenFd(c.Path)
		if err != nil {
			if gone(err) {
				return nil // changed since it was listed: no digest
			}
			return err
		}
		defer unix.Close(fd)
		if st.Size != c.Size || modeOf(st.Mode) != c.Mode {
			return nil
		}
		h := newContentHash()
		if err := copyHashed(-1, fd, st.Size, h, nil); err != nil {
			var ce *ChangedError
			if errors.As(err, &ce) {
				return nil
			}
			return fmt.Errorf("digest %s: %w", names.Quote(c.Path), err)
		}
		d.Digest = digestOf(c, c.Mode, h.sum())
	case Symlink:
		d.Digest = digestBytes(c, c.Mode, []byte(c.Link))
	default: // dir, special, none: type and mode only
		d.Digest = digestBytes(c, c.Mode, nil)
	}
	return nil
}

// gone reports whether a confined open failed because the path is no longer
// what the review listed (removed, or a symlink or special file now), or
// cannot be read as it is now (the session racing the read): either way
// the file gets no digest, so an accept of it is refused as changed.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) ||
		errors.Is(err, confined.ErrSymlink) || errors.Is(err, confined.ErrNotRegular) ||
		errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ELOOP)
}

// copyHashed reads size bytes of the regular file src into h and, when
// dst >= 0, writes them to dst at the same offsets, keeping holes as holes
// (neither read nor written: a hole hashes as zeros). plain, when not nil,
// is fed the content as well, holes included. A file that ends before size
// (it shrank while read) is a ChangedError.
func copyHashed(dst, src int, size int64, h *contentHash, plain hash.Hash) error {
	buf := make([]byte, digestBlock)
	// [data, hole) is the data extent at or after off, as SEEK_DATA and
	// SEEK_HOLE last said; noSeek when the filesystem cannot tell.
	var data, hole int64 = 0, 0
	noSeek := false
	feedZeros := func(n int64) {
		h.zeros(n)
		if plain != nil {
			for n > 0 {
				k := min(n, int64(len(buf)))
				clear(buf[:k])
				plain.Write(buf[:k])
				n -= k
			}
		}
	}
	for off := int64(0); off < size; {
		end := min(off+digestBlock, size)
		if !noSeek && off >= hole {
			d, err := unix.Seek(src, off, unix.SEEK_DATA)
			switch {
			case errors.Is(err, unix.ENXIO):
				data, hole = size, size // only a hole is left
			case err != nil:
				noSeek, data, hole = true, 0, size
			default:
				hl, err := unix.Seek(src, d, unix.SEEK_HOLE)
				if err != nil {
					noSeek, data, hole = true, 0, size
				} else {
					data, hole = d, hl
				}
			}
		}
		if data >= end {
			// A hole through to the end of this block.
			feedZeros(end - off)
			off = end
			continue
		}
		b := buf[:end-off]
		for got := 0; got < len(b); {
			n, err := unix.Pread(src, b[got:], off+int64(got))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return &ChangedError{}
			}
			got += n
		}
		h.Write(b)
		if plain != nil {
			plain.Write(b)
		}
		if dst >= 0 {
			if err := writeNonZero(dst, b, off); err != nil {
				return err
			}
		}
		off = end
	}
	return nil
}

// writeNonZero writes b at off in fd, leaving out its all-zero pages (the
// file is truncated to its size afterwards, so they read back as zeros).
func writeNonZero(fd int, b []byte, off int64) error {
	const page = 4096
	for i := 0; i < len(b); {
		if isZero(b[i:min(i+page, len(b))]) {
			i += page
			continue
		}
		j := i + page
		for j < len(b) && !isZero(b[j:min(j+page, len(b))]) {
			j += page
		}
		j = min(j, len(b))
		for w := i; w < j; {
			n, err := unix.Pwrite(fd, b[w:j], off+int64(w))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			w += n
		}
		i = j
	}
	return nil
}

var zeroPage [4096]byte

func isZero(b []byte) bool { return string(b) == string(zeroPage[:len(b)]) }
