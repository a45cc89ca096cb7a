package checkpoint

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock/airlock/atomicfile"
	"golang.org/x/sys/unix"
)

// A restore makes every file anew: new inodes, new ctimes. Without more,
// the next Record of the restored directory (a session woken from
// hibernation, its container layer, its home) would find no stat key
// equal to the newest checkpoint's and read every file again. So Restore
// keeps the stat keys of the files it made (restored.json): the next
// Record of the same directory takes a file whose stat data equal the
// restored file's from the restored checkpoint unread, as it does a file
// unchanged since the newest checkpoint. The first Record that writes a
// checkpoint carries the keys on, and drops the file.

// restoredIndex is what the last Restore made: the target directory and
// its files, as the checkpoint has them, with their new stat keys.
type restoredIndex struct {
	Checkpoint ID               `json:"checkpoint"`
	Dev        uint64           `json:"dev"` // of the target directory
	Ino        uint64           `json:"ino"`
	Files      map[string]Entry `json:"files"` // by path beneath the target
}

func (s *Store) restoredPath() string { return filepath.Join(s.dir, "restored.json") }

// saveRestored keeps the stat keys of a finished restore into the
// directory whose stat is root. Until it returns nothing else writes the
// target (it is a new directory the caller fills before using it), so
// the keys are trusted once the racy window has passed since the last
// file was made: Restore waits it out (at most two clock ticks) rather
// than leave the newest files to be read again.
func (s *Store) saveRestored(id ID, root *unix.Stat_t, files map[string]Entry, newest int64) error {
	if wait := time.Until(time.Unix(0, newest).Add(racyWindow())); wait > 0 {
		time.Sleep(wait)
	}
	data, err := json.Marshal(restoredIndex{Checkpoint: id, Dev: root.Dev, Ino: root.Ino, Files: files})
	if err != nil {
		return err
	}
	return atomicfile.Write(s.restoredPath(), data, 0o600)
}

// loadRestored returns the files of the last restore when it was into the
// directory whose stat is root and its checkpoint is still kept (so are
// the objects its entries name); nil otherwise.
func (s *Store) loadRestored(root *unix.Stat_t) map[string]Entry {
	data, err := os.ReadFile(s.restoredPath())
	if err != nil {
		return nil
	}
	var idx restoredIndex
	if json.Unmarshal(data, &idx) != nil || idx.Dev != root.Dev || idx.Ino != root.Ino {
		return nil
	}
	if _, err := os.Stat(s.recordPath(idx.Checkpoint)); err != nil {
		return nil
	}
	return idx.Files
}

// dropRestored forgets the last restore's stat keys.
func (s *Store) dropRestored() error {
	if err := os.Remove(s.restoredPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
