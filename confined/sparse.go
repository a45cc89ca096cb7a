package confined

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Region is a stretch of a sparse file that holds data.
type Region struct{ Off, Len int64 }

// DataRegions lists where the open file fd of size bytes holds data
// (SEEK_DATA/SEEK_HOLE), so that a sparse file is read, stored and
// written as its data only; nil means it has no hole, an empty list that
// it is all hole. Holes shorter than a minimum are taken as data, the
// minimum doubling until at most max regions remain (max <= 0: no
// limit), so a file of a million fragments costs a bounded map; the
// result depends only on the file's layout.
func DataRegions(fd int, size int64, max int) ([]Region, error) {
	var regions []Region
	var total int64
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // a hole to the end
		}
		if err != nil {
			return nil, err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		if hole = min(hole, size); hole <= data {
			break
		}
		regions = append(regions, Region{data, hole - data})
		total += hole - data
		off = hole
	}
	if total == size {
		return nil, nil
	}
	if regions == nil {
		return []Region{}, nil
	}
	for gap := int64(64 << 10); max > 0 && len(regions) > max; gap *= 2 {
		merged := regions[:1]
		for _, rg := range regions[1:] {
			last := &merged[len(merged)-1]
			if rg.Off-(last.Off+last.Len) < gap {
				last.Len = rg.Off + rg.Len - last.Off
				continue
			}
			merged = append(merged, rg)
		}
		regions = merged
	}
	return regions, nil
}
