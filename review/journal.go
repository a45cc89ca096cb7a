package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/airlock/airlock/atomicfile"
	"golang.org/x/sys/unix"
)

// The accept journal makes an accept all-or-nothing: every file's new
// content is staged in a hidden directory of the project and synced, then
// the journal is committed, then the staged files are renamed into place.
// A crash before the commit leaves the project as it was (recovery removes
// the staging directory); a crash after it is finished by recovery, which
// redoes each operation idempotently. Either way each file is old or new.
type journal struct {
	State   string `json:"state"` // staging, committed
	Project string `json:"project"`
	Staging string `json:"staging"` // directory name in the project root
	Ops     []jop  `json:"ops"`
}

type jop struct {
	Op    string `json:"op"` // mkdir, remove, replace, chmod, rename
	Path  string `json:"path"`
	From  string `json:"from,omitempty"`  // rename: the old path
	Tmp   string `json:"tmp,omitempty"`   // replace: the staged name
	Mode  uint32 `json:"mode,omitempty"`  // mkdir, chmod: permission bits
	IsDir bool   `json:"isdir,omitempty"` // chmod of a directory
	Item  int    `json:"item"`
}

const (
	journalStaging   = "staging"
	journalCommitted = "committed"
)

// writeJournal replaces the journal at path durably.
func writeJournal(path string, j *journal) error {
	data, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}

func removeJournal(path string) error { return atomicfile.Remove(path) }

// Recover finishes or rolls back an accept that a crash interrupted. It
// does nothing when there is no journal at path.
func Recover(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("accept journal %s is unreadable (%v): move it aside after checking the project", path, err)
	}
	st, err := os.Stat(j.Project)
	if err != nil {
		return fmt.Errorf("the interrupted accept's project %s: %w", j.Project, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	t, err := openTree(j.Project, int(sys.Uid), int(sys.Gid))
	if err != nil {
		return err
	}
	defer t.close()
	if j.State == journalCommitted {
		for _, op := range j.Ops {
			if err := t.do(op, j.Staging, nil); err != nil {
				return fmt.Errorf("finish the interrupted accept (%s %s): %w", op.Op, op.Path, err)
			}
		}
		unix.Syncfs(t.fds["."])
	}
	if j.Staging != "" {
		if err := removeAll(t.fds["."], j.Staging); err != nil {
			return err
		}
	}
	return removeJournal(path)
}

// do performs one journal operation. Every operation is idempotent, so a
// recovery may redo one that already happened.
func (t *tree) do(op jop, staging string, mkMode func(string) fs.FileMode) error {
	if mkMode == nil {
		mkMode = func(string) fs.FileMode { return 0o755 }
	}
	switch op.Op {
	case "mkdir":
		pfd, name, err := t.parent(op.Path, mkMode)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return chmodAt(pfd, name, op.Mode)
			}
			if err := removeAll(pfd, name); err != nil {
				return err
			}
		}
		if err := t.mkdir(pfd, name, fs.FileMode(op.Mode&0o777)|modeFromUnix(op.Mode)); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		return nil
	case "remove":
		pfd, name, err := t.parent(op.Path, nil)
		if err != nil {
			var r *refusal
			if errors.As(err, &r) || errors.Is(err, unix.ENOENT) {
				return nil // the parent is gone or not a directory: so is the entry
			}
			return err
		}
		return removeAll(pfd, name)
	case "rename":
		sfd, sname, err := t.parent(op.From, nil)
		if err != nil {
			return nil // source gone: already renamed
		}
		var st unix.Stat_t
		if unix.Fstatat(sfd, sname, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return nil
		}
		dfd, dname, err := t.parent(op.Path, mkMode)
		if err != nil {
			return err
		}
		return unix.Renameat(sfd, sname, dfd, dname)
	case "replace":
		sfd, err := t.dir(staging, nil)
		if err != nil {
			return nil // staging gone: everything was renamed
		}
		pfd, name, err := t.parent(op.Path, mkMode)
		if err != nil {
			return err
		}
		// Try the rename first: it is all a fresh accept needs.
		err = unix.Renameat(sfd, op.Tmp, pfd, name)
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			// A directory stands where the file goes (a type change).
			if err := removeAll(pfd, name); err != nil {
				return err
			}
			err = unix.Renameat(sfd, op.Tmp, pfd, name)
		}
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil // already in place (a recovery redoing it)
		case errors.Is(err, unix.EXDEV):
			return fmt.Errorf("%s is on another filesystem than the project root: accept it separately", op.Path)
		}
		return err
	case "chmod":
		pfd, name, err := t.parent(op.Path, nil)
		if err != nil {
			return err
		}
		// The mode without setuid and setgid, whatever the journal says.
		return chmodAt(pfd, name, unixMode(fs.FileMode(op.Mode&0o777)|modeFromUnix(op.Mode)))
	}
	return fmt.Errorf("unknown journal operation %q", op.Op)
}

func modeFromUnix(m uint32) fs.FileMode {
	var fm fs.FileMode
	if m&unix.S_ISVTX != 0 {
		fm |= fs.ModeSticky
	}
	return fm
}
