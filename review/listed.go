package review

import (
	"io/fs"
	"sync"
	"unicode/utf8"
)

// listed is one change as a review keeps it between the walk and the file's
// own review. Most of a large session's changes are plain added files and
// directories; those take a few dozen bytes here (a Change takes 360), so
// that a review of 200,000 files keeps megabytes, not hundreds of them. A
// change with anything more is kept whole in full.
type listed struct {
	path   string
	size   int64
	mode   fs.FileMode
	dir    bool // a lean listed is an added file, or an added (empty) directory
	ctype  uint8
	binary bool
	data   *contents // small files' bytes, read once per review
	full   *Change   // the change, when it is not a plain addition
}

// leanMaxSize is the largest added file kept lean: a larger one is worth
// caching between reviews (see Cache), which needs its stat data.
const leanMaxSize = 4 << 10

// listedOf keeps c, lean when it is a plain addition.
func listedOf(c *Change) listed {
	lean := c.Kind == Added && c.OldType == None && (c.Type == File && c.Size < leanMaxSize || c.Type == Dir) &&
		c.RawPath == nil && c.Link == "" && c.Note == "" && c.TooLarge == "" && c.ContentSum == "" &&
		c.hostInfo == nil && c.cached == nil && !c.HostChanged && !c.Merged && !c.Conflict && c.From == "" &&
		c.OldLink == "" && c.Ignored == "" && c.Generated == "" && c.OldMode == 0 && c.OldSize == 0 && c.ConflictReason == "" && c.Similarity == 0 &&
		utf8.ValidString(c.Path)
	if lean {
		if ct, ok := contentTypes.index(c.ContentType); ok {
			return listed{path: c.Path, size: c.Size, mode: c.Mode, dir: c.Type == Dir, ctype: ct, binary: c.Binary, data: c.data}
		}
	}
	full := *c
	full.setID()
	return listed{path: c.Path, full: &full}
}

// change is the listed as a Change.
func (it *listed) change() Change {
	if it.full != nil {
		return *it.full
	}
	c := Change{Path: it.path, Kind: Added, Type: it.newType(), Mode: it.mode, Size: it.size, Binary: it.binary,
		ContentType: contentTypes.name(it.ctype), data: it.data}
	c.setID()
	return c
}

// The fields rename detection and selection look at, without making the
// Change.
func (it *listed) kind() Kind {
	if it.full != nil {
		return it.full.Kind
	}
	return Added
}

func (it *listed) newType() Type {
	if it.full != nil {
		return it.full.Type
	}
	if it.dir {
		return Dir
	}
	return File
}

func (it *listed) oldType() Type {
	if it.full != nil {
		return it.full.OldType
	}
	return None
}

func (it *listed) newSize() int64 {
	if it.full != nil {
		return it.full.Size
	}
	return it.size
}

func (it *listed) oldSize() int64 {
	if it.full != nil {
		return it.full.OldSize
	}
	return 0
}

func (it *listed) newMode() fs.FileMode {
	if it.full != nil {
		return it.full.Mode
	}
	return it.mode
}

func (it *listed) isBinary() bool {
	if it.full != nil {
		return it.full.Binary
	}
	return it.binary
}

func (it *listed) link() (link, oldLink string) {
	if it.full != nil {
		return it.full.Link, it.full.OldLink
	}
	return "", ""
}

// internTable numbers the few content types a review meets (those
// http.DetectContentType names), so that a lean listed keeps a byte.
type internTable struct {
	mu     sync.RWMutex
	names  []string
	byName map[string]uint8
}

var contentTypes = &internTable{names: []string{""}, byName: map[string]uint8{"": 0}}

func (t *internTable) index(name string) (uint8, bool) {
	t.mu.RLock()
	i, ok := t.byName[name]
	t.mu.RUnlock()
	if ok {
		return i, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.byName[name]; ok {
		return i, true
	}
	if len(t.names) > 255 {
		return 0, false
	}
	i = uint8(len(t.names))
	t.names = append(t.names, name)
	t.byName[name] = i
	return i, true
}

func (t *internTable) name(i uint8) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.names[i]
}
