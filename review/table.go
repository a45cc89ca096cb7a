package review

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/airlock/airlock/atomicfile"
)

// table is the layout of the base's files of records by path (the
// manifest, the overrides): records sorted by path, each starting with its
// path (uvarint length, bytes), then a table of their offsets (4 bytes
// each), then the count (4 bytes) and a magic. Mapped, a lookup is a binary
// search over the file's bytes with nothing decoded up front.
type table struct {
	data    []byte
	offsets []byte // 4 bytes per record
	n       int
}

// parseTable reads the layout of data; ok is false when it is not a table
// with this magic.
func parseTable(data []byte, magic string) (t table, ok bool) {
	if len(data) < 4+len(magic) || string(data[len(data)-len(magic):]) != magic {
		return table{}, false
	}
	end := len(data) - len(magic)
	n := int(binary.LittleEndian.Uint32(data[end-4 : end]))
	start := end - 4 - 4*n
	if start < 0 {
		return table{}, false
	}
	return table{data: data[:start], offsets: data[start : end-4], n: n}, true
}

// record is the bytes from record i's start to the end of the records
// (nil when its offset is out of range).
func (t table) record(i int) []byte {
	off := int(binary.LittleEndian.Uint32(t.offsets[4*i:]))
	if off >= len(t.data) {
		return nil
	}
	return t.data[off:]
}

// pathAt is record i's path, in the mapped bytes (no copy).
func (t table) pathAt(i int) []byte {
	rec := t.record(i)
	n, k := binary.Uvarint(rec)
	if k <= 0 || uint64(len(rec)-k) < n {
		return nil
	}
	return rec[k : k+int(n)]
}

// find returns the index of p's record.
func (t table) find(p string) (int, bool) {
	// string(b) in a comparison does not allocate: a lookup costs a
	// binary search over mapped bytes and nothing else.
	i := sort.Search(t.n, func(i int) bool { return string(t.pathAt(i)) >= p })
	return i, i < t.n && string(t.pathAt(i)) == p
}

// writeTable replaces path with the table of the records add is given, in
// path order, whole or not at all. Neither the records nor their offsets
// are held in memory: the offsets wait in an unnamed scratch file.
func writeTable(path, magic string, records func(add func(rec []byte) error) error) error {
	scratch, err := os.CreateTemp(filepath.Dir(path), ".table-offsets-*")
	if err != nil {
		return err
	}
	os.Remove(scratch.Name())
	defer scratch.Close()
	offsets := bufio.NewWriterSize(scratch, 64<<10)
	return atomicfile.WriteFrom(path, 0o600, func(w io.Writer) error {
		var size uint64
		n := 0
		err := records(func(rec []byte) error {
			if size > 1<<32-1 || n == 1<<32-1 {
				return fmt.Errorf("too many paths for the session's base")
			}
			var off [4]byte
			binary.LittleEndian.PutUint32(off[:], uint32(size))
			if _, err := offsets.Write(off[:]); err != nil {
				return err
			}
			size += uint64(len(rec))
			n++
			_, err := w.Write(rec)
			return err
		})
		if err != nil {
			return err
		}
		if err := offsets.Flush(); err != nil {
			return err
		}
		if _, err := scratch.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(w, scratch); err != nil {
			return err
		}
		if _, err := w.Write(binary.LittleEndian.AppendUint32(nil, uint32(n))); err != nil {
			return err
		}
		_, err = io.WriteString(w, magic)
		return err
	})
}
