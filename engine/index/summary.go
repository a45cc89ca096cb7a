package index

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Summary is one walk's summary of a session's changes, a line per
// changed path in a file of the session's directory, and what it holds
// under: the stamp it was made with (the watch's mark and whatever else
// the engine puts in) and the project paths it depends on.
type Summary struct {
	path  string
	stamp string
	count int
	width int // the longest path's length in bytes
	deps  []Dep
}

// Dep is a project path a summary depends on, as it was: a directory
// whose entries decide whether a changed path is an addition, or a file
// a change was measured against.
type Dep struct {
	Path string // relative to the project
	Key  Key
}

// Key is what identifies a version of a path without reading it.
type Key struct {
	Present            bool
	Ino                uint64
	Mode               uint32
	Size, Mtime, Ctime int64
}

func keyOf(p string) (Key, error) {
	var st unix.Stat_t
	err := unix.Lstat(p, &st)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return Key{}, nil
	}
	if err != nil {
		return Key{}, err
	}
	return Key{Present: true, Ino: st.Ino, Mode: st.Mode, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
}

// maxDeps bounds what a summary keeps in memory: a walk that depends on
// more project paths than this is not kept.
const maxDeps = 10000

// racy is how recent a dependency's change may be for a summary to rely
// on it: within a timestamp's granularity a second change can leave the
// same stat data ("racily clean", as git says).
const racy = time.Second

// Writer makes a summary: lines added in order to a temporary file, kept
// by Commit or dropped by Abort.
type Writer struct {
	path, project string
	f             *os.File
	bw            *bufio.Writer
	count, width  int
	deps          map[string]Key
	tooMany       bool
	err           error
}

// Create starts a summary to be kept at file, depending on paths of
// project.
func Create(file, project string) (*Writer, error) {
	f, err := os.CreateTemp(filepath.Dir(file), ".summary-*")
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	return &Writer{path: file, project: project, f: f, bw: bufio.NewWriterSize(f, 64<<10), deps: map[string]Key{}}, nil
}

// Add adds one line (without its newline) for a changed path rel. present
// says whether the path exists in the project (a change measured against
// it); either way its nearest existing directory is a dependency, since a
// path that appears in the project changes it.
func (w *Writer) Add(line []byte, rel string, present bool) error {
	if w.err != nil {
		return w.err
	}
	w.Depend(rel, present)
	w.count++
	w.width = max(w.width, len(rel))
	if _, err := w.bw.Write(line); err != nil {
		w.err = err
		return err
	}
	w.err = w.bw.WriteByte('\n')
	return w.err
}

// Depend adds a project path the summary depends on without a line: the
// path a rename came from.
func (w *Writer) Depend(rel string, present bool) {
	if present {
		w.depend(rel)
	}
	for d := path.Dir(rel); !w.tooMany; d = path.Dir(d) {
		if _, seen := w.deps[d]; seen {
			break
		}
		if k := w.depend(d); k.Present || d == "." {
			break
		}
	}
}

func (w *Writer) depend(rel string) Key {
	if k, ok := w.deps[rel]; ok {
		return k
	}
	if len(w.deps) >= maxDeps {
		w.tooMany = true
		return Key{}
	}
	k, err := keyOf(filepath.Join(w.project, rel))
	if err != nil {
		w.err = err
	}
	w.deps[rel] = k
	return k
}

// Commit keeps the summary, made under stamp. It keeps nothing (an error)
// when a dependency changed within the racy window, or there were too
// many; the caller then walks again next time.
func (w *Writer) Commit(stamp string) (*Summary, error) {
	defer w.Abort()
	if w.err != nil {
		return nil, w.err
	}
	if w.tooMany {
		return nil, fmt.Errorf("index: the changes depend on more than %d project paths", maxDeps)
	}
	deps := make([]Dep, 0, len(w.deps))
	now := time.Now().UnixNano()
	for p, k := range w.deps {
		if k.Present && (now-k.Mtime < int64(racy) || now-k.Ctime < int64(racy)) {
			return nil, fmt.Errorf("index: %s changed too recently to rely on", p)
		}
		deps = append(deps, Dep{Path: p, Key: k})
	}
	if err := w.bw.Flush(); err != nil {
		return nil, err
	}
	if err := os.Rename(w.f.Name(), w.path); err != nil {
		return nil, err
	}
	return &Summary{path: w.path, stamp: stamp, count: w.count, width: w.width, deps: deps}, nil
}

// Abort drops an uncommitted summary.
func (w *Writer) Abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

// Holds says whether the summary still describes the session: made under
// the same stamp, and every project path it depends on as it was.
func (s *Summary) Holds(stamp, project string) bool {
	if s == nil || s.stamp != stamp {
		return false
	}
	for _, d := range s.deps {
		if k, err := keyOf(filepath.Join(project, d.Path)); err != nil || k != d.Key {
			return false
		}
	}
	return true
}

// Count is how many lines (changed paths) the summary has.
func (s *Summary) Count() int { return s.count }

// Width is the length of the longest changed path, in bytes.
func (s *Summary) Width() int { return s.width }

// Each hands each line of the summary on, without its newline; the
// slice is valid until the next call.
func (s *Summary) Each(each func(line []byte) error) error {
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 0; ; n++ {
		line, err := r.ReadSlice('\n')
		if err == io.EOF && len(line) == 0 {
			if n != s.count {
				return fmt.Errorf("index: the summary has %d lines, not %d", n, s.count)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("index: reading the summary: %w", err)
		}
		if err := each(line[:len(line)-1]); err != nil {
			return err
		}
	}
}

// Remove deletes the summary's file.
func (s *Summary) Remove() {
	if s != nil {
		os.Remove(s.path)
	}
}
