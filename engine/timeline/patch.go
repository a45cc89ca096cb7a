package timeline

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/review"
)

// WritePatch writes files (a checkpoint diff) as a patch that `git apply`
// applies to the state the diff is from: text files and symlinks as
// unified diffs, mode changes as git's mode lines. A binary or too large
// file is left out with a comment line (which git apply and patch skip)
// naming it.
func WritePatch(w io.Writer, files []api.FileDiff) error {
	bw := bufio.NewWriter(w)
	for _, f := range files {
		if f.Binary || f.Type == string(review.Special) || f.OldType == string(review.Special) ||
			f.Type == string(review.Dir) || f.OldType == string(review.Dir) {
			why := "binary"
			if f.TooLarge != "" {
				why = f.TooLarge
			} else if !f.Binary {
				why = "not a file"
			}
			fmt.Fprintf(bw, "# airlock: left out %s (%s, %s)\n", f.Path, f.Kind, why)
			continue
		}
		oldMode, newMode := gitMode(f.OldType, f.OldMode), gitMode(f.Type, f.Mode)
		fmt.Fprintf(bw, "diff --git a/%s b/%s\n", f.Path, f.Path)
		switch {
		case f.OldType == "":
			fmt.Fprintf(bw, "new file mode %s\n", newMode)
		case f.Type == "":
			fmt.Fprintf(bw, "deleted file mode %s\n", oldMode)
		case oldMode != newMode:
			fmt.Fprintf(bw, "old mode %s\nnew mode %s\n", oldMode, newMode)
		}
		if len(f.Hunks) == 0 {
			continue
		}
		from, to := "a/"+f.Path, "b/"+f.Path
		if f.OldType == "" {
			from = "/dev/null"
		}
		if f.Type == "" {
			to = "/dev/null"
		}
		fmt.Fprintf(bw, "--- %s\n+++ %s\n", from, to)
		for _, h := range f.Hunks {
			fmt.Fprintf(bw, "@@ -%d,%d +%d,%d @@\n", h.OldStart, h.OldLines, h.NewStart, h.NewLines)
			for _, l := range h.Lines {
				bw.WriteString(l)
				if !strings.HasSuffix(l, "\n") {
					bw.WriteString("\n\\ No newline at end of file\n")
				}
			}
		}
	}
	return bw.Flush()
}

// gitMode is the mode git records for an entry of type typ.
func gitMode(typ string, m fs.FileMode) string {
	switch typ {
	case string(review.Symlink):
		return "120000"
	case string(review.File):
		if m&0o100 != 0 {
			return "100755"
		}
		return "100644"
	}
	return ""
}
