// Package snapshot turns overlay upper directories into OCI layers and back,
// and keeps them in a local, content-addressed OCI image layout.
//
// An overlay upper directory records a deletion as a character device 0/0
// and a directory that hides the lower one by the xattr
// trusted.overlay.opaque=y. An OCI layer records the same as an empty file
// named .wh.NAME and an entry .wh..wh..opq in the directory. WriteLayer
// converts the first into the second; ApplyLayer has containers/storage's
// archive package (go.podman.io/storage/pkg/chrootarchive, as podman and
// buildah apply layers) convert the second back, chrooted into the target,
// so that a layer applied to a fresh upper directory gives, under the same
// lower layer, the same merged view.
//
// Layers are hostile input: a session's content is the agent's, and an
// imported archive is anyone's. The session side is read through package
// confined (beneath the directory, never through a symlink, FIFOs and
// devices never opened). Before anything reaches the target, every entry is
// checked (CheckLayer does the same for an archive being imported): names
// are relative, clean, and never go through a symlink the layer made
// earlier; hard links point at entries of the same target; there are no
// devices (FIFOs are kept: a session may make them, and nothing on the host
// opens one; sockets are not content, and a tar has none); set-id bits are
// cleared; only user.* extended attributes are
// kept; a whiteout names one path element; sizes and counts are bounded
// (Limits).
//
// Names: the OCI format reserves names that start with ".wh.", yet an agent
// may make such files. WriteLayer escapes each path element that starts
// with ".wh." or with the escape ".airlock-wh." by putting ".airlock-wh." in
// front (".wh.cfg" becomes ".airlock-wh..wh.cfg"); every other name is
// itself. ApplyLayer takes one escape off again. A whiteout of such a file
// names the escaped form (".wh..airlock-wh..wh.cfg"). Other readers (docker
// load) see the escaped names as plain files.
//
// Sparse files stay sparse: WriteLayer finds the data with SEEK_DATA and
// SEEK_HOLE and writes GNU's PAX sparse format 0.1 (the map in the entry's
// PAX records, only the data stored), which Go's archive/tar, and so Docker,
// read; ApplyLayer writes only the data regions. A 40 GB file holding a few
// bytes costs a few bytes, in the layer and on disk.
package snapshot

import (
	"errors"
	"fmt"

	"go.podman.io/storage/pkg/archive"
)

// OCI whiteout names (the library's), and the overlay's xattr.
const (
	whiteoutPrefix = archive.WhiteoutPrefix     // .wh.NAME: NAME is deleted
	whiteoutMeta   = archive.WhiteoutMetaPrefix // .wh..wh.: AUFS bookkeeping, never written
	opaqueMarker   = archive.WhiteoutOpaqueDir  // .wh..wh..opq: the directory hides the lower one
	opaqueXattr    = "trusted.overlay.opaque"
	xattrPAX       = archive.PaxSchilyXattr
	escapePrefix   = ".airlock-wh."
)

// LayerStats counts what a layer holds.
type LayerStats struct {
	Files     int   // regular files, links, FIFOs
	Dirs      int   // directories
	Whiteouts int   // deletions and opaque directories
	Bytes     int64 // file content stored (a sparse file's data only)
}

// Limits bound what one layer may hold; zero fields take the defaults.
type Limits struct {
	// Entries in the layer's tar (default DefaultEntries): a layer of
	// millions of empty files would exhaust the target's inodes.
	Entries int
	// FileSize is the apparent size of one file, holes included (default
	// DefaultFileSize).
	FileSize int64
	// Holes are the bytes of holes that lie before a sparse file's last
	// data, summed over the layer (default DefaultHoles). Applying reads
	// through them (Go's archive/tar hands them over as zeros), at memory
	// speed: about 20 s for the default.
	Holes int64
}

// The default limits.
const (
	DefaultEntries  = 1_000_000
	DefaultFileSize = 1 << 40
	DefaultHoles    = 1 << 40
)

func (l Limits) withDefaults() Limits {
	if l.Entries <= 0 {
		l.Entries = DefaultEntries
	}
	if l.FileSize <= 0 {
		l.FileSize = DefaultFileSize
	}
	if l.Holes <= 0 {
		l.Holes = DefaultHoles
	}
	return l
}

// Errors of layers that are refused. Errors about a single entry are an
// *EntryError wrapping one of them.
var (
	// ErrUnsafe: the layer holds what must never be applied (a name leaving
	// the target, a write through a symlink, a device, ...). Layers
	// WriteLayer makes never do.
	ErrUnsafe = errors.New("the layer is not safe to apply")
	// ErrLimit: the layer is larger than Limits allow.
	ErrLimit = errors.New("the layer is larger than Airlock accepts")
)

// EntryError is a refused entry of a layer.
type EntryError struct {
	Name   string // as the layer names it
	Reason string
	Err    error // ErrUnsafe or ErrLimit
}

func (e *EntryError) Error() string { return fmt.Sprintf("layer entry %q: %s", e.Name, e.Reason) }
func (e *EntryError) Unwrap() error { return e.Err }
