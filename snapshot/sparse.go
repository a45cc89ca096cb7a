package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
)

// dataRegions lists where the open file fd of size bytes holds data
// (confined.DataRegions, at most maxFragments regions, so that the map
// fits a PAX record). nil means no hole: not sparse.
func dataRegions(fd int, size int64) ([]region, error) {
	rs, err := confined.DataRegions(fd, size, maxFragments)
	if rs == nil || err != nil {
		return nil, err
	}
	regions := make([]region, len(rs))
	for i, r := range rs {
		regions[i] = region{r.Off, r.Len}
	}
	return regions, nil
}

// sparseHeader is what a sparse file's entry records.
type sparseHeader struct {
	name     string
	mode     int64
	uid, gid int
	mtime    time.Time
	size     int64 // apparent
	regions  []region
	xattrs   map[string]string
}

// writeSparse writes a sparse file's entry in GNU's PAX sparse format 0.1
// to w, which must be at an entry boundary of the tar (after the tar
// writer's Flush): a PAX header whose records hold the name, the times,
// the owner, the map (GNU.sparse.map of offset,length pairs) and the
// apparent size, then the file's header and only its data, read from fd.
// Go's archive/tar reads this (it cannot write it: its writer drops the
// GNU.sparse records), and so does GNU tar.
func writeSparse(w io.Writer, h sparseHeader, fd int, buf []byte) (int64, error) {
	var data int64
	var m []string
	for _, r := range h.regions {
		data += r.len
		m = append(m, strconv.FormatInt(r.off, 10), strconv.FormatInt(r.len, 10))
	}
	// In this order: GNU tar reads the records in turn, and needs the
	// number of regions before the map.
	rec := [][2]string{
		{"path", h.name},
		{"mtime", paxTime(h.mtime)},
		{"uid", strconv.Itoa(h.uid)},
		{"gid", strconv.Itoa(h.gid)},
		{"size", strconv.FormatInt(data, 10)},
	}
	for _, k := range slices.Sorted(maps.Keys(h.xattrs)) {
		rec = append(rec, [2]string{xattrPAX + k, h.xattrs[k]})
	}
	rec = append(rec, [2]string{sparseSize, strconv.FormatInt(h.size, 10)}, [2]string{sparseNumBlocks, strconv.Itoa(len(h.regions))},
		[2]string{sparseMap, strings.Join(m, ",")})
	var pax bytes.Buffer
	for _, r := range rec {
		pax.WriteString(paxRecord(r[0], r[1]))
	}
	dir, file := path.Split(h.name)
	paxHdr := ustar(path.Join(dir, "PaxHeaders.0", file), 'x', 0o644, 0, 0, int64(pax.Len()), h.mtime)
	fileHdr := ustar(h.name, '0', h.mode, h.uid, h.gid, data, h.mtime)
	pad := func(n int64) []byte { return make([]byte, (512-n%512)%512) }
	for _, b := range [][]byte{paxHdr, pax.Bytes(), pad(int64(pax.Len())), fileHdr} {
		if _, err := w.Write(b); err != nil {
			return 0, err
		}
	}
	for _, r := range h.regions {
		for off := r.off; off < r.off+r.len; {
			n, err := unix.Pread(fd, buf[:min(int64(len(buf)), r.off+r.len-off)], off)
			if err != nil {
				return 0, err
			}
			if n == 0 {
				return 0, fmt.Errorf("%s shrank while it was read: it was written during the snapshot", h.name)
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return 0, err
			}
			off += int64(n)
		}
	}
	_, err := w.Write(pad(data))
	return data, err
}

// paxRecord formats one PAX record: "LEN key=value\n", LEN counting
// itself.
func paxRecord(k, v string) string {
	body := " " + k + "=" + v + "\n"
	n := len(body) + len(strconv.Itoa(len(body)))
	if len(strconv.Itoa(n)) > len(strconv.Itoa(len(body))) {
		n++
	}
	return strconv.Itoa(n) + body
}

func paxTime(t time.Time) string {
	s := strconv.FormatInt(t.Unix(), 10)
	if ns := t.Nanosecond(); ns != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%09d", ns), "0")
	}
	return s
}

// ustar is a USTAR header block. Fields that do not fit are left zero:
// the PAX records before it carry them.
func ustar(name string, typ byte, mode int64, uid, gid int, size int64, mtime time.Time) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	octal := func(f []byte, v int64) {
		s := strconv.FormatInt(v, 8)
		if v < 0 || len(s) > len(f)-1 {
			s = "0"
		}
		copy(f, strings.Repeat("0", len(f)-1-len(s))+s)
	}
	octal(b[100:108], mode)
	octal(b[108:116], int64(uid))
	octal(b[116:124], int64(gid))
	octal(b[124:136], size)
	octal(b[136:148], max(mtime.Unix(), 0))
	b[156] = typ
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}
