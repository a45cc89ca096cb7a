package review

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// The base's overrides (what accepts wrote since the start) live on disk
// in a table sorted by path, like the manifest, memory-mapped for lookups:
// the engine holds nothing per accepted path, however many were accepted.
// An accept's records are sorted in chunks of bounded size (spilled to
// unnamed scratch files) and merged with the existing table into a new
// one, which replaces it whole.

const (
	overridesMagic = "ALBO1\n"
	// overridesTableName is the table; overridesName is the earlier
	// format (JSON lines, appended), converted on load.
	overridesTableName = "overrides.table"
	// overrideChunk is about how many bytes of an accept's records are
	// sorted in memory before they are spilled to a scratch file.
	overrideChunk = 4 << 20
)

// appendOverride encodes o as a table record: its path first (see table).
func appendOverride(buf []byte, o *override) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(o.Path)))
	buf = append(buf, o.Path...)
	flags := byte(0)
	if o.Gone {
		flags = 1
	}
	buf = append(buf, flags)
	for _, v := range []int64{o.Stat.Size, o.Stat.Mtime, o.Stat.Ctime} {
		buf = binary.AppendVarint(buf, v)
	}
	buf = binary.AppendUvarint(buf, o.Stat.Ino)
	buf = binary.AppendUvarint(buf, uint64(o.Stat.Mode))
	for _, s := range []string{o.Object, o.Session} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	return buf
}

type recordReader interface {
	io.Reader
	io.ByteReader
}

// readOverride decodes one record; io.EOF means r ended before it.
func readOverride(r recordReader) (override, error) {
	var o override
	str := func(first bool) (string, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			if first && err == io.EOF {
				return "", io.EOF
			}
			return "", errOverrides
		}
		if n > 1<<20 {
			return "", errOverrides
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", errOverrides
		}
		return string(b), nil
	}
	var err error
	if o.Path, err = str(true); err != nil {
		return o, err
	}
	flags, err := r.ReadByte()
	if err != nil {
		return o, errOverrides
	}
	o.Gone = flags&1 != 0
	var errs [5]error
	o.Stat.Size, errs[0] = binary.ReadVarint(r)
	o.Stat.Mtime, errs[1] = binary.ReadVarint(r)
	o.Stat.Ctime, errs[2] = binary.ReadVarint(r)
	o.Stat.Ino, errs[3] = binary.ReadUvarint(r)
	var mode uint64
	mode, errs[4] = binary.ReadUvarint(r)
	o.Stat.Mode = uint32(mode)
	if errors.Join(errs[:]...) != nil {
		return o, errOverrides
	}
	if o.Object, err = str(false); err != nil {
		return o, err
	}
	o.Session, err = str(false)
	return o, err
}

var errOverrides = errors.New("the session's base records of accepted files are corrupt: its conflict detection is unavailable")

// overrideTable is the mapped table of overrides.
type overrideTable struct{ table }

func (t overrideTable) lookup(p string) (override, bool) {
	i, ok := t.find(p)
	if !ok {
		return override{}, false
	}
	o, err := readOverride(bytes.NewReader(t.record(i)))
	return o, err == nil
}

// overrideSource hands on overrides sorted by path (a path may repeat; the
// later one counts).
type overrideSource interface {
	next() (override, bool, error)
}

// readerSource reads n records (all, when n < 0) from r.
type readerSource struct {
	r recordReader
	n int
}

func (s *readerSource) next() (override, bool, error) {
	if s.n == 0 {
		return override{}, false, nil
	}
	o, err := readOverride(s.r)
	if err == io.EOF && s.n < 0 {
		return o, false, nil
	}
	if err != nil {
		return o, false, errOverrides
	}
	if s.n > 0 {
		s.n--
	}
	return o, true, nil
}

type sliceSource []override

func (s *sliceSource) next() (override, bool, error) {
	if len(*s) == 0 {
		return override{}, false, nil
	}
	o := (*s)[0]
	*s = (*s)[1:]
	return o, true, nil
}

// overrideSorter sorts an accept's overrides by path, in bounded memory:
// a chunk at a time, each sorted chunk spilled to an unnamed scratch file
// (a run), the runs merged at the end. Ties keep their order.
type overrideSorter struct {
	dir   string
	chunk []override
	size  int
	runs  []*os.File
}

func (s *overrideSorter) add(o override) error {
	s.chunk = append(s.chunk, o)
	s.size += 128 + len(o.Path) + len(o.Object) + len(o.Session)
	if s.size < overrideChunk {
		return nil
	}
	return s.spill()
}

func (s *overrideSorter) sortChunk() {
	sort.SliceStable(s.chunk, func(i, j int) bool { return s.chunk[i].Path < s.chunk[j].Path })
}

func (s *overrideSorter) spill() error {
	s.sortChunk()
	f, err := os.CreateTemp(s.dir, ".overrides-run-*")
	if err != nil {
		return err
	}
	os.Remove(f.Name())
	s.runs = append(s.runs, f)
	w := bufio.NewWriterSize(f, 64<<10)
	var buf []byte
	for i := range s.chunk {
		buf = appendOverride(buf[:0], &s.chunk[i])
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	clear(s.chunk)
	s.chunk, s.size = s.chunk[:0], 0
	return nil
}

// sources are the sorted runs and the last chunk, in the order they came.
func (s *overrideSorter) sources() ([]overrideSource, error) {
	var out []overrideSource
	for _, f := range s.runs {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		out = append(out, &readerSource{r: bufio.NewReaderSize(f, 64<<10), n: -1})
	}
	s.sortChunk()
	chunk := sliceSource(s.chunk)
	return append(out, &chunk), nil
}

func (s *overrideSorter) close() {
	for _, f := range s.runs {
		f.Close()
	}
}

// cursor is a source's next override in a merge; src orders ties.
type cursor struct {
	o   override
	src int
	s   overrideSource
}

type cursors []*cursor

func (h cursors) Len() int { return len(h) }
func (h cursors) Less(i, j int) bool {
	if h[i].o.Path != h[j].o.Path {
		return h[i].o.Path < h[j].o.Path
	}
	return h[i].src < h[j].src
}
func (h cursors) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursors) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursors) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// mergeOverrides merges sources, each sorted by path, into one stream in
// path order, each path once: for a path in several sources, the later
// source's, and in one source, its last.
func mergeOverrides(sources []overrideSource, emit func(*override) error) error {
	h := &cursors{}
	advance := func(c *cursor) error {
		o, ok, err := c.s.next()
		if err != nil {
			return err
		}
		if ok {
			c.o = o
			heap.Push(h, c)
		}
		return nil
	}
	for i, s := range sources {
		if err := advance(&cursor{src: i, s: s}); err != nil {
			return err
		}
	}
	var best override
	have := false
	for h.Len() > 0 {
		c := heap.Pop(h).(*cursor)
		if have && c.o.Path != best.Path {
			if err := emit(&best); err != nil {
				return err
			}
		}
		best, have = c.o, true
		if err := advance(c); err != nil {
			return err
		}
	}
	if have {
		return emit(&best)
	}
	return nil
}

// tableSource reads the overrides table at path in order, from the file
// rather than its mapping (a whole pass would make all of it resident); a
// missing table is an empty source.
func tableSource(path string) (overrideSource, io.Closer, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		empty := sliceSource(nil)
		return &empty, io.NopCloser(nil), nil
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	tail := make([]byte, 4+len(overridesMagic))
	if fi.Size() < int64(len(tail)) {
		f.Close()
		return nil, nil, errOverrides
	}
	if _, err := f.ReadAt(tail, fi.Size()-int64(len(tail))); err != nil || string(tail[4:]) != overridesMagic {
		f.Close()
		return nil, nil, errOverrides
	}
	n := int(binary.LittleEndian.Uint32(tail))
	return &readerSource{r: bufio.NewReaderSize(f, 64<<10), n: n}, f, nil
}

// rewriteOverrides replaces the overrides table with itself merged with
// the records add is given (any order; those given later count).
func (b *Base) rewriteOverrides(records func(add func(override) error) error) error {
	s := &overrideSorter{dir: b.dir}
	defer s.close()
	if err := records(s.add); err != nil {
		return err
	}
	path := filepath.Join(b.dir, overridesTableName)
	old, closer, err := tableSource(path)
	if err != nil {
		return err
	}
	defer closer.Close()
	added, err := s.sources()
	if err != nil {
		return err
	}
	var buf []byte
	err = writeTable(path, overridesMagic, func(add func([]byte) error) error {
		return mergeOverrides(append([]overrideSource{old}, added...), func(o *override) error {
			buf = appendOverride(buf[:0], o)
			return add(buf)
		})
	})
	if err != nil {
		return err
	}
	return b.mapOverrides()
}

// mapOverrides maps the overrides table (none: no overrides) in place of
// the one mapped before.
func (b *Base) mapOverrides() error {
	data, err := mapFile(filepath.Join(b.dir, overridesTableName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var t table
	if data != nil {
		var ok bool
		if t, ok = parseTable(data, overridesMagic); !ok {
			unmap(data)
			return errOverrides
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	unmap(b.overMapped)
	b.overMapped, b.overrides = data, overrideTable{t}
	return nil
}

// convertOverrides turns the earlier format's overrides (JSON lines, in
// the order they were written) into the table, then removes them.
func (b *Base) convertOverrides() error {
	legacy := filepath.Join(b.dir, overridesName)
	f, err := os.Open(legacy)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	err = b.rewriteOverrides(func(add func(override) error) error {
		dec := json.NewDecoder(bufio.NewReader(f))
		for {
			var o override
			if dec.Decode(&o) != nil {
				return nil // a torn last record (crash mid-append) is ignored
			}
			if err := add(o); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return err
	}
	return os.Remove(legacy)
}
