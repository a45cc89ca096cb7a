package review

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// stagers write an accept's small staged files on a few goroutines, so
// that creating them — most of an accept's time: the file system's inode
// allocation — runs beside the review of the next files and on more than
// one core. Files are handed on by staged directory, each directory to
// one goroutine, since creates in one directory take its lock in turn.
// What a file's content is (and that it is what was reviewed) is settled
// before it is handed on; a stager only writes it.
type stagers struct {
	t    *tree
	sfd  int // the staging directory, open for the whole accept
	jobs []chan stageJob
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error
	done bool
}

// maxStagedAsync is the largest content a stager writes: larger files are
// written by the accept's own goroutine, so what waits in the queues
// stays small (at most queue length times this).
const maxStagedAsync = 64 << 10

type stageJob struct {
	dir, name string // dir relative to the staging directory ("" for it)
	path      string // in the project, for errors
	data      []byte
	perm      uint32
}

func newStagers(t *tree, sfd, n int) *stagers {
	s := &stagers{t: t, sfd: sfd}
	for range n {
		ch := make(chan stageJob, 64)
		s.jobs = append(s.jobs, ch)
		s.wg.Add(1)
		go s.run(ch)
	}
	return s
}

// write hands a file on.
func (s *stagers) write(j stageJob) {
	h := fnv.New32a()
	h.Write([]byte(j.dir))
	s.jobs[int(h.Sum32()%uint32(len(s.jobs)))] <- j
}

func (s *stagers) run(jobs <-chan stageJob) {
	defer s.wg.Done()
	dir, dfd := "", s.sfd
	defer func() {
		if dfd != s.sfd {
			unix.Close(dfd)
		}
	}()
	for j := range jobs {
		if s.failed() != nil {
			continue // the accept rolls back: drain
		}
		if j.dir != dir {
			if dfd != s.sfd {
				unix.Close(dfd)
			}
			dir, dfd = "", s.sfd
			if j.dir != "" {
				fd, err := openBeneath(s.sfd, j.dir)
				if err != nil {
					s.fail(fmt.Errorf("%s: %w; the accept was rolled back and the project is unchanged", j.path, err))
					continue
				}
				dir, dfd = j.dir, fd
			}
		}
		if err := writeStaged(s.t, dfd, j.name, j.data, j.perm); err != nil {
			s.fail(fmt.Errorf("%s: %w; the accept was rolled back and the project is unchanged", j.path, err))
		}
	}
}

func (s *stagers) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// failed is the first failure to write a file, if any.
func (s *stagers) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// wait waits until every file handed on is written (or given up), ends
// the goroutines and returns the first failure. It may be called again.
func (s *stagers) wait() error {
	if !s.done {
		s.done = true
		for _, ch := range s.jobs {
			close(ch)
		}
		s.wg.Wait()
	}
	return s.failed()
}

// openBeneath opens directory rel beneath dirfd (a directory only the
// accept writes) one component at a time, never through a symlink.
func openBeneath(dirfd int, rel string) (int, error) {
	fd := dirfd
	for _, name := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if fd != dirfd {
			unix.Close(fd)
		}
		if err != nil {
			if errors.Is(err, unix.ELOOP) {
				return -1, fmt.Errorf("the staging directory %s has a symlink: refusing to write through it", rel)
			}
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// writeStaged creates name in dirfd with data, the tree's owner and mode
// perm.
func writeStaged(t *tree, dirfd int, name string, data []byte, perm uint32) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return diskFull(err)
	}
	defer unix.Close(fd)
	for off := 0; off < len(data) && err == nil; {
		var n int
		n, err = unix.Write(fd, data[off:])
		off += n
	}
	return finishStaged(t, fd, perm, err)
}
