package review

import (
	"io/fs"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cache remembers, per path, what a review found for a file whose session
// and project versions have not changed since: whether their contents are
// equal, and the finished diff. A review then stats those files but reads
// none of them. Stat data identifies a version only once it is older than
// the clock's granularity, so a file changed less than a second before it
// was reviewed is not cached ("racily clean", as git says).
type Cache struct {
	mu      sync.Mutex
	entries map[string]cacheEntry
	bytes   int64 // hunk text held
}

// cacheMax bounds the entries kept per session, and cacheMaxBytes the
// hunk text they hold.
const (
	cacheMax      = 50000
	cacheMaxBytes = 32 << 20
)

type statKey struct {
	present            bool
	size, mtime, ctime int64
	ino                uint64
	mode               uint32
}

type cacheEntry struct {
	upper, host statKey
	same        bool      // contents and mode equal: no change
	diff        *FileDiff // the review of the change
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{entries: map[string]cacheEntry{}} }

func keyOf(fi fs.FileInfo) statKey {
	if fi == nil {
		return statKey{}
	}
	st := fi.Sys().(*syscall.Stat_t)
	return statKey{present: true, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino, mode: st.Mode}
}

func keyOfStat(st *unix.Stat_t) statKey {
	return statKey{present: true, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino, mode: st.Mode}
}

// size is roughly what an entry holds in memory.
func (e cacheEntry) size() int64 {
	n := int64(200)
	if e.diff != nil {
		for _, h := range e.diff.Hunks {
			for _, l := range h.Lines {
				n += int64(len(l)) + 16
			}
		}
	}
	return n
}

// settled reports whether a version's stat data can identify it.
func (k statKey) settled(now time.Time) bool {
	return !k.present || now.UnixNano()-k.ctime > int64(time.Second) && now.UnixNano()-k.mtime > int64(time.Second)
}

func (c *Cache) lookup(p string, u, h statKey) (cacheEntry, bool) {
	if c == nil {
		return cacheEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[p]
	if !ok || e.upper != u || e.host != h {
		return cacheEntry{}, false
	}
	return e, true
}

func (c *Cache) store(p string, e cacheEntry) {
	if c == nil {
		return
	}
	now := time.Now()
	if !e.upper.settled(now) || !e.host.settled(now) {
		return
	}
	n := e.size()
	if n > cacheMaxBytes/8 {
		return // one file's hunks may not take the cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= cacheMax || c.bytes+n > cacheMaxBytes {
		c.entries, c.bytes = map[string]cacheEntry{}, 0
	}
	if old, ok := c.entries[p]; ok {
		c.bytes -= old.size()
	}
	c.entries[p] = e
	c.bytes += n
}
