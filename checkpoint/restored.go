package checkpoint

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/airlock/airlock/atomicfile"
	"golang.org/x/sys/unix"
)

// A restore makes every file anew: new inodes, new ctimes. Without more,
// the next Record of the restored directory (a session woken from
// hibernation, its container layer, its home) would find no stat key
// equal to the newest checkpoint's and read every file again. So Restore
// keeps the stat keys of the files it made (restored.keys): the next
// Record of the same directory takes a file whose stat data equal the
// restored file's from the restored checkpoint unread, as it does a file
// unchanged since the newest checkpoint. The first Record that writes a
// checkpoint carries the keys on, and drops the file.
//
// A key is 32 bytes (device, inode, ctime, and a hash of the file's
// path), not the file's entry: the entry is the restored checkpoint's,
// which the Record reads beside the newest one's, directory by
// directory (the same trees when the newest was restored, as on a wake).
// Keeping whole entries by path cost 250 bytes a file while restoring,
// and a JSON map of them twice that to write and to read back.

// restoredHeader begins restored.keys (one line of JSON); Count keys of
// 32 bytes follow, sorted.
type restoredHeader struct {
	Checkpoint ID     `json:"checkpoint"`
	Dev        uint64 `json:"dev"` // of the target directory
	Ino        uint64 `json:"ino"`
	Count      int    `json:"count"`
}

// restoredKey is the stat key of a file a restore made, and its path's
// hash (a file renamed or linked meanwhile has a new ctime anyway).
type restoredKey struct {
	Dev, Ino uint64
	Ctime    int64
	Path     uint64
}

func pathHash(rel string) uint64 {
	h := fnv.New64a()
	io.WriteString(h, rel)
	return h.Sum64()
}

func (a restoredKey) compare(b restoredKey) int {
	return cmp.Or(cmp.Compare(a.Dev, b.Dev), cmp.Compare(a.Ino, b.Ino), cmp.Compare(a.Ctime, b.Ctime), cmp.Compare(a.Path, b.Path))
}

// restoredFiles are the keys of the last restore into the directory
// being recorded, and the restored checkpoint's root.
type restoredFiles struct {
	keys []restoredKey // sorted
	root Entry
}

// has says whether the file at rel, whose stat key is key, is the one
// the restore made there, unchanged since.
func (r *restoredFiles) has(rel string, key *StatKey) bool {
	if r == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(r.keys, restoredKey{key.Dev, key.Ino, key.Ctime, pathHash(rel)}, restoredKey.compare)
	return ok
}

func (s *Store) restoredPath() string { return filepath.Join(s.dir, "restored.keys") }

// saveRestored keeps the stat keys of a finished restore into the
// directory whose stat is root. Until it returns nothing else writes the
// target (it is a new directory the caller fills before using it), so
// the keys are trusted once the racy window has passed since the last
// file was made: Restore waits it out (at most two clock ticks) rather
// than leave the newest files to be read again.
func (s *Store) saveRestored(id ID, root *unix.Stat_t, keys []restoredKey, newest int64) error {
	if wait := time.Until(time.Unix(0, newest).Add(racyWindow())); wait > 0 {
		time.Sleep(wait)
	}
	slices.SortFunc(keys, restoredKey.compare)
	head, err := json.Marshal(restoredHeader{Checkpoint: id, Dev: root.Dev, Ino: root.Ino, Count: len(keys)})
	if err != nil {
		return err
	}
	return atomicfile.WriteFrom(s.restoredPath(), 0o600, func(w io.Writer) error {
		if _, err := w.Write(append(head, '\n')); err != nil {
			return err
		}
		return binary.Write(w, binary.LittleEndian, keys)
	})
}

// loadRestored returns the files of the last restore when it was into the
// directory whose stat is root and its checkpoint is still kept (so are
// the objects its entries name); nil otherwise.
func (s *Store) loadRestored(root *unix.Stat_t) *restoredFiles {
	f, err := os.Open(s.restoredPath())
	if err != nil {
		return nil
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return nil
	}
	br := bufio.NewReader(f)
	line, err := br.ReadBytes('\n')
	var h restoredHeader
	if err != nil || json.Unmarshal(line, &h) != nil || h.Dev != root.Dev || h.Ino != root.Ino ||
		h.Count < 0 || int64(h.Count)*32 != st.Size-int64(len(line)) {
		return nil
	}
	c, err := s.readRecord(h.Checkpoint)
	if err != nil {
		return nil
	}
	keys := make([]restoredKey, h.Count)
	if binary.Read(br, binary.LittleEndian, keys) != nil || !slices.IsSortedFunc(keys, restoredKey.compare) {
		return nil
	}
	return &restoredFiles{keys: keys, root: c.Root}
}

// dropRestored forgets the last restore's stat keys (and those an
// earlier version kept, by path, in restored.json).
func (s *Store) dropRestored() error {
	for _, p := range []string{s.restoredPath(), filepath.Join(s.dir, "restored.json")} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
