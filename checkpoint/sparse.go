package checkpoint

import (
	"errors"

	"golang.org/x/sys/unix"
)

// dataRegions lists where the open file fd of size bytes holds data
// (SEEK_DATA/SEEK_HOLE); nil means it has no hole. Holes shorter than a
// minimum are taken as data, the minimum doubling until at most
// maxRegions remain, so a file of a million fragments costs a bounded
// entry.
func dataRegions(fd int, size int64) ([]Region, error) {
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
		return []Region{}, nil // all hole
	}
	for gap := int64(64 << 10); len(regions) > maxRegions; gap *= 2 {
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
