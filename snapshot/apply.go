package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/airlock/airlock/confined"
	"go.podman.io/storage/pkg/archive"
	"go.podman.io/storage/pkg/chrootarchive"
	"go.podman.io/storage/pkg/reexec"
	"golang.org/x/sys/unix"
)

// Target says where ApplyLayer puts the entries under Prefix of a layer:
// into Root, without the prefix. Entries matching Skip (relative to the
// prefix) are left out. Root should be fresh (an empty upper directory):
// what it holds already is not checked.
type Target struct {
	Root   *confined.Root
	Prefix string
	Skip   func(rel string) bool
}

// Init runs the layer applier when this process is one: ApplyLayer
// re-executes the program's own binary, which then chroots into the
// target (containers/storage's reexec). Every main that can apply layers
// (the engine's) calls it first and returns at once when it returns true.
func Init() bool { return reexec.Init() }

// ApplyLayer extracts an OCI layer onto an overlay upper directory: files
// keep their modes (set-id bits cleared), owners, times and user.*
// extended attributes, OCI whiteouts become overlay whiteouts, escaped
// names get their real names. open is called for each pass over the layer:
// once, or twice when the layer holds sparse files.
//
// Every entry is checked first (see CheckLayer); a refused one stops the
// application with an *EntryError (ErrUnsafe or ErrLimit), possibly after
// earlier entries were written: the caller discards the target. The checked
// entries are applied by containers/storage's chrootarchive, in a child
// process chrooted into the target. What it cannot do is done here,
// beneath the confined root: it writes every byte of a file, holes
// included, so a sparse file reaches it empty and its data regions are
// written after; and it takes every .wh. name for a whiteout, so escaped
// names are renamed after.
func ApplyLayer(open func() (io.ReadCloser, error), t Target, lim Limits) (LayerStats, error) {
	a := &applier{t: t, lim: lim, untar: chrootUntar}
	return a.apply(open)
}

type applier struct {
	t   Target
	lim Limits
	// untar applies a checked, plain tar to the directory dest: the
	// library, chrooted (tests that fuzz use it in-process).
	untar func(r io.Reader, dest string) error
}

// chrootUntar runs the library's chrooted extraction. dest names the
// target through this process's descriptor of it, resolved here (the
// library opens it before it starts the child), never by a path that a
// session could redirect.
func chrootUntar(r io.Reader, dest string) (err error) {
	defer func() {
		// reexec panics when the program's main did not call Init.
		if p := recover(); p != nil {
			err = fmt.Errorf("this program cannot apply layers: %v", p)
		}
	}()
	return chrootarchive.UntarUncompressed(r, dest, &archive.TarOptions{WhiteoutFormat: archive.OverlayWhiteoutFormat})
}

// result is what the first pass found for the passes after it.
type result struct {
	stats   LayerStats
	sparse  bool
	escaped []string // entries (and whiteouts' victims) with an escaped name
}

func (a *applier) apply(open func() (io.ReadCloser, error)) (LayerStats, error) {
	res, err := a.first(open)
	if err != nil {
		return res.stats, err
	}
	if res.sparse {
		if err := a.fill(open); err != nil {
			return res.stats, err
		}
	}
	return res.stats, a.rename(res.escaped)
}

// first checks the layer and has the library apply what passes, through
// a pipe.
func (a *applier) first(open func() (io.ReadCloser, error)) (result, error) {
	src, err := open()
	if err != nil {
		return result{}, err
	}
	defer src.Close()
	// An OS pipe: the child reads it as its standard input, with no copy
	// in between; a large one, for fewer switches between the two.
	pr, pw, err := os.Pipe()
	if err != nil {
		return result{}, err
	}
	unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, 1<<20)
	var res result
	filtered := make(chan error, 1)
	go func() {
		var err error
		res, err = a.filter(src, pw)
		pw.Close() // the child sees the end (cut short after a refusal)
		filtered <- err
	}()
	uerr := a.untar(pr, fmt.Sprintf("/proc/self/fd/%d", a.t.Root.Fd()))
	pr.Close() // a child that stopped early: the filter's writes fail
	if ferr := <-filtered; ferr != nil && (uerr == nil || !errors.Is(ferr, unix.EPIPE)) {
		return res, ferr // a refusal, or the layer's own read error
	}
	if uerr != nil {
		if errors.Is(uerr, unix.ENOSPC) {
			return res, fmt.Errorf("apply the layer: %w", unix.ENOSPC)
		}
		return res, fmt.Errorf("apply the layer: %w", uerr)
	}
	return res, nil
}

// filter reads the layer, checks every entry, and writes those of the
// target as a plain tar with names beneath it: only the fields and
// records the rules let through, a sparse file as an empty one. It reads
// src to its end, so that a digest-checking reader checks it all.
func (a *applier) filter(src io.Reader, w io.Writer) (result, error) {
	c := newChecker(a.lim, a.t.Prefix, a.t.Skip)
	tr := tar.NewReader(src)
	tw := tar.NewWriter(w)
	buf := make([]byte, 1<<20)
	var res result
	seen := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, fmt.Errorf("%w: the layer is not a readable tar: %v", ErrUnsafe, err)
		}
		e, err := c.check(hdr)
		if err != nil {
			return res, err
		}
		if e == nil {
			continue
		}
		if p := e.escaped(); p != "" && !seen[p] {
			seen[p] = true
			res.escaped = append(res.escaped, p)
		}
		out := &tar.Header{Name: e.rel, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: e.mtime, AccessTime: e.mtime, Format: tar.FormatPAX}
		setXattrs(out, e.xattrs)
		switch e.kind {
		case kindFile:
			out.Typeflag = tar.TypeReg
			if e.sparse == nil {
				out.Size = e.size
			} else {
				res.sparse = true
			}
		case kindDir:
			out.Typeflag, out.Name = tar.TypeDir, e.rel+"/"
		case kindSymlink:
			out.Typeflag, out.Linkname = tar.TypeSymlink, e.link
		case kindLink:
			out.Typeflag, out.Linkname = tar.TypeLink, e.link
		case kindFifo:
			out.Typeflag = tar.TypeFifo
		case kindWhiteout, kindOpaque:
			out.Typeflag, out.Mode = tar.TypeReg, 0
		}
		if err := tw.WriteHeader(out); err != nil {
			return res, err
		}
		if out.Size > 0 {
			if _, err := io.CopyBuffer(tw, io.LimitReader(tr, out.Size), buf); err != nil {
				return res, fmt.Errorf("read the layer: %w", err)
			}
		}
	}
	res.stats = c.stats
	if err := tw.Close(); err != nil {
		return res, err
	}
	// The rest (the tar's padding), so that a checking reader sees it all.
	if _, err := io.Copy(io.Discard, src); err != nil {
		return res, err
	}
	return res, nil
}

// fill writes the data of the layer's sparse files, which the first pass
// applied empty: only the data regions, so the holes stay holes.
func (a *applier) fill(open func() (io.ReadCloser, error)) error {
	src, err := open()
	if err != nil {
		return err
	}
	defer src.Close()
	c := newChecker(a.lim, a.t.Prefix, a.t.Skip)
	tr := tar.NewReader(src)
	buf := make([]byte, 1<<20)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: the layer is not a readable tar: %v", ErrUnsafe, err)
		}
		e, err := c.check(hdr)
		if err != nil {
			return err
		}
		if e == nil || e.sparse == nil {
			continue
		}
		if err := a.fillFile(tr, e, buf); err != nil {
			return fmt.Errorf("write %s: %w", e.rel, err)
		}
	}
	_, err = io.Copy(io.Discard, src)
	return err
}

func (a *applier) fillFile(tr *tar.Reader, e *entry, buf []byte) error {
	fd, _, err := a.t.Root.OpenWritable(e.rel)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var pos int64 // in the file as tr reads it: holes come as zeros
	for _, r := range e.sparse {
		if _, err := io.CopyBuffer(io.Discard, io.LimitReader(tr, r.off-pos), buf); err != nil {
			return err
		}
		for off := r.off; off < r.off+r.len; {
			n, err := io.ReadFull(tr, buf[:min(int64(len(buf)), r.off+r.len-off)])
			if err != nil {
				return err
			}
			if _, err := unix.Pwrite(fd, buf[:n], off); err != nil {
				return err
			}
			off += int64(n)
		}
		pos = r.off + r.len
	}
	if err := unix.Ftruncate(fd, e.size); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.mtime.UnixNano()), unix.NsecToTimespec(e.mtime.UnixNano())}
	return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
}

// rename gives escaped names their real names: deepest first (a
// directory's path stays valid until its entries are done), and at one
// depth the shortest first (".airlock-wh..wh.x" frees its name before
// ".airlock-wh..airlock-wh..wh.x" takes it). The parent directory keeps
// its times.
func (a *applier) rename(escaped []string) error {
	slices.SortFunc(escaped, func(x, y string) int {
		if dx, dy := strings.Count(x, "/"), strings.Count(y, "/"); dx != dy {
			return dy - dx
		}
		if len(x) != len(y) {
			return len(x) - len(y)
		}
		return strings.Compare(x, y)
	})
	for _, p := range escaped {
		dir, base := path.Split(p)
		name, _ := unescapeName(base)
		d := a.t.Root
		if dir != "" {
			var err error
			if d, err = a.t.Root.OpenDir(strings.TrimSuffix(dir, "/")); err != nil {
				return err
			}
		}
		err := renameKeepingTimes(d, base, name)
		if d != a.t.Root {
			d.Close()
		}
		if err != nil {
			return fmt.Errorf("give %s its name: %w", p, err)
		}
	}
	return nil
}

func renameKeepingTimes(d *confined.Root, from, to string) error {
	var st unix.Stat_t
	if err := unix.Fstat(d.Fd(), &st); err != nil {
		return err
	}
	if err := unix.Renameat2(d.Fd(), from, d.Fd(), to, unix.RENAME_NOREPLACE); err != nil {
		return err
	}
	return unix.UtimesNanoAt(d.Fd(), "", []unix.Timespec{st.Atim, st.Mtim}, unix.AT_EMPTY_PATH)
}
