package secretscan

import (
	"context"
	"crypto/sha256"
	"io"
	"sync"
)

// Cache is a Finder that keeps what another Finder found in each text,
// by the text's SHA-256: a text asked about again (the same file in the
// next review of a session, or in another session) is answered from
// memory and not sent to the scanner again. Only answers are kept: a
// Find that failed is asked again next time. It lives as long as its
// owner (the engine) and is bounded twice: at most MaxTexts texts and
// MaxBytes bytes of memory for what it keeps (a digest, the map's own
// share and the matches, per text); past half of either, the older half
// is let go. Safe for concurrent use.
type Cache struct {
	f    Finder
	opts CacheOptions

	mu       sync.Mutex
	cur, old map[[sha256.Size]byte][]Match // generations: new answers go to cur
	curBytes int
}

// CacheOptions bound a Cache. Zero values are the defaults.
type CacheOptions struct {
	// MaxTexts is how many texts' answers are kept at most (default
	// 65,536).
	MaxTexts int
	// MaxBytes is how much memory kept answers take at most (default 8
	// MiB), counted as entryBytes per text and the size of its matches.
	MaxBytes int
}

// entryBytes is what a kept text costs beside its matches: its digest
// and the map's slot, header and spare room.
const entryBytes = 96

// NewCache returns a Cache in front of f.
func NewCache(f Finder, o CacheOptions) *Cache {
	if o.MaxTexts <= 0 {
		o.MaxTexts = 65536
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 8 << 20
	}
	return &Cache{f: f, opts: o, cur: map[[sha256.Size]byte][]Match{}}
}

// Find answers from what it keeps, and asks f about the other texts, in
// one Find.
func (c *Cache) Find(ctx context.Context, texts []string) ([][]Match, error) {
	found := make([][]Match, len(texts))
	sums := make([][sha256.Size]byte, len(texts))
	for i, t := range texts {
		sums[i] = sha256.Sum256([]byte(t))
	}
	var ask []string
	var at []int
	c.mu.Lock()
	for i := range texts {
		m, ok := c.lookup(sums[i])
		if ok {
			found[i] = m
			continue
		}
		ask, at = append(ask, texts[i]), append(at, i)
	}
	c.mu.Unlock()
	if len(ask) == 0 {
		return found, nil
	}
	got, err := c.f.Find(ctx, ask)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, i := range at {
		found[i] = got[k]
		c.keep(sums[i], got[k])
	}
	return found, nil
}

// lookup is the answer kept for sum, moved to the newer generation.
func (c *Cache) lookup(sum [sha256.Size]byte) ([]Match, bool) {
	if m, ok := c.cur[sum]; ok {
		return m, true
	}
	m, ok := c.old[sum]
	if ok {
		delete(c.old, sum)
		c.keep(sum, m)
	}
	return m, ok
}

func (c *Cache) keep(sum [sha256.Size]byte, m []Match) {
	if _, ok := c.cur[sum]; ok {
		return
	}
	size := entryBytes
	for _, x := range m {
		size += 48 + len(x.Rule) + len(x.Description)
	}
	if len(c.cur) >= c.opts.MaxTexts/2 || c.curBytes+size > c.opts.MaxBytes/2 {
		c.old, c.cur, c.curBytes = c.cur, map[[sha256.Size]byte][]Match{}, 0
	}
	c.cur[sum] = m
	c.curBytes += size
}

// Len is how many texts' answers are kept (for tests).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}

// Close closes the Finder it is in front of, if that is an io.Closer.
func (c *Cache) Close() error {
	if cl, ok := c.f.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}
