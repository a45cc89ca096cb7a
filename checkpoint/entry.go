package checkpoint

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"time"
)

// Type is what an entry of a checkpoint is.
type Type string

// The types of entries. A whiteout is the overlay's record of a deletion
// (a 0/0 character device in the upper directory): the lower layer's file
// of that name is gone.
const (
	File     Type = "file"
	Dir      Type = "dir"
	Symlink  Type = "symlink"
	FIFO     Type = "fifo"
	Whiteout Type = "whiteout"
)

// Region is a stretch of a sparse file that holds data.
type Region struct {
	Off int64 `json:"o"`
	Len int64 `json:"l"`
}

// Entry is one name in a checkpointed directory. Trees are stored as JSON,
// with short keys: a checkpoint writes the trees of every directory on the
// way to a changed file.
type Entry struct {
	Name  string `json:"n"`
	Type  Type   `json:"t"`
	Mode  uint32 `json:"m"` // permission, set-id and sticky bits
	UID   int    `json:"u"`
	GID   int    `json:"g"`
	Mtime int64  `json:"mt"` // nanoseconds since the epoch
	// Size is a file's apparent size (holes included).
	Size int64 `json:"s,omitempty"`
	// Digest names a file's content, or a directory's tree, in the
	// store. A sparse file's digest covers its size, its regions and
	// their data (see Sparse).
	Digest string `json:"d,omitempty"`
	// Sparse says the file is kept as its data regions only (Regions; an
	// empty list is a file that is all hole).
	Sparse  bool     `json:"sp,omitempty"`
	Regions []Region `json:"r,omitempty"`
	// Target is a symlink's target, as written (never resolved).
	Target string `json:"l,omitempty"`
	// HardLink is the path (from the checkpoint's root) of the first
	// name of a file with several names in the checkpoint; this entry
	// is another name of it (Digest and the rest are the same).
	HardLink string `json:"h,omitempty"`
	// Opaque: the directory hides the lower layer's directory of the
	// same name (trusted.overlay.opaque=y).
	Opaque bool `json:"o,omitempty"`
	// Xattrs are the user.* extended attributes (values as bytes).
	Xattrs map[string][]byte `json:"x,omitempty"`
	// Stat is what Record compares to tell an unchanged file without
	// reading it; nil means "read it next time" (a file changed in the
	// same instant as the checkpoint, or one that was unstable).
	Stat *StatKey `json:"k,omitempty"`
}

// StatKey is the stat data of a file when it was read. Mode, size and
// mtime are the entry's own; ctime changes on every write, chmod, chown,
// xattr change and link count change, and device and inode tell a file
// replaced by another (a rename over it) apart.
type StatKey struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Ctime int64  `json:"c"`
}

// ModTime is the entry's modification time.
func (e *Entry) ModTime() time.Time { return time.Unix(0, e.Mtime) }

// sameAs says whether two entries describe the same thing (type, content,
// metadata), whatever their stat keys: what Diff reports as unchanged.
func (e *Entry) sameAs(o *Entry) bool {
	return e.Type == o.Type && e.Mode == o.Mode && e.UID == o.UID && e.GID == o.GID && e.Mtime == o.Mtime &&
		e.Size == o.Size && e.Digest == o.Digest && e.Sparse == o.Sparse && slices.Equal(e.Regions, o.Regions) &&
		e.Target == o.Target && e.HardLink == o.HardLink && e.Opaque == o.Opaque &&
		maps.EqualFunc(e.Xattrs, o.Xattrs, bytes.Equal)
}

// SameAs says whether two entries describe the same thing (type,
// content — a directory's tree —, metadata), whatever their stat keys.
func (e *Entry) SameAs(o *Entry) bool { return e.sameAs(o) }

// tree is a directory's entries in name order (strictly increasing by
// bytes), as stored: readTree refuses a tree out of order, so a name is
// found by binary search and two trees are compared by one merge of
// their lists, with no map of either (a directory of 200,000 names made
// two maps of some 20 MB each).
type tree struct {
	Entries []Entry `json:"e"`
	// Parts, in a large directory's tree, list the trees its entries
	// are stored in (Entries is then nil; see parts.go).
	Parts []part `json:"p,omitempty"`
}

// find is the entry named name, or nil (t may be nil: no tree).
func (t *tree) find(name string) *Entry {
	if t == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(t.Entries, name, func(e Entry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return nil
	}
	return &t.Entries[i]
}

// inOrder says whether t's names strictly increase.
func (t *tree) inOrder() bool {
	for i := 1; i < len(t.Entries); i++ {
		if t.Entries[i-1].Name >= t.Entries[i].Name {
			return false
		}
	}
	return true
}
