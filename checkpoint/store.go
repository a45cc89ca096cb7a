package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/errdefs"
	"golang.org/x/sys/unix"
)

// ID names a checkpoint of a store: 1, 2, 3, ... in the order they were
// recorded. 0 names no checkpoint (an empty directory, for Diff).
type ID uint64

func (id ID) String() string { return strconv.FormatUint(uint64(id), 10) }

// Checkpoint is a recorded state of a directory. Its record is written
// last, atomically, once everything it names is durable: a checkpoint
// that is listed is complete.
type Checkpoint struct {
	ID     ID        `json:"id"`
	Parent ID        `json:"parent,omitempty"` // the checkpoint compared against
	Time   time.Time `json:"time"`
	Label  string    `json:"label,omitempty"` // the caller's ("turn 3", "exec make")
	// Root is the directory itself: its metadata and its tree.
	Root Entry `json:"root"`
	// Unstable lists files that kept changing while they were read: each
	// holds its content of the parent checkpoint, or is left out when it
	// had none. Never part of one version and part of another.
	Unstable []string `json:"unstable,omitempty"`
	// Skipped lists what a checkpoint never holds: sockets and device
	// nodes (sessions cannot make devices).
	Skipped []string `json:"skipped,omitempty"`
	Stats   Stats    `json:"stats"`
	// Pins name who keeps this checkpoint from being pruned (a snapshot,
	// a fork). Read from the store, not part of the record.
	Pins []string `json:"-"`
}

// Stats count what a Record read and wrote: the counters the incremental
// promise is tested against.
type Stats struct {
	Entries      int           `json:"entries"`           // names in the checkpoint
	Bytes        int64         `json:"bytes"`             // apparent size of its files
	FilesRead    int           `json:"files_read"`        // files opened and read
	BytesRead    int64         `json:"bytes_read"`        // from the directory
	BytesWritten int64         `json:"bytes_written"`     // into the store (objects, trees, record)
	NewObjects   int           `json:"new_objects"`       // files and trees not stored before
	Duration     time.Duration `json:"duration_ns"`       // of the Record
	Retries      int           `json:"retries,omitempty"` // entries that changed while read, read again
}

// Store keeps the checkpoints of one directory (a session's workspace
// upper layer, its container layer, its home): a content-addressed object
// store (objects/sha256/ab/abcd...: file contents and directory trees)
// and one record per checkpoint (checkpoints/N.json). Pins live in pins/.
// A Store is safe for concurrent use; its writers also take an exclusive
// lock on the directory (flock), so two processes never interleave.
type Store struct {
	dir string
	mu  sync.Mutex
	// trees caches the trees of the last checkpoint recorded, which the
	// next Record compares against.
	trees map[string]*tree
	// noClone is set once reflinking from the recorded directory into
	// the store failed (another file system, or one without reflinks).
	noClone bool
	dirs    map[string]bool // object fan-out directories known to exist
}

// ErrCorrupt is wrapped by errors about stored data that is missing or
// does not match its digest.
var ErrCorrupt = errors.New("the checkpoint store is damaged")

// Open opens the store at dir, creating it when missing, and removes
// what an interrupted write left (temporary files; orphan objects wait
// for GC).
func Open(dir string) (*Store, error) {
	s := &Store{dir: dir, dirs: map[string]bool{}}
	for _, d := range []string{s.tmpDir(), s.recordDir(), s.pinDir(), filepath.Join(dir, "objects", "sha256")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	tmp, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return nil, err
	}
	for _, e := range tmp {
		os.Remove(filepath.Join(s.tmpDir(), e.Name()))
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) tmpDir() string    { return filepath.Join(s.dir, "tmp") }
func (s *Store) recordDir() string { return filepath.Join(s.dir, "checkpoints") }
func (s *Store) pinDir() string    { return filepath.Join(s.dir, "pins") }
func (s *Store) recordPath(id ID) string {
	return filepath.Join(s.recordDir(), id.String()+".json")
}

func (s *Store) objectPath(digest string) (string, error) {
	hexd, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexd) != 64 || strings.Trim(hexd, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%w: %q is not a digest", ErrCorrupt, digest)
	}
	return filepath.Join(s.dir, "objects", "sha256", hexd[:2], hexd), nil
}

// lock takes the store's process-wide lock (and the Store's mutex). A
// process killed while holding it releases it with its descriptors.
func (s *Store) lock() (unlock func(), err error) {
	s.mu.Lock()
	f, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		s.mu.Unlock()
		return nil, err
	}
	return func() { f.Close(); s.mu.Unlock() }, nil
}

// commit moves a synced temporary object to its path (another copy there
// already is kept).
func (s *Store) commit(tmp, p string) error {
	dir := filepath.Dir(p)
	if !s.dirs[dir] {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		s.dirs[dir] = true
	}
	if _, err := os.Stat(p); err == nil {
		return os.Remove(tmp)
	}
	return os.Rename(tmp, p)
}

// List returns the store's checkpoints, oldest first, with their pins.
func (s *Store) List() ([]Checkpoint, error) {
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	pins, err := s.pins()
	if err != nil {
		return nil, err
	}
	out := make([]Checkpoint, 0, len(ids))
	for _, id := range ids {
		c, err := s.readRecord(id)
		if err != nil {
			return nil, err
		}
		c.Pins = pins[id]
		out = append(out, *c)
	}
	return out, nil
}

// ids lists the recorded checkpoints in order. Only complete records are
// files named N.json: a record is renamed into place whole.
func (s *Store) ids() ([]ID, error) {
	ents, err := os.ReadDir(s.recordDir())
	if err != nil {
		return nil, err
	}
	var ids []ID
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(n, 10, 64); err == nil && v > 0 {
			ids = append(ids, ID(v))
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Get returns checkpoint id, with its pins.
func (s *Store) Get(id ID) (*Checkpoint, error) {
	c, err := s.readRecord(id)
	if err != nil {
		return nil, err
	}
	pins, err := s.pins()
	if err != nil {
		return nil, err
	}
	c.Pins = pins[id]
	return c, nil
}

// Latest returns the newest checkpoint, or nil when there is none.
func (s *Store) Latest() (*Checkpoint, error) {
	ids, err := s.ids()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return s.Get(ids[len(ids)-1])
}

func (s *Store) readRecord(id ID) (*Checkpoint, error) {
	data, err := os.ReadFile(s.recordPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.NotFoundf("no checkpoint %s: `airlock turns` lists the checkpoints", id)
	}
	if err != nil {
		return nil, err
	}
	c := new(Checkpoint)
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("%w: checkpoint %s: %v", ErrCorrupt, id, err)
	}
	return c, nil
}

// Pin keeps checkpoint id from being pruned or removed until Unpin with
// the same name (e.g. "snapshot:ID", "fork:ID").
func (s *Store) Pin(id ID, name string) error {
	if err := checkPinName(name); err != nil {
		return err
	}
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(s.recordPath(id)); err != nil {
		return errdefs.NotFoundf("no checkpoint %s to pin", id)
	}
	return atomicfile.Write(filepath.Join(s.pinDir(), id.String()+"@"+name), nil, 0o600)
}

// Unpin drops one pin of checkpoint id; an absent pin is no error.
func (s *Store) Unpin(id ID, name string) error {
	if err := checkPinName(name); err != nil {
		return err
	}
	return atomicfile.Remove(filepath.Join(s.pinDir(), id.String()+"@"+name))
}

func checkPinName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." || len(name) > 200 {
		return errdefs.Invalidf("pin name %q: give a short name without '/' (e.g. snapshot:ID)", name)
	}
	return nil
}

func (s *Store) pins() (map[ID][]string, error) {
	ents, err := os.ReadDir(s.pinDir())
	if err != nil {
		return nil, err
	}
	out := map[ID][]string{}
	for _, e := range ents {
		n, name, ok := strings.Cut(e.Name(), "@")
		v, err := strconv.ParseUint(n, 10, 64)
		if ok && err == nil {
			out[ID(v)] = append(out[ID(v)], name)
		}
	}
	return out, nil
}

// Remove deletes checkpoint id's record (not a pinned one) and then the
// objects no other checkpoint uses.
func (s *Store) Remove(id ID) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	pins, err := s.pins()
	if err != nil {
		return err
	}
	if len(pins[id]) > 0 {
		return errdefs.Conflictf("checkpoint %s is in use by %s: remove those first", id, strings.Join(pins[id], ", "))
	}
	if err := atomicfile.Remove(s.recordPath(id)); err != nil {
		return err
	}
	_, err = s.gc()
	return err
}

// Keep removes every checkpoint but those keep names, the newest and the
// pinned ones, then the objects no remaining one uses.
func (s *Store) Keep(keep map[ID]bool) (PruneResult, error) {
	return s.prune(false, func(ids []ID, removable func(int) bool) (map[ID]bool, error) {
		drop := map[ID]bool{}
		for i, id := range ids {
			if removable(i) && !keep[id] {
				drop[id] = true
			}
		}
		return drop, nil
	})
}

// prune removes the checkpoints pick chooses among those removable says
// may go (never the newest nor a pinned one), then the objects no
// remaining checkpoint uses: always with gcAlways, else only when
// something was removed.
func (s *Store) prune(gcAlways bool, pick func(ids []ID, removable func(i int) bool) (map[ID]bool, error)) (PruneResult, error) {
	unlock, err := s.lock()
	if err != nil {
		return PruneResult{}, err
	}
	defer unlock()
	var res PruneResult
	ids, err := s.ids()
	if err != nil || len(ids) == 0 {
		return res, err
	}
	pins, err := s.pins()
	if err != nil {
		return res, err
	}
	removable := func(i int) bool { return i < len(ids)-1 && len(pins[ids[i]]) == 0 }
	drop, err := pick(ids, removable)
	if err != nil {
		return res, err
	}
	for i, id := range ids {
		if drop[id] && removable(i) {
			if err := atomicfile.Remove(s.recordPath(id)); err != nil {
				return res, err
			}
			res.Removed = append(res.Removed, id)
		}
	}
	if len(res.Removed) == 0 && !gcAlways {
		return res, nil
	}
	g, err := s.gc()
	res.Freed, res.Objects = g.freed, g.objects
	return res, err
}

// PruneOptions say which checkpoints to keep; zero fields do not limit.
// The newest checkpoint and every pinned one are always kept.
type PruneOptions struct {
	// Keep is how many of the newest checkpoints to keep.
	Keep int
	// MaxBytes bounds the store's size on disk (its objects): the oldest
	// checkpoints are removed until it fits, or only kept ones remain.
	MaxBytes int64
}

// PruneResult says what Prune removed.
type PruneResult struct {
	Removed []ID
	Freed   int64 // bytes on disk
	Objects int   // objects deleted
}

// Prune removes the oldest checkpoints beyond what o allows, never a
// pinned one nor the newest, then their unshared objects.
func (s *Store) Prune(o PruneOptions) (PruneResult, error) {
	return s.prune(true, func(ids []ID, removable func(int) bool) (map[ID]bool, error) {
		drop := map[ID]bool{}
		if o.Keep > 0 {
			for i := 0; i < len(ids)-o.Keep; i++ {
				if removable(i) {
					drop[ids[i]] = true
				}
			}
		}
		if o.MaxBytes > 0 {
			for i := range ids {
				kept := slices.DeleteFunc(slices.Clone(ids), func(id ID) bool { return drop[id] })
				used, err := s.usage(kept)
				if err != nil {
					return nil, err
				}
				if used <= o.MaxBytes {
					break
				}
				if removable(i) {
					drop[ids[i]] = true
				}
			}
		}
		return drop, nil
	})
}

// Usage is the size on disk of the objects the listed checkpoints use.
func (s *Store) Usage() (int64, error) {
	unlock, err := s.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	ids, err := s.ids()
	if err != nil {
		return 0, err
	}
	return s.usage(ids)
}

func (s *Store) usage(ids []ID) (int64, error) {
	used, err := s.reachable(ids)
	if err != nil {
		return 0, err
	}
	var total int64
	for d := range used {
		p, _ := s.objectPath(d)
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			total += st.Blocks * 512
		}
	}
	return total, nil
}

// reachable is the set of objects the checkpoints ids use.
func (s *Store) reachable(ids []ID) (map[string]bool, error) {
	used := map[string]bool{}
	var mark func(digest string) error
	mark = func(digest string) error {
		if used[digest] {
			return nil
		}
		used[digest] = true
		d, err := s.openDir(digest)
		if err != nil {
			return err
		}
		for _, p := range d.top.Parts {
			used[p.Digest] = true
		}
		for {
			e, err := d.entry()
			if err != nil {
				return err
			}
			if e == nil {
				return nil
			}
			switch {
			case e.Type == Dir:
				if err := mark(e.Digest); err != nil {
					return err
				}
			case e.Digest != "":
				used[e.Digest] = true
			}
		}
	}
	for _, id := range ids {
		c, err := s.readRecord(id)
		if err != nil {
			return nil, err
		}
		if err := mark(c.Root.Digest); err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", id, err)
		}
	}
	return used, nil
}

type gcResult struct {
	objects int
	freed   int64
}

// GC deletes the objects no listed checkpoint uses: those of removed
// checkpoints, and those a Record killed midway left.
func (s *Store) GC() (objects int, freed int64, err error) {
	unlock, err := s.lock()
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	g, err := s.gc()
	return g.objects, g.freed, err
}

func (s *Store) gc() (gcResult, error) {
	var res gcResult
	ids, err := s.ids()
	if err != nil {
		return res, err
	}
	used, err := s.reachable(ids)
	if err != nil {
		// Deleting by a partial mark could delete what a listed
		// checkpoint needs: keep everything.
		return res, err
	}
	// Pins of removed checkpoints are stale.
	pins, _ := s.pins()
	for id, names := range pins {
		if !slices.Contains(ids, id) {
			for _, n := range names {
				os.Remove(filepath.Join(s.pinDir(), id.String()+"@"+n))
			}
		}
	}
	root := filepath.Join(s.dir, "objects", "sha256")
	fans, err := os.ReadDir(root)
	if err != nil {
		return res, err
	}
	for _, fan := range fans {
		ents, err := os.ReadDir(filepath.Join(root, fan.Name()))
		if err != nil {
			return res, err
		}
		for _, e := range ents {
			if used["sha256:"+e.Name()] {
				continue
			}
			p := filepath.Join(root, fan.Name(), e.Name())
			var st unix.Stat_t
			unix.Lstat(p, &st)
			if os.Remove(p) == nil {
				res.objects++
				res.freed += st.Blocks * 512
			}
		}
	}
	if res.objects > 0 {
		s.trees = nil
	}
	return res, nil
}
