package snapshot

import (
	"archive/tar"
	"fmt"
	"hash/maphash"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// The rules every entry of a layer is checked against, in CheckLayer and
// before ApplyLayer passes anything on. They describe what WriteLayer
// writes; anything else was made by hand and is refused.

const (
	maxPath      = 4096     // bytes of a name (PATH_MAX)
	maxElement   = 255      // bytes of one element of a name (NAME_MAX)
	maxFragments = 4096     // data regions of one sparse file
	maxXattrs    = 64 << 10 // bytes of one entry's extended attributes
	uidMax       = 1<<32 - 2
)

// PAX records of GNU's sparse format 0.1 (0.0 reads the same once Go has
// parsed it).
const (
	sparseMap       = "GNU.sparse.map"
	sparseNumBlocks = "GNU.sparse.numblocks"
	sparseSize      = "GNU.sparse.size"
	sparseMajor     = "GNU.sparse.major"
)

type kind int

const (
	kindFile kind = iota
	kindDir
	kindSymlink
	kindLink // a hard link
	kindFifo
	kindWhiteout // a deletion: .wh.NAME
	kindOpaque   // .wh..wh..opq: the directory hides the lower one
)

// region is a stretch of a sparse file's data.
type region struct{ off, len int64 }

// entry is a checked entry of a layer, as it goes to the target.
type entry struct {
	kind kind
	rel  string // beneath the target, as the layer names it (escapes kept)
	// link is a symlink's target (any text: a symlink is data, never
	// followed), or a hard link's target beneath the target.
	link     string
	mode     int64 // permissions, set-id bits cleared
	uid, gid int
	mtime    time.Time
	size     int64             // a file's apparent size
	sparse   []region          // a sparse file's data (nil: not sparse)
	xattrs   map[string]string // user.* only
}

// escaped says whether the last element of the entry's name (for a
// whiteout: of the name it deletes) is escaped, so that it gets its real
// name once applied.
func (e *entry) escaped() string {
	p := e.rel
	if e.kind == kindWhiteout {
		dir, base := path.Split(p)
		p = dir + strings.TrimPrefix(base, whiteoutPrefix)
	}
	if strings.HasPrefix(path.Base(p), escapePrefix) {
		return p
	}
	return ""
}

// checker applies the rules to a layer's entries in order, for one target:
// the entries under prefix, minus those skip names.
type checker struct {
	lim    Limits
	prefix string // without a trailing slash; "" for the whole layer
	skip   func(rel string) bool
	seed   maphash.Seed
	// Paths (hashed: a collision can only refuse more) of the symlinks the
	// layer made, and of its sparse files (filled in a second pass, so
	// never replaced).
	symlinks, sparse map[uint64]struct{}
	entries          int
	holes            int64
	stats            LayerStats
}

func newChecker(lim Limits, prefix string, skip func(rel string) bool) *checker {
	return &checker{lim: lim.withDefaults(), prefix: strings.Trim(prefix, "/"), skip: skip, seed: maphash.MakeSeed(),
		symlinks: map[uint64]struct{}{}, sparse: map[uint64]struct{}{}}
}

func (c *checker) hash(p string) uint64 { return maphash.String(c.seed, p) }

// check applies the rules to hdr. It returns the entry when it belongs to
// the target, nil when it belongs elsewhere or carries nothing.
func (c *checker) check(hdr *tar.Header) (*entry, error) {
	bad := func(format string, a ...any) error {
		return &EntryError{Name: hdr.Name, Reason: fmt.Sprintf(format, a...), Err: ErrUnsafe}
	}
	if c.entries++; c.entries > c.lim.Entries {
		return nil, &EntryError{Name: hdr.Name, Reason: fmt.Sprintf("the layer has more than %d entries", c.lim.Entries), Err: ErrLimit}
	}
	e := &entry{mode: hdr.Mode & 0o1777, uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil, nil // nothing to write; its records are not applied to later entries
	case tar.TypeReg, tar.TypeRegA:
		e.kind = kindFile
	case tar.TypeDir:
		e.kind = kindDir
	case tar.TypeSymlink:
		e.kind = kindSymlink
	case tar.TypeLink:
		e.kind = kindLink
	case tar.TypeFifo:
		e.kind = kindFifo
	case tar.TypeChar, tar.TypeBlock:
		return nil, bad("a device node (%d, %d): sessions cannot make devices, so this layer was made by hand", hdr.Devmajor, hdr.Devminor)
	default:
		return nil, bad("entry type %q, which Airlock never writes", hdr.Typeflag)
	}
	name, err := cleanName(hdr.Name, e.kind == kindDir)
	if err != nil {
		return nil, bad("%v", err)
	}
	if hdr.Uid < 0 || hdr.Uid > uidMax || hdr.Gid < 0 || hdr.Gid > uidMax {
		return nil, bad("owner %d:%d is out of range", hdr.Uid, hdr.Gid)
	}
	if y := hdr.ModTime.Year(); y < 1678 || y > 2261 {
		return nil, bad("time %v is out of range", hdr.ModTime)
	}
	if e.xattrs, err = xattrsOf(hdr); err != nil {
		return nil, bad("%v", err)
	}
	if e.kind == kindFile {
		if err := c.fileSize(hdr, e); err != nil {
			return nil, err
		}
	}
	if name == "" {
		return nil, nil // the layer's root: the target's own metadata is not the layer's to set
	}
	rel, ok := c.route(name)
	if !ok {
		return nil, nil
	}
	e.rel = rel
	if err := c.checkName(e, hdr); err != nil {
		return nil, err
	}
	if err := c.checkPath(e); err != nil {
		return nil, err
	}
	switch e.kind {
	case kindSymlink:
		if hdr.Linkname == "" || len(hdr.Linkname) >= maxPath || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return nil, bad("a symlink target that is empty, too long or holds a NUL")
		}
		e.link = hdr.Linkname
		c.symlinks[c.hash(e.rel)] = struct{}{}
	case kindLink:
		if e.link, err = c.linkTarget(hdr.Linkname); err != nil {
			return nil, bad("hard link to %q: %v", hdr.Linkname, err)
		}
		delete(c.symlinks, c.hash(e.rel))
	case kindWhiteout:
		delete(c.symlinks, c.hash(victim(e.rel)))
	default:
		delete(c.symlinks, c.hash(e.rel))
	}
	switch e.kind {
	case kindFile:
		c.stats.Files++
		if e.sparse != nil {
			c.sparse[c.hash(e.rel)] = struct{}{}
			for _, r := range e.sparse {
				c.stats.Bytes += r.len
			}
		} else {
			c.stats.Bytes += e.size
		}
	case kindDir:
		c.stats.Dirs++
	case kindWhiteout, kindOpaque:
		c.stats.Whiteouts++
	default:
		c.stats.Files++
	}
	return e, nil
}

// cleanName checks a name for being relative and clean, and returns it
// without a directory's trailing slash ("" for the layer's root).
func cleanName(name string, dir bool) (string, error) {
	switch {
	case strings.IndexByte(name, 0) >= 0:
		return "", fmt.Errorf("a name with a NUL byte")
	case strings.HasPrefix(name, "/"):
		return "", fmt.Errorf("an absolute name: layers hold names relative to their root")
	case len(name) > maxPath:
		return "", fmt.Errorf("a name longer than %d bytes", maxPath)
	}
	if dir {
		name = strings.TrimSuffix(name, "/")
	}
	if name == "" || name == "." {
		return "", nil
	}
	for _, p := range strings.Split(name, "/") {
		switch {
		case p == "..":
			return "", fmt.Errorf("a name with a .. element, which would leave the target")
		case p == "" || p == ".":
			return "", fmt.Errorf("a name with an empty or . element, which Airlock never writes")
		case len(p) > maxElement:
			return "", fmt.Errorf("a name element longer than %d bytes", maxElement)
		}
	}
	return name, nil
}

// route finds a name's path beneath the target; ok is false for an entry
// that belongs elsewhere (or is a directory of the prefix itself).
func (c *checker) route(name string) (rel string, ok bool) {
	rel = name
	if c.prefix != "" {
		if rel, ok = strings.CutPrefix(name, c.prefix+"/"); !ok {
			return "", false
		}
	}
	if c.skip != nil && c.skip(rel) {
		return "", false
	}
	return rel, true
}

// checkName applies the whiteout and escape rules to the elements of the
// entry's name.
func (c *checker) checkName(e *entry, hdr *tar.Header) error {
	bad := func(format string, a ...any) error {
		return &EntryError{Name: hdr.Name, Reason: fmt.Sprintf(format, a...), Err: ErrUnsafe}
	}
	parts := strings.Split(e.rel, "/")
	for i, p := range parts {
		last := i == len(parts)-1
		switch {
		case strings.HasPrefix(p, escapePrefix):
			if _, ok := unescapeName(p); !ok {
				return bad("%q is not an escaped name Airlock writes", p)
			}
		case !strings.HasPrefix(p, whiteoutPrefix):
		case !last:
			return bad("a whiteout name in the middle of a path: a whiteout names one path element")
		case p == opaqueMarker:
			if len(parts) == 1 {
				return bad("an opaque marker for the target's root")
			}
			e.kind = kindOpaque
		case strings.HasPrefix(p, whiteoutMeta):
			return bad("an AUFS whiteout entry, which Airlock never writes")
		default:
			x := p[len(whiteoutPrefix):]
			switch {
			case x == "" || x == "." || x == "..":
				return bad("a whiteout of %q: a whiteout names one path element", x)
			case strings.HasPrefix(x, whiteoutPrefix):
				return bad("a whiteout of an unescaped .wh. name")
			case strings.HasPrefix(x, escapePrefix):
				if _, ok := unescapeName(x); !ok {
					return bad("%q is not an escaped name Airlock writes", x)
				}
			}
			e.kind = kindWhiteout
		}
	}
	if (e.kind == kindWhiteout || e.kind == kindOpaque) && (hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA || hdr.Size != 0 || e.sparse != nil) {
		return bad("a whiteout that is not an empty file")
	}
	return nil
}

// checkPath refuses an entry beneath a symlink the layer made (the
// library would follow it, if only within the target) and the
// replacement of a sparse file (it is filled in a second pass).
func (c *checker) checkPath(e *entry) error {
	p := e.rel
	if e.kind == kindWhiteout {
		p = victim(p)
	}
	if _, ok := c.sparse[c.hash(p)]; ok {
		return &EntryError{Name: e.rel, Reason: "a second entry of the same name as a sparse file", Err: ErrUnsafe}
	}
	return c.throughSymlink(p, e.rel)
}

func (c *checker) throughSymlink(p, name string) error {
	for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
		if _, ok := c.symlinks[c.hash(p[:i])]; ok {
			return &EntryError{Name: name, Reason: fmt.Sprintf("it goes through %s, a symlink the layer made earlier", p[:i]), Err: ErrUnsafe}
		}
	}
	return nil
}

// linkTarget checks a hard link's target: a path of the same target,
// not a symlink the layer made, nor beneath one.
func (c *checker) linkTarget(link string) (string, error) {
	name, err := cleanName(link, false)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", fmt.Errorf("a link to the layer's root")
	}
	rel := name
	if c.prefix != "" {
		var ok bool
		if rel, ok = strings.CutPrefix(name, c.prefix+"/"); !ok {
			return "", fmt.Errorf("it points outside its part of the layer")
		}
	}
	if c.skip != nil && c.skip(rel) {
		return "", fmt.Errorf("it points into a part of the layer applied elsewhere")
	}
	if strings.Contains("/"+rel, "/"+whiteoutPrefix) {
		return "", fmt.Errorf("a link to a whiteout")
	}
	if _, ok := c.symlinks[c.hash(rel)]; ok {
		return "", fmt.Errorf("it points at a symlink the layer made")
	}
	if err := c.throughSymlink(rel, link); err != nil {
		return "", err
	}
	return rel, nil
}

// fileSize checks a file's size and, for a sparse file, its map.
func (c *checker) fileSize(hdr *tar.Header, e *entry) error {
	limit := func(format string, a ...any) error {
		return &EntryError{Name: hdr.Name, Reason: fmt.Sprintf(format, a...), Err: ErrLimit}
	}
	if hdr.Size < 0 || hdr.Size > c.lim.FileSize {
		return limit("a file of %d bytes (at most %d)", hdr.Size, c.lim.FileSize)
	}
	e.size = hdr.Size
	regions, err := sparseRegions(hdr)
	if err != nil {
		return &EntryError{Name: hdr.Name, Reason: err.Error(), Err: ErrUnsafe}
	}
	if regions == nil {
		return nil
	}
	if len(regions) == 0 {
		// All hole: Go's tar reader sees no map and reports the data's
		// size (0); the file's size is the PAX record's.
		real, err := strconv.ParseInt(hdr.PAXRecords[sparseSize], 10, 64)
		if err != nil || real < 0 {
			return &EntryError{Name: hdr.Name, Reason: "a sparse file without a valid size", Err: ErrUnsafe}
		}
		if real > c.lim.FileSize {
			return limit("a file of %d bytes (at most %d)", real, c.lim.FileSize)
		}
		e.size = real
	}
	var data, end int64
	for _, r := range regions {
		data += r.len
		if r.len > 0 {
			end = r.off + r.len
		}
	}
	if c.holes += end - data; c.holes > c.lim.Holes {
		return limit("sparse files whose holes before their last data exceed %d bytes", c.lim.Holes)
	}
	e.sparse = regions
	return nil
}

// sparseRegions reads the data regions of a sparse file from its PAX
// records: nil for a file that is not sparse. Only GNU's 0.x formats are
// read, whose map Go's archive/tar leaves in the records.
func sparseRegions(hdr *tar.Header) ([]region, error) {
	rec := hdr.PAXRecords
	if rec[sparseMajor] != "" && rec[sparseMajor] != "0" {
		return nil, fmt.Errorf("a sparse encoding Airlock does not write (GNU %s.x)", rec[sparseMajor])
	}
	m, ok := rec[sparseMap]
	if !ok {
		return nil, nil
	}
	n, err := strconv.Atoi(rec[sparseNumBlocks])
	if err != nil || n < 0 || n > maxFragments {
		return nil, fmt.Errorf("a sparse map of %q regions (at most %d)", rec[sparseNumBlocks], maxFragments)
	}
	var fields []string
	if m != "" {
		fields = strings.Split(m, ",")
	}
	if len(fields) != 2*n {
		return nil, fmt.Errorf("a sparse map that does not have %d regions", n)
	}
	regions := make([]region, 0, n)
	var end int64
	for i := 0; i < len(fields); i += 2 {
		off, err1 := strconv.ParseInt(fields[i], 10, 64)
		l, err2 := strconv.ParseInt(fields[i+1], 10, 64)
		if err1 != nil || err2 != nil || off < end || l < 0 || off > hdr.Size || l > hdr.Size-off {
			return nil, fmt.Errorf("a sparse map whose regions overlap or pass the end")
		}
		end = off + l
		regions = append(regions, region{off, l})
	}
	return regions, nil
}

// xattrsOf reads an entry's extended attributes from its PAX records:
// user.* only (not the user.overlay.* an overlay mounted with userxattr
// would obey).
func xattrsOf(hdr *tar.Header) (map[string]string, error) {
	var out map[string]string
	total := 0
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, xattrPAX)
		if !ok {
			if strings.HasPrefix(k, "LIBARCHIVE.xattr.") {
				return nil, fmt.Errorf("extended attributes in libarchive's encoding, which Airlock never writes")
			}
			continue
		}
		if !strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "user.overlay.") {
			return nil, fmt.Errorf("extended attribute %s: a layer carries only user.* attributes", name)
		}
		if total += len(name) + len(v); total > maxXattrs {
			return nil, fmt.Errorf("extended attributes of more than %d bytes", maxXattrs)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = v
	}
	return out, nil
}

// victim is the path a whiteout deletes.
func victim(rel string) string {
	dir, base := path.Split(rel)
	return dir + strings.TrimPrefix(base, whiteoutPrefix)
}

// CheckLayer reads a whole layer and checks every entry against the rules
// ApplyLayer applies (see the package comment); visit, when not nil, is
// called with each entry's name and tar type for checks of the caller's
// own, and may refuse it. It reads r to the end of the tar, not beyond.
func CheckLayer(r io.Reader, lim Limits, visit func(name string, typ byte) error) (LayerStats, error) {
	c := newChecker(lim, "", nil)
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return c.stats, nil
		}
		if err != nil {
			return c.stats, fmt.Errorf("%w: the layer is not a readable tar: %v", ErrUnsafe, err)
		}
		e, err := c.check(hdr)
		if err != nil {
			return c.stats, err
		}
		if e != nil && visit != nil {
			if err := visit(e.rel, hdr.Typeflag); err != nil {
				return c.stats, err
			}
		}
	}
}
