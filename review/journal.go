package review

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"unicode/utf8"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/names"
	"golang.org/x/sys/unix"
)

// The accept journal makes an accept all-or-nothing: every file's new
// content is staged in a hidden directory of the project and synced, then
// the journal is committed, then the staged files are renamed into place.
// A crash before the commit leaves the project as it was (recovery removes
// the staging directory); a crash after it is finished by recovery, which
// redoes each operation idempotently. Either way each file is old or new.
//
// The journal is a stream of JSON records, one a line, so that neither an
// accept nor its recovery holds it whole, however many files it writes:
//
//	{"journal":2,"project":P,"staging":S}   written whole, before anything is staged
//	{"op":...}                              one per operation, appended as items are planned
//	{"op":"commit"}                         appended once everything is staged and synced
//
// A directory new to the project is staged whole, with everything under
// it, and its one "place" operation renames it into place: files in it
// have no operations of their own.
//
// Operations are done in two rounds: first those of renames (marked
// "first"), which move their sources before a deleted directory that held
// them goes, then the others, each round in the order written. Without the
// commit record (or with a torn last line) the accept never started
// writing the project, and recovery only removes the staging directory.
//
// A journal of the first format (one JSON document: state, project,
// staging and ops) is still recovered.
type journalHead struct {
	Version int    `json:"journal,omitempty"`
	Project string `json:"project"`
	Staging string `json:"staging"` // directory name in the project root
	// The first format's state (staging, committed) and operations.
	State string `json:"state,omitempty"`
	Ops   []jop  `json:"ops,omitempty"`
}

// journalVersion 3 added "place"; an older engine refuses such a journal
// rather than skip its operations.
const journalVersion = 3

type jop struct {
	Op   string `json:"op"` // mkdir, remove, replace, place, chmod, rename; commit ends the journal
	Path string `json:"path,omitempty"`
	From string `json:"from,omitempty"` // rename: the old path
	// RawPath and RawFrom hold paths that are not valid UTF-8, which JSON
	// would mangle.
	RawPath []byte `json:"raw_path,omitempty"`
	RawFrom []byte `json:"raw_from,omitempty"`
	Tmp     string `json:"tmp,omitempty"`   // replace, place: the staged name
	Mode    uint32 `json:"mode,omitempty"`  // mkdir, chmod: permission bits
	IsDir   bool   `json:"isdir,omitempty"` // chmod of a directory
	First   bool   `json:"first,omitempty"` // done in the first round (renames)
	Item    int    `json:"item"`
}

const (
	journalStaging   = "staging"
	journalCommitted = "committed"
	opCommit         = "commit"
)

// journalWriter appends an accept's journal.
type journalWriter struct {
	path string
	f    *os.File
	w    *bufio.Writer
	enc  *json.Encoder
}

// createJournal writes the journal's head durably (whole or not at all:
// recovery always finds the staging directory's name) and opens the
// journal to append operations.
func createJournal(path, project, staging string) (*journalWriter, error) {
	head, err := json.Marshal(journalHead{Version: journalVersion, Project: project, Staging: staging})
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, append(head, '\n'), 0o600); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	return &journalWriter{path: path, f: f, w: w, enc: json.NewEncoder(w)}, nil
}

func (j *journalWriter) add(op jop) error {
	if !utf8.ValidString(op.Path) {
		op.RawPath, op.Path = []byte(op.Path), ""
	}
	if !utf8.ValidString(op.From) {
		op.RawFrom, op.From = []byte(op.From), ""
	}
	return j.enc.Encode(op)
}

// commit makes the operations durable, then the commit record: from its
// return on, a crash is finished by Recover.
func (j *journalWriter) commit() error {
	if err := j.w.Flush(); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	if err := j.add(jop{Op: opCommit}); err != nil {
		return err
	}
	if err := j.w.Flush(); err != nil {
		return err
	}
	return j.f.Sync()
}

func (j *journalWriter) close() { j.f.Close() }

func removeJournal(path string) error { return atomicfile.Remove(path) }

// readJournal opens the journal at path and reads its head; a nil file
// with no error means there is none.
func readJournal(path string) (*os.File, *json.Decoder, journalHead, error) {
	var head journalHead
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, head, nil
	}
	if err != nil {
		return nil, nil, head, err
	}
	dec := json.NewDecoder(bufio.NewReaderSize(f, 64<<10))
	if err := dec.Decode(&head); err != nil {
		f.Close()
		return nil, nil, head, fmt.Errorf("accept journal %s is unreadable (%v): move it aside after checking the project", path, err)
	}
	if head.Version > journalVersion {
		f.Close()
		return nil, nil, head, fmt.Errorf("accept journal %s was written by a newer Airlock (format %d): finish the interrupted accept with that version's engine, or move the journal aside after checking the project", path, head.Version)
	}
	return f, dec, head, nil
}

// eachOp calls do with the journal's operations of one round (first: the
// renames'), in order. The journal must be committed.
func eachOp(path string, first bool, do func(jop) error) error {
	f, dec, head, err := readJournal(path)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	if head.Version == 0 && !first {
		return nil // the first format's operations are in order: one round
	}
	next := func() (jop, bool) {
		if head.Version == 0 {
			if len(head.Ops) == 0 {
				return jop{}, false
			}
			op := head.Ops[0]
			head.Ops = head.Ops[1:]
			return op, true
		}
		var op jop
		if dec.Decode(&op) != nil || op.Op == opCommit {
			return jop{}, false
		}
		return op, true
	}
	for op, ok := next(); ok; op, ok = next() {
		if op.RawPath != nil {
			op.Path = string(op.RawPath)
		}
		if op.RawFrom != nil {
			op.From = string(op.RawFrom)
		}
		if head.Version != 0 && op.First != first {
			continue
		}
		if err := do(op); err != nil {
			return err
		}
	}
	return nil
}

// committed reports whether the journal read so far (its head decoded
// with dec) has its commit record.
func committed(dec *json.Decoder, head journalHead) bool {
	if head.Version == 0 {
		return head.State == journalCommitted
	}
	for {
		var op jop
		if err := dec.Decode(&op); err != nil {
			return false // the end, or a torn last line: never committed
		}
		if op.Op == opCommit {
			return true
		}
	}
}

// Recover finishes or rolls back an accept that a crash interrupted. It
// does nothing when there is no journal at path. It reads the journal as a
// stream: recovering an accept of any number of files takes little memory.
func Recover(path string) error {
	f, dec, head, err := readJournal(path)
	if err != nil || f == nil {
		return err
	}
	done := committed(dec, head)
	f.Close()
	st, err := os.Stat(head.Project)
	if err != nil {
		return fmt.Errorf("the interrupted accept's project %s: %w", head.Project, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	t, err := openTree(head.Project, int(sys.Uid), int(sys.Gid))
	if err != nil {
		return err
	}
	defer t.close()
	if done {
		for _, first := range []bool{true, false} {
			err := eachOp(path, first, func(op jop) error {
				t.trim(head.Staging)
				if err := t.do(op, head.Staging, nil); err != nil {
					return fmt.Errorf("finish the interrupted accept (%s %s): %w", op.Op, names.Quote(op.Path), err)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		unix.Syncfs(t.fds["."])
	}
	if head.Staging != "" {
		if err := removeAll(t.fds["."], head.Staging); err != nil {
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
			return fmt.Errorf("%s is on another filesystem than the project root: accept it separately", names.Quote(op.Path))
		}
		return err
	case "place":
		// A directory new to the project, staged whole with everything
		// under it.
		sfd, err := t.dir(staging, nil)
		if err != nil {
			return nil // staging gone: everything was placed
		}
		pfd, name, err := t.parent(op.Path, mkMode)
		if err != nil {
			return err
		}
		return placeTree(sfd, op.Tmp, pfd, name)
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
