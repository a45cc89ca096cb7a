package checkpoint

import "github.com/airlock/airlock/confined"

// dataRegions lists the data regions of the open file fd (nil: no hole),
// at most maxRegions of them.
func dataRegions(fd int, size int64) ([]Region, error) {
	rs, err := confined.DataRegions(fd, size, maxRegions)
	if rs == nil || err != nil {
		return nil, err
	}
	out := make([]Region, len(rs))
	for i, r := range rs {
		out[i] = Region{r.Off, r.Len}
	}
	return out, nil
}
