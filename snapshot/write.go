package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
)

// Source is a directory to put into a layer: its content goes under Prefix
// (e.g. "workspace/"; "" for the layer's root), except the paths Skip
// names (relative to Root, slash-separated; a skipped directory is skipped
// whole). Root is read confined: nothing beneath it is reached through a
// symlink.
type Source struct {
	Root   *confined.Root
	Prefix string
	Skip   func(rel string) bool
}

// WriteLayer writes the sources as one uncompressed OCI layer tar to w:
// overlay whiteouts and opaque directories become OCI whiteouts, names the
// format reserves are escaped, sparse files keep only their data, and of
// the extended attributes only user.* are written. A device node other
// than a whiteout is an error (sessions cannot make one); sockets are left
// out. The sources must not change meanwhile (the engine freezes the
// session): a file that shrinks while it is read is an error.
func WriteLayer(w io.Writer, sources ...Source) (LayerStats, error) {
	lw := &layerWriter{w: w, tw: tar.NewWriter(w), links: map[[2]uint64]string{}, dirs: map[string]bool{}, buf: make([]byte, 1<<20)}
	for _, src := range sources {
		if err := lw.prefix(src.Prefix); err != nil {
			return lw.st, err
		}
		if err := lw.dir(src, src.Root, ""); err != nil {
			return lw.st, err
		}
	}
	return lw.st, lw.tw.Close()
}

type layerWriter struct {
	w     io.Writer
	tw    *tar.Writer
	links map[[2]uint64]string // first name of each file with several links
	dirs  map[string]bool      // prefix directories written
	buf   []byte
	st    LayerStats
}

// epoch is the time of entries the layer makes up (prefix directories,
// whiteouts): the same content gives the same layer, and so one stored
// blob.
var epoch = time.Unix(0, 0)

// prefix writes the prefix's directories, unless an earlier source did, so
// that readers create them with sane modes.
func (lw *layerWriter) prefix(prefix string) error {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return nil
	}
	parts := strings.Split(p, "/")
	for i := range parts {
		name := strings.Join(parts[:i+1], "/") + "/"
		if lw.dirs[name] {
			continue
		}
		lw.dirs[name] = true
		if err := lw.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return nil
}

// keepXattr says which extended attributes a layer carries: the user's,
// not those an overlay mounted with userxattr would obey.
func keepXattr(name string) bool {
	return strings.HasPrefix(name, "user.") && !strings.HasPrefix(name, "user.overlay.")
}

// dir writes the entries of d (the source's directory rel) in name order.
func (lw *layerWriter) dir(src Source, d *confined.Root, rel string) error {
	names, err := d.ReadDirNames("", 0)
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, n := range names {
		r := path.Join(rel, n)
		if src.Skip != nil && src.Skip(r) {
			continue
		}
		if err := lw.entry(src, d, n, r); err != nil {
			return err
		}
	}
	return nil
}

func (lw *layerWriter) entry(src Source, d *confined.Root, n, rel string) error {
	fi, err := d.Lstat(n)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // gone while walking: only when not frozen
	}
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	name := strings.TrimLeft(src.Prefix, "/") + escapePath(rel)
	hdr := &tar.Header{
		Name:    name,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()),
		Format:  tar.FormatPAX,
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return lw.directory(src, d, n, rel, hdr)
	case unix.S_IFREG:
		return lw.file(d, n, hdr)
	case unix.S_IFLNK:
		if hdr.Linkname, err = d.Readlink(n); err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			return fmt.Errorf("%s is a device node: sessions cannot make devices, and snapshots do not carry them", path.Join(d.Name(), n))
		}
		// An overlay whiteout: the lower file is deleted.
		lw.st.Whiteouts++
		dir, base := path.Split(name)
		return lw.tw.WriteHeader(&tar.Header{Name: dir + whiteoutPrefix + base, Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX})
	case unix.S_IFSOCK:
		return nil // a socket is not content
	default:
		return fmt.Errorf("%s is a device node: sessions cannot make devices, and snapshots do not carry them", path.Join(d.Name(), n))
	}
	lw.st.Files++
	return lw.tw.WriteHeader(hdr)
}

func (lw *layerWriter) directory(src Source, d *confined.Root, n, rel string, hdr *tar.Header) error {
	sub, err := d.OpenDir(n)
	if err != nil {
		return err
	}
	defer sub.Close()
	xs, err := sub.Xattrs(func(k string) bool { return keepXattr(k) || k == opaqueXattr }, maxXattrs)
	if err != nil {
		return fmt.Errorf("%s: %w", sub.Name(), err)
	}
	opaque := xs[opaqueXattr] == "y"
	delete(xs, opaqueXattr)
	hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
	setXattrs(hdr, xs)
	if err := lw.tw.WriteHeader(hdr); err != nil {
		return err
	}
	lw.st.Dirs++
	if opaque {
		lw.st.Whiteouts++
		if err := lw.tw.WriteHeader(&tar.Header{Name: hdr.Name + opaqueMarker, Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return lw.dir(src, sub, rel)
}

func (lw *layerWriter) file(d *confined.Root, n string, hdr *tar.Header) error {
	fd, st, err := d.OpenFd(n)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	lw.st.Files++
	// The open file's own stat: what is read is what is described.
	hdr.Mode, hdr.Uid, hdr.Gid = int64(st.Mode&0o7777), int(st.Uid), int(st.Gid)
	hdr.ModTime = time.Unix(st.Mtim.Unix())
	if st.Nlink > 1 {
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := lw.links[key]; ok {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			return lw.tw.WriteHeader(hdr)
		}
		lw.links[key] = hdr.Name
	}
	xs, err := confined.Xattrs(fd, keepXattr, maxXattrs)
	if err != nil {
		return fmt.Errorf("%s: %w", path.Join(d.Name(), n), err)
	}
	var regions []region
	if st.Size > 0 && st.Blocks*512 < st.Size {
		if regions, err = dataRegions(fd, st.Size); err != nil {
			return fmt.Errorf("%s: %w", path.Join(d.Name(), n), err)
		}
	}
	if regions != nil {
		if err := lw.tw.Flush(); err != nil {
			return err
		}
		data, err := writeSparse(lw.w, sparseHeader{name: hdr.Name, mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime,
			size: st.Size, regions: regions, xattrs: xs}, fd, lw.buf)
		lw.st.Bytes += data
		return err
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	setXattrs(hdr, xs)
	if err := lw.tw.WriteHeader(hdr); err != nil {
		return err
	}
	for off := int64(0); off < st.Size; {
		k, err := unix.Pread(fd, lw.buf[:min(int64(len(lw.buf)), st.Size-off)], off)
		if err != nil {
			return fmt.Errorf("read %s: %w", path.Join(d.Name(), n), err)
		}
		if k == 0 {
			return fmt.Errorf("%s shrank while it was read (%d of %d bytes): it was written during the snapshot", path.Join(d.Name(), n), off, st.Size)
		}
		if _, err := lw.tw.Write(lw.buf[:k]); err != nil {
			return err
		}
		off += int64(k)
	}
	lw.st.Bytes += st.Size
	return nil
}

func setXattrs(hdr *tar.Header, xs map[string]string) {
	for k, v := range xs {
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords[xattrPAX+k] = v
	}
}
