// Package snapshot turns overlay upper directories into OCI layers and back,
// and keeps them in a local, content-addressed OCI image layout.
//
// An overlay upper directory records a deletion as a character device 0/0
// and a directory that hides the lower one by the xattr
// trusted.overlay.opaque=y. An OCI layer records the same as an empty file
// named .wh.NAME and an entry .wh..wh..opq in the directory. WriteLayer
// converts the first into the second, ApplyLayer the second into the first,
// so that a layer applied to a fresh upper directory gives, under the same
// lower layer, the same merged view.
package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// OCI whiteout names.
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
	xattrPAX       = "SCHILY.xattr."
)

// Source is a directory to put into a layer: its content goes under Prefix
// (e.g. "workspace/"; "" for the layer's root), except the paths Skip
// names (relative to Dir, slash-separated; a skipped directory is skipped
// whole).
type Source struct {
	Dir    string
	Prefix string
	Skip   func(rel string) bool
}

// LayerStats counts what a layer holds.
type LayerStats struct {
	Files     int   // regular files, links, devices
	Dirs      int   // directories
	Whiteouts int   // deletions and opaque directories
	Bytes     int64 // file content
}

// WriteLayer writes the sources as one uncompressed OCI layer tar to w.
func WriteLayer(w io.Writer, sources ...Source) (LayerStats, error) {
	tw := tar.NewWriter(w)
	var st LayerStats
	links := map[[2]uint64]string{}
	dirs := map[string]bool{}
	buf := make([]byte, 1<<20)
	for _, src := range sources {
		if err := writeTree(tw, src, links, dirs, buf, &st); err != nil {
			return st, err
		}
	}
	return st, tw.Close()
}

func writeTree(tw *tar.Writer, src Source, links map[[2]uint64]string, dirs map[string]bool, buf []byte, st *LayerStats) error {
	if src.Prefix != "" {
		// The prefix directories themselves (unless an earlier source had
		// them), so that readers create them with sane modes.
		// They take a fixed time: the same content gives the same layer,
		// and so one stored blob.
		mtime := time.Unix(0, 0)
		parts := strings.Split(strings.Trim(src.Prefix, "/"), "/")
		for i := range parts {
			name := strings.Join(parts[:i+1], "/") + "/"
			if dirs[name] {
				continue
			}
			dirs[name] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
	}
	return filepath.WalkDir(src.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != src.Dir {
				return nil // gone while walking: only when not frozen
			}
			return err
		}
		if p == src.Dir {
			return nil
		}
		rel := filepath.ToSlash(p[len(src.Dir)+1:])
		if src.Skip != nil && src.Skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		name := src.Prefix + rel
		var sys unix.Stat_t
		if err := unix.Lstat(p, &sys); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
		hdr := &tar.Header{
			Name:    name,
			Mode:    int64(sys.Mode & 0o7777),
			Uid:     int(sys.Uid),
			Gid:     int(sys.Gid),
			ModTime: time.Unix(sys.Mtim.Sec, sys.Mtim.Nsec),
			Format:  tar.FormatPAX,
		}
		switch sys.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if sys.Rdev == 0 {
				// An overlay whiteout: the lower file is deleted.
				st.Whiteouts++
				return tw.WriteHeader(&tar.Header{Name: path.Join(path.Dir(name), whiteoutPrefix+path.Base(name)), Typeflag: tar.TypeReg, Mode: 0o600, ModTime: hdr.ModTime, Format: tar.FormatPAX})
			}
			hdr.Typeflag, hdr.Devmajor, hdr.Devminor = tar.TypeChar, int64(unix.Major(sys.Rdev)), int64(unix.Minor(sys.Rdev))
		case unix.S_IFBLK:
			hdr.Typeflag, hdr.Devmajor, hdr.Devminor = tar.TypeBlock, int64(unix.Major(sys.Rdev)), int64(unix.Minor(sys.Rdev))
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
		case unix.S_IFSOCK:
			return nil // a socket is not content
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case unix.S_IFDIR:
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
			dirs[hdr.Name] = true
		case unix.S_IFREG:
			key := [2]uint64{sys.Dev, sys.Ino}
			if sys.Nlink > 1 {
				if first, ok := links[key]; ok {
					hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
					st.Files++
					return tw.WriteHeader(hdr)
				}
				links[key] = name
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, sys.Size
		}
		opaque := false
		if xs, err := xattrs(p); err != nil {
			return err
		} else {
			for k, v := range xs {
				if strings.HasPrefix(k, "trusted.overlay.") {
					opaque = opaque || (k == opaqueXattr && v == "y")
					continue // overlay's own bookkeeping, never carried
				}
				if hdr.PAXRecords == nil {
					hdr.PAXRecords = map[string]string{}
				}
				hdr.PAXRecords[xattrPAX+k] = v
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			st.Dirs++
			if opaque {
				st.Whiteouts++
				return tw.WriteHeader(&tar.Header{Name: name + "/" + opaqueMarker, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: hdr.ModTime, Format: tar.FormatPAX})
			}
		case tar.TypeReg:
			st.Files++
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			n, err := io.CopyBuffer(tw, io.LimitReader(f, hdr.Size), buf)
			f.Close()
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			if n < hdr.Size {
				return fmt.Errorf("%s shrank while it was read (%d of %d bytes): it was written during the snapshot", p, n, hdr.Size)
			}
			st.Bytes += n
		default:
			st.Files++
		}
		return nil
	})
}

// xattrs lists a file's extended attributes (not following symlinks).
func xattrs(p string) (map[string]string, error) {
	size, err := unix.Llistxattr(p, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOENT) {
			err = nil
		}
		return nil, err
	}
	names := make([]byte, size)
	size, err = unix.Llistxattr(p, names)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, k := range strings.Split(strings.TrimRight(string(names[:size]), "\x00"), "\x00") {
		if k == "" {
			continue
		}
		v := make([]byte, 256)
		for {
			n, err := unix.Lgetxattr(p, k, v)
			if errors.Is(err, unix.ERANGE) {
				v = make([]byte, len(v)*4)
				continue
			}
			if err != nil {
				if errors.Is(err, unix.ENODATA) {
					break
				}
				return nil, fmt.Errorf("read xattr %s of %s: %w", k, p, err)
			}
			out[k] = string(v[:n])
			break
		}
	}
	return out, nil
}

// Target says where ApplyLayer puts the entries under Prefix of a layer:
// into Dir, without the prefix. Entries matching Skip (relative to the
// prefix) are left out.
type Target struct {
	Prefix string
	Dir    string
	Skip   func(rel string) bool
}

// ErrUnsafe is wrapped by ApplyLayer's errors for a layer that tries to
// write outside its target.
var ErrUnsafe = errors.New("the layer is not safe to apply")

// ApplyLayer extracts an OCI layer onto overlay upper directories: files
// keep their modes, owners, times and extended attributes, OCI whiteouts
// become overlay whiteouts. Entries that no target takes are read past.
// It refuses names that leave their target, directly or through a
// symbolic link.
func ApplyLayer(r io.Reader, targets ...Target) (LayerStats, error) {
	tr := tar.NewReader(r)
	var st LayerStats
	type dirTime struct {
		path string
		t    time.Time
	}
	var dirs []dirTime
	safe := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read the layer: %w", err)
		}
		name := path.Clean(strings.TrimLeft(hdr.Name, "/"))
		if name == "." {
			continue
		}
		if name == ".." || strings.HasPrefix(name, "../") {
			return st, fmt.Errorf("%w: entry %q leaves the layer's root", ErrUnsafe, hdr.Name)
		}
		var t *Target
		var rel string
		for i := range targets {
			p := strings.Trim(targets[i].Prefix, "/")
			if p == "" {
				t, rel = &targets[i], name
				break
			}
			if r, ok := strings.CutPrefix(name, p+"/"); ok {
				t, rel = &targets[i], r
				break
			}
		}
		if t == nil || (t.Skip != nil && t.Skip(rel)) {
			continue
		}
		dst := filepath.Join(t.Dir, filepath.FromSlash(rel))
		parent := filepath.Dir(dst)
		if err := ensureDir(t.Dir, parent, safe); err != nil {
			return st, err
		}
		base := path.Base(rel)
		switch {
		case base == opaqueMarker:
			if err := unix.Lsetxattr(parent, opaqueXattr, []byte("y"), 0); err != nil {
				return st, fmt.Errorf("mark %s opaque: %w", parent, err)
			}
			st.Whiteouts++
			continue
		case strings.HasPrefix(base, whiteoutPrefix):
			victim := filepath.Join(parent, base[len(whiteoutPrefix):])
			if err := os.RemoveAll(victim); err != nil {
				return st, err
			}
			if err := unix.Mknod(victim, unix.S_IFCHR, 0); err != nil {
				return st, fmt.Errorf("write the whiteout %s: %w", victim, err)
			}
			ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
			unix.UtimesNanoAt(unix.AT_FDCWD, victim, ts, unix.AT_SYMLINK_NOFOLLOW)
			st.Whiteouts++
			continue
		}
		if hdr.Typeflag != tar.TypeDir {
			if fi, err := os.Lstat(dst); err == nil && (!fi.IsDir() || hdr.Typeflag != tar.TypeDir) {
				if err := os.RemoveAll(dst); err != nil {
					return st, err
				}
			}
		}
		mode := uint32(hdr.Mode & 0o7777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if fi, err := os.Lstat(dst); err == nil && !fi.IsDir() {
				os.Remove(dst)
			}
			if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return st, err
			}
			safe[dst] = true
			dirs = append(dirs, dirTime{dst, hdr.ModTime})
			st.Dirs++
		case tar.TypeReg, tar.TypeRegA:
			f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return st, err
			}
			n, err := io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return st, fmt.Errorf("write %s: %w", dst, err)
			}
			st.Files++
			st.Bytes += n
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, dst); err != nil {
				return st, err
			}
			st.Files++
		case tar.TypeLink:
			lname := path.Clean(strings.TrimLeft(hdr.Linkname, "/"))
			p := strings.Trim(t.Prefix, "/")
			lrel, ok := lname, true
			if p != "" {
				lrel, ok = strings.CutPrefix(lname, p+"/")
			}
			if !ok {
				return st, fmt.Errorf("%w: hard link %q points outside its part of the layer", ErrUnsafe, hdr.Name)
			}
			src := filepath.Join(t.Dir, filepath.FromSlash(lrel))
			if err := ensureDir(t.Dir, filepath.Dir(src), safe); err != nil {
				return st, err
			}
			if err := os.Link(src, dst); err != nil {
				return st, err
			}
			st.Files++
			continue // the link shares the first name's metadata
		case tar.TypeFifo:
			if err := unix.Mknod(dst, unix.S_IFIFO|mode, 0); err != nil {
				return st, err
			}
			st.Files++
		case tar.TypeChar, tar.TypeBlock:
			kind := uint32(unix.S_IFCHR)
			if hdr.Typeflag == tar.TypeBlock {
				kind = unix.S_IFBLK
			}
			if err := unix.Mknod(dst, kind|mode, int(unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor)))); err != nil {
				return st, err
			}
			st.Files++
		default:
			continue // pax globals and the like carry nothing to write
		}
		if err := os.Lchown(dst, hdr.Uid, hdr.Gid); err != nil {
			return st, err
		}
		for k, v := range hdr.PAXRecords {
			if name, ok := strings.CutPrefix(k, xattrPAX); ok && !strings.HasPrefix(name, "trusted.overlay.") {
				if err := unix.Lsetxattr(dst, name, []byte(v), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
					return st, fmt.Errorf("set xattr %s on %s: %w", name, dst, err)
				}
			}
		}
		if hdr.Typeflag != tar.TypeSymlink {
			// After the owner: chown clears set-id bits.
			if err := unix.Fchmodat(unix.AT_FDCWD, dst, mode, 0); err != nil {
				return st, err
			}
		}
		if hdr.Typeflag != tar.TypeDir {
			ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return st, err
			}
		}
	}
	// Directory times last: filling a directory changes its mtime.
	for i := len(dirs) - 1; i >= 0; i-- {
		ts := []unix.Timespec{unix.NsecToTimespec(dirs[i].t.UnixNano()), unix.NsecToTimespec(dirs[i].t.UnixNano())}
		unix.UtimesNanoAt(unix.AT_FDCWD, dirs[i].path, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	return st, nil
}

// ensureDir makes dir (under root) exist as a real directory, refusing a
// path through a symbolic link or a non-directory.
func ensureDir(root, dir string, safe map[string]bool) error {
	if dir == root || safe[dir] {
		return nil
	}
	if !strings.HasPrefix(dir, root+string(filepath.Separator)) {
		return fmt.Errorf("%w: %s is outside %s", ErrUnsafe, dir, root)
	}
	if err := ensureDir(root, filepath.Dir(dir), safe); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link and the layer writes through it", ErrUnsafe, dir)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory and the layer writes into it", ErrUnsafe, dir)
	}
	safe[dir] = true
	return nil
}
