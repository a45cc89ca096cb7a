package index

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Watch counts the changes to one filesystem: a session's workspace tmpfs,
// which holds its upper layer and nothing else. Events queue in the kernel
// (merged, and past the queue's size one overflow event stands for the
// rest), and are read only when Gen is asked, so a watched session costs
// no goroutine and no CPU.
type Watch struct {
	mu   sync.Mutex
	fd   int
	gen  uint64
	dead bool
	// id names this watch: a summary made under another watch (an engine
	// that has since stopped) says nothing about the changes in between.
	id string
}

// changeMask is every event that changes what a walk would find: contents,
// metadata and xattrs (the overlay's opaque marks), names, and directories
// themselves.
const changeMask = unix.FAN_MODIFY | unix.FAN_ATTRIB | unix.FAN_CLOSE_WRITE |
	unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_MOVED_FROM | unix.FAN_MOVED_TO |
	unix.FAN_DELETE_SELF | unix.FAN_MOVE_SELF | unix.FAN_ONDIR

// Start watches the filesystem mounted at mountPoint, which must be a tmpfs
// mount point of its own: a mark on a directory that is not one would
// watch the filesystem it lies on (the host's, perhaps) instead.
func Start(mountPoint string) (*Watch, error) {
	var st, parent unix.Stat_t
	var fs unix.Statfs_t
	if err := unix.Statfs(mountPoint, &fs); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if err := unix.Lstat(mountPoint, &st); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if err := unix.Lstat(filepath.Dir(mountPoint), &parent); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if fs.Type != unix.TMPFS_MAGIC || st.Dev == parent.Dev {
		return nil, fmt.Errorf("index: %s is not a tmpfs mount point", mountPoint)
	}
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|unix.FAN_REPORT_DFID_NAME, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("index: fanotify: %w", err)
	}
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, changeMask, unix.AT_FDCWD, mountPoint); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("index: fanotify mark: %w", err)
	}
	var b [8]byte
	rand.Read(b[:])
	return &Watch{fd: fd, id: hex.EncodeToString(b[:])}, nil
}

// StartTree returns a watch of the directories added to it (AddDir), each
// with its entries: a directory tree on a file system shared with others
// (a container's layer, in Docker's directory on the host's disk), where
// a mark on the whole file system would count every write of the host.
// Its marks are on the directories' inodes, with the events of their
// children: what is created, removed, renamed, written, chmodded or
// given an xattr in a marked directory, through an overlay mounted over
// it too (overlayfs changes its upper directory through these calls).
// Directories made later are seen made (in their marked parent) and
// must be added then.
func StartTree() (*Watch, error) {
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|unix.FAN_REPORT_DFID_NAME, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("index: fanotify: %w", err)
	}
	var b [8]byte
	rand.Read(b[:])
	return &Watch{fd: fd, id: hex.EncodeToString(b[:])}, nil
}

// AddDir marks the open directory dfd of a tree watch. A mark that fails
// (too many marks, a file system without file handles) kills the watch:
// its marks then never repeat, and the caller walks every time.
func (w *Watch) AddDir(dfd int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead {
		return
	}
	if err := unix.FanotifyMark(w.fd, unix.FAN_MARK_ADD|unix.FAN_MARK_INODE, changeMask|unix.FAN_EVENT_ON_CHILD, dfd, ""); err != nil {
		w.dead = true
	}
}

// Mark says where the workspace stands: two equal marks, taken with
// anything in between, mean nothing changed in between. A watch that
// failed gives a new mark each time (nothing is ever unchanged).
func (w *Watch) Mark() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead {
		w.gen++
		return fmt.Sprintf("%s-dead-%d", w.id, w.gen)
	}
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(w.fd, buf)
		if n > 0 {
			w.gen++
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil && !errors.Is(err, unix.EAGAIN) {
			w.dead = true
			w.gen++
		}
		break
	}
	return fmt.Sprintf("%s-%d", w.id, w.gen)
}

// Close ends the watch. Unmounting the filesystem ends the kernel's side
// too; Close frees the descriptor and whatever events still queue.
func (w *Watch) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return nil
	}
	err := unix.Close(w.fd)
	w.fd, w.dead = -1, true
	return err
}
