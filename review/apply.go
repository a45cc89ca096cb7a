package review

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/airlock/airlock/confined"
	"golang.org/x/sys/unix"
)

// Outcome is what happened to one selected change.
type Outcome struct {
	Path    string `json:"path"`
	Kind    Kind   `json:"kind"`
	Applied bool   `json:"applied"`
	// Partial is set when only some hunks or lines were taken.
	Partial bool `json:"partial,omitempty"`
	// Error says why the change was not applied; the project's file is
	// untouched.
	Error string `json:"error,omitempty"`
	// Left is set when an accept left the change in the session on
	// purpose: "held" (the policy holds it), "flagged" (a scanner found
	// something) or "unreviewed" (not among the pinned changes: new since
	// the review). Reason says why and how to take it.
	Left   string `json:"left,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Digest is the digest of the session's version that was taken.
	Digest string `json:"digest,omitempty"`
}

// Accept writes the selected changes into the project, all or nothing:
// see the journal. Before anything is written, changes that cannot be
// accepted are set aside and reported (an unresolved conflict, a device
// file, a path through a symlink); if writing the others fails (a full
// disk), none of them is applied. Nothing is written outside the project
// root or through a symlink. Files belong to the project root's owner and
// keep the session's permission bits without setuid and setgid (a partial
// accept keeps the project file's mode).
//
// What is written is what diffs describe: each file is staged from the
// bytes the review read, or copied from the session while hashed and
// refused unless it still has the review's digest. With sel.Digests, diffs
// must also be what the user reviewed. Either way a change is a
// *ChangedError and nothing is written. Unless named or
// sel.IncludeFlagged, changes the policy holds or a scanner flagged are
// left in the session (Outcome.Left), and so are, in a pinned selection,
// changes it does not pin. diffs must have been through Policy.Check for
// that: unchecked diffs have no holds or findings.
//
// journalPath is where the accept journal lives while the accept runs;
// call Recover on it after a crash.
func Accept(l Layers, diffs []FileDiff, sel Selection, journalPath string) ([]Outcome, error) {
	var out []Outcome
	err := AcceptEach(l, sel, journalPath, func(each func([]FileDiff) error) error { return each(diffs) }, func(o Outcome) error {
		out = append(out, o)
		return nil
	})
	if err != nil && out == nil {
		return nil, err
	}
	if out == nil {
		out = []Outcome{}
	}
	return out, err
}

// AcceptEach is Accept over a review handed on a batch at a time: review
// calls its argument with each batch in path order (as ReviewEach does),
// and the outcomes go to each, in the same order, once the accept is done.
// Each batch's items are planned and their content staged before the next
// batch comes; what the commit and the outcomes need of each file is kept
// in the journal and a scratch file, not in memory. So an accept of any
// number of files holds one batch and a few bytes per selected path or id.
//
// An error before any outcome was handed on means nothing was written. An
// error after some (the session's base could not record the accept, or
// each failed) comes once the project is written.
func AcceptEach(l Layers, sel Selection, journalPath string, review func(func([]FileDiff) error) error, each func(Outcome) error) error {
	if err := Recover(journalPath); err != nil {
		return err
	}
	s, err := newSelector(l, sel, true)
	if err != nil {
		return err
	}
	a, err := newAccepter(l, journalPath)
	if err != nil {
		return err
	}
	defer a.close()
	if sel.Patch != "" {
		err = a.patch(review, sel.Patch)
	} else {
		err = review(func(batch []FileDiff) error {
			for i := range batch {
				if it, ok := s.pick(&batch[i]); ok {
					if err := a.add(it, !s.failing()); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err == nil {
			err = s.finish()
		}
	}
	if err != nil {
		return err
	}
	return a.commit(each)
}

// patch plans an edited patch: the review's files it concerns are kept
// (without their hunks) until the review is done, then the patch is
// applied to the project's files.
func (a *accepter) patch(review func(func([]FileDiff) error) error, patch string) error {
	files, err := parseEdited(patch)
	if err != nil {
		return err
	}
	paths := patchPaths(files)
	var diffs []FileDiff
	err = review(func(batch []FileDiff) error {
		for i := range batch {
			if patchConcerns(paths, &batch[i]) {
				c := batch[i].Change
				c.data, c.hostInfo, c.cached = nil, nil, nil
				diffs = append(diffs, FileDiff{Change: c})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	items, err := planPatch(a.l, diffs, files)
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := a.add(it, true); err != nil {
			return err
		}
	}
	return nil
}

// accepter carries an accept from its items to its outcomes. Each item is
// written down as it comes: its operations appended to the journal, its
// new content staged, and its settled record (its outcome as planned, and
// what the session's base must learn of it) to a scratch file. Nothing
// per file stays in memory.
type accepter struct {
	l           Layers
	journalPath string
	t           *tree
	upper       *confined.Root
	mkMode      func(string) fs.FileMode
	staging     string
	journal     *journalWriter // nil until an item has operations
	sfd         int            // the staging directory, once made
	open        []int          // staged files whose writeback is not waited for yet
	scratch     *os.File
	sw          *bufio.Writer
	senc        *gob.Encoder
	items       int
	// cause is why the accept writes nothing (staging failed); items
	// after it are only planned, for their outcomes.
	cause     error
	committed bool
}

// settled is what an accept keeps of one item between planning it and
// reporting it. (gob, unlike JSON, keeps a path that is not UTF-8.)
type settled struct {
	Outcome
	Ops     bool   // written by journal operations: applied once they are done
	Want    string // the digest taken, when the whole change is
	Base    bool   // the session's base learns of it once written
	From    string // a rename's source, which leaves the base
	Content *string
	Sum     string
}

func newAccepter(l Layers, journalPath string) (*accepter, error) {
	st, err := os.Stat(l.Project)
	if err != nil {
		return nil, fmt.Errorf("project %s: %w", l.Project, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	a := &accepter{l: l, journalPath: journalPath, sfd: -1, staging: ".airlock-staging-" + randHex()}
	if a.t, err = openTree(l.Project, int(sys.Uid), int(sys.Gid)); err != nil {
		return nil, err
	}
	// The session's side is read beneath its upper layer only, never
	// through a symlink, never a FIFO or device.
	if a.upper, err = confined.OpenRoot(l.Upper); err != nil {
		a.t.close()
		return nil, err
	}
	a.mkMode = func(rel string) fs.FileMode {
		if fi, err := a.upper.Lstat(rel); err == nil && fi.IsDir() {
			return fi.Mode()
		}
		return 0o755
	}
	// The scratch file has no name: nothing is left of it after a crash.
	if a.scratch, err = os.CreateTemp(filepath.Dir(journalPath), ".accept-scratch-*"); err != nil {
		a.upper.Close()
		a.t.close()
		return nil, err
	}
	os.Remove(a.scratch.Name())
	a.sw = bufio.NewWriterSize(a.scratch, 64<<10)
	a.senc = gob.NewEncoder(a.sw)
	return a, nil
}

// close ends the accept; unless it was committed, nothing of it is left.
func (a *accepter) close() {
	a.waitStaged()
	if !a.committed {
		a.rollback()
	}
	if a.journal != nil {
		a.journal.close()
	}
	a.scratch.Close()
	a.upper.Close()
	a.t.close()
}

func (a *accepter) rollback() {
	if a.journal == nil {
		return
	}
	removeAll(a.t.fds["."], a.staging)
	removeJournal(a.journalPath)
}

// add plans item it: its outcome so far, its journal operations and, when
// stage is set and nothing failed yet, its staged content.
func (a *accepter) add(it item, stage bool) error {
	i := a.items
	a.items++
	c := it.d.Change
	r := settled{Outcome: Outcome{Path: c.Path, Kind: c.Kind, Partial: !it.whole}}
	switch {
	case it.left != "":
		r.Left, r.Reason = it.left, it.reason
	case it.err != nil:
		r.Error = it.err.Error()
	case it.skip:
		r.Applied = true
	case !safePath(c.Path):
		r.Error = fmt.Sprintf("refusing unsafe path %q", c.Path)
	case c.Type == Special && it.content == nil:
		r.Error = "skipped: " + c.Note
	default:
		a.t.trim(a.staging)
		if err := a.t.check(c.Path); err != nil {
			r.Error = err.Error()
			break
		}
		if c.Kind == Renamed {
			if err := a.t.check(c.From); err != nil {
				r.Error = err.Error()
				break
			}
		}
		r.Ops = true
		if it.whole {
			r.Want = it.d.Digest
		}
		if c.Type != Dir {
			r.Base, r.Content = true, it.content
			if c.Kind == Renamed {
				r.From = c.From
			}
		}
		if stage && a.cause == nil {
			sum, err := a.write(it, i)
			r.Sum = sum
			if err != nil {
				a.cause = err
			}
		}
	}
	return a.senc.Encode(&r)
}

func safePath(p string) bool {
	_, err := CleanPath(p)
	return err == nil && p != "."
}

// write appends item i's operations to the journal and stages its new
// content; an error is the accept's failure (nothing is written then).
func (a *accepter) write(it item, i int) (sum string, err error) {
	if a.journal == nil {
		if a.journal, err = createJournal(a.journalPath, a.l.Project, a.staging); err != nil {
			return "", fmt.Errorf("write the accept journal: %w", err)
		}
	}
	ops, staged := opsFor(it, i)
	for _, op := range ops {
		// Renames move their sources before a deleted directory that
		// held them goes.
		op.First = it.d.Kind == Renamed
		if err := a.journal.add(op); err != nil {
			return "", fmt.Errorf("write the accept journal: %w", err)
		}
	}
	if !staged {
		return "", nil
	}
	if a.sfd < 0 {
		if err := unix.Mkdirat(a.t.fds["."], a.staging, 0o700); err != nil {
			return "", fmt.Errorf("create the staging directory: %w", err)
		}
		if a.sfd, err = a.t.dir(a.staging, nil); err != nil {
			return "", err
		}
	}
	sum, fd, err := stage(a.t, a.sfd, ops[len(ops)-1].Tmp, a.upper, a.l, it)
	if err != nil {
		var ce *ChangedError
		if errors.As(err, &ce) {
			return "", &ChangedError{Paths: []string{it.d.Path}}
		}
		return "", fmt.Errorf("%s: %w; the accept was rolled back and the project is unchanged", it.d.Path, err)
	}
	if fd >= 0 {
		a.open = append(a.open, fd)
	}
	if len(a.open) >= 256 {
		if err := a.waitStaged(); err != nil {
			return sum, fmt.Errorf("write back staged files: %w", err)
		}
	}
	return sum, nil
}

// waitStaged waits for the staged files' writeback and closes them. Every
// staged file's writeback starts as soon as it is written; waiting for
// them in batches, then one fsync of the staging directory, commits their
// data and metadata and flushes the disk cache: far cheaper than an fsync
// per file, and unlike syncfs it does not wait for unrelated dirty data on
// the filesystem.
func (a *accepter) waitStaged() error {
	var first error
	for _, fd := range a.open {
		if err := unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER); err != nil && first == nil {
			first = err
		}
		unix.Close(fd)
	}
	a.open = a.open[:0]
	return first
}

// commit makes the accept durable and does it, records it in the session's
// base and hands the outcomes to each.
func (a *accepter) commit(each func(Outcome) error) error {
	if a.cause == nil && a.journal != nil {
		a.cause = a.sync()
	}
	if a.cause != nil {
		a.rollback()
		if a.journal != nil {
			a.journal.close()
			a.journal = nil
		}
		var ce *ChangedError
		if errors.As(a.cause, &ce) {
			return ce
		}
		return a.report(each, nil)
	}
	if a.journal == nil {
		return a.report(each, nil) // nothing to write
	}
	a.committed = true
	// Committed: from here a crash is finished by Recover.
	failed := map[int]string{}
	dirs := map[string]bool{}
	for _, first := range []bool{true, false} {
		err := eachOp(a.journalPath, first, func(op jop) error {
			if _, ok := failed[op.Item]; ok {
				return nil
			}
			a.t.trim(a.staging)
			if err := a.t.do(op, a.staging, a.mkMode); err != nil {
				failed[op.Item] = err.Error()
			}
			a.syncDirs(dirs, op)
			return nil
		})
		if err != nil {
			return err
		}
	}
	for dir := range dirs {
		a.syncDir(dir)
	}
	removeAll(a.t.fds["."], a.staging)
	jerr := removeJournal(a.journalPath)
	// What was written is the new common base of the host and the session.
	if err := a.recordBase(failed); err != nil {
		return fmt.Errorf("record the accepted files in the session's base: %w", err)
	}
	if err := a.report(each, failed); err != nil {
		return err
	}
	return jerr
}

// sync makes everything staged and the journal's operations durable, then
// commits the journal.
func (a *accepter) sync() error {
	if err := a.waitStaged(); err != nil {
		return fmt.Errorf("write back staged files: %w", err)
	}
	if a.sfd >= 0 {
		if err := unix.Fsync(a.sfd); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	if err := a.journal.commit(); err != nil {
		return fmt.Errorf("commit the accept journal: %w", err)
	}
	return nil
}

// syncDirs notes the directories op changed; the renames are durable once
// they are synced. Operations come in path order, so a directory's come
// together: the set is synced and emptied when it grows.
func (a *accepter) syncDirs(dirs map[string]bool, op jop) {
	for _, p := range []string{op.Path, op.From} {
		if p != "" {
			dirs[path.Dir(p)] = true
		}
	}
	if len(dirs) >= 1024 {
		for dir := range dirs {
			a.syncDir(dir)
		}
		clear(dirs)
	}
}

func (a *accepter) syncDir(dir string) {
	a.t.trim(a.staging)
	if fd, err := a.t.dir(dir, nil); err == nil {
		unix.Fsync(fd)
	}
}

// settledEach reads the settled records back, in order.
func (a *accepter) settledEach(f func(i int, r *settled) error) error {
	if err := a.sw.Flush(); err != nil {
		return err
	}
	if _, err := a.scratch.Seek(0, io.SeekStart); err != nil {
		return err
	}
	dec := gob.NewDecoder(bufio.NewReaderSize(a.scratch, 64<<10))
	for i := 0; i < a.items; i++ {
		var r settled
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("read back the accept's outcomes: %w", err)
		}
		if err := f(i, &r); err != nil {
			return err
		}
	}
	return nil
}

// outcome is item i's outcome once the accept is over.
func (a *accepter) outcome(i int, r *settled, failed map[int]string) Outcome {
	o := r.Outcome
	if !r.Ops {
		return o
	}
	if a.cause != nil {
		o.Error = "not applied: " + a.cause.Error()
		return o
	}
	if msg, ok := failed[i]; ok {
		o.Error = msg
		return o
	}
	o.Applied, o.Digest = true, r.Want
	return o
}

// recordBase tells the session's base what the accept wrote.
func (a *accepter) recordBase(failed map[int]string) error {
	if a.l.Base == nil {
		return nil
	}
	return a.l.Base.Accepted(func(record func(AcceptedFile) error) error {
		return a.settledEach(func(i int, r *settled) error {
			if !r.Base || !a.outcome(i, r, failed).Applied {
				return nil
			}
			if err := record(AcceptedFile{Path: r.Path, Content: r.Content, SessionSum: r.Sum}); err != nil {
				return err
			}
			if r.From != "" {
				return record(AcceptedFile{Path: r.From})
			}
			return nil
		})
	})
}

// report hands the outcomes to each.
func (a *accepter) report(each func(Outcome) error, failed map[int]string) error {
	return a.settledEach(func(i int, r *settled) error { return each(a.outcome(i, r, failed)) })
}

// opsFor lists the journal operations for one item; staged reports whether
// the last one is a replace whose content must be staged.
func opsFor(it item, i int) ([]jop, bool) {
	c := it.d.Change
	switch {
	case c.Kind == Deleted:
		return []jop{{Op: "remove", Path: c.Path, Item: i}}, false
	case c.Type == Dir:
		if c.Kind == Mode {
			return []jop{{Op: "chmod", Path: c.Path, Mode: unixMode(c.Mode), IsDir: true, Item: i}}, false
		}
		return []jop{{Op: "mkdir", Path: c.Path, Mode: unixMode(c.Mode), Item: i}}, false
	case c.Kind == Mode && it.whole:
		return []jop{{Op: "chmod", Path: c.Path, Mode: unixMode(c.Mode), Item: i}}, false
	case c.Kind == Deleted || it.whole && c.Type == None:
		return []jop{{Op: "remove", Path: c.Path, Item: i}}, false
	}
	var ops []jop
	if c.Kind == Renamed && it.whole {
		ops = append(ops, jop{Op: "rename", From: c.From, Path: c.Path, Item: i})
		if c.Similarity == 100 {
			if c.Mode != c.OldMode {
				ops = append(ops, jop{Op: "chmod", Path: c.Path, Mode: unixMode(c.Mode), Item: i})
			}
			return ops, false
		}
	}
	if c.Type == None && it.content == nil { // a conflict settled as a deletion
		return append(ops, jop{Op: "remove", Path: c.Path, Item: i}), false
	}
	return append(ops, jop{Op: "replace", Path: c.Path, Tmp: fmt.Sprintf("%d", i), Item: i}), true
}

// check walks the existing part of rel's parents without creating
// anything, refusing symlinks and non-directories on the way.
func (t *tree) check(rel string) error {
	dir := path.Dir(rel)
	if dir == "." {
		return nil
	}
	parts := strings.Split(dir, "/")
	for k := range parts {
		p := strings.Join(parts[:k+1], "/")
		_, err := t.dir(p, nil)
		if err == nil {
			continue
		}
		var r *refusal
		if errors.As(err, &r) {
			return err
		}
		if errors.Is(err, unix.ENOENT) {
			return nil // created at commit
		}
		return err
	}
	return nil
}

func randHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// stage writes an item's new content (given, or the session's file or
// symlink) as tmp in the staging directory sfd.
// The returned fd (or -1) is the staged file, its writeback started; the
// caller waits for it and closes it.
//
// The session's file is read through upper (confined: no symlink in its
// path, no FIFO or device) and hashed as it is copied: if what was copied
// is not what the review digested (it.want) — the file changed since the
// review, or while it was copied — the result is a ChangedError. So the
// bytes written are the bytes the user reviewed and the scanners read.
func stage(t *tree, sfd int, tmp string, upper *confined.Root, l Layers, it item) (sum string, fd int, err error) {
	fd = -1
	c := it.d.Change
	mode := c.Mode
	if it.keepMode || c.Type == None {
		if fi, err := os.Lstat(filepath.Join(l.Project, filepath.FromSlash(c.Path))); err == nil {
			mode = fi.Mode()
		} else if c.Type == None {
			mode = c.OldMode
		}
	}
	if it.content == nil && c.Type == Symlink {
		target, err := upper.Readlink(c.Path)
		if err != nil {
			if gone(err) {
				return "", -1, &ChangedError{}
			}
			return "", -1, err
		}
		if digestBytes(&c, c.Mode, []byte(target)) != it.want {
			return "", -1, &ChangedError{}
		}
		if err := unix.Symlinkat(target, sfd, tmp); err != nil {
			return "", -1, err
		}
		return "", -1, unix.Fchownat(sfd, tmp, t.uid, t.gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if it.content != nil && c.Type == Symlink && !it.keepMode {
		if err := unix.Symlinkat(strings.TrimSuffix(*it.content, "\n"), sfd, tmp); err != nil {
			return "", -1, err
		}
		return "", -1, unix.Fchownat(sfd, tmp, t.uid, t.gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	// The in-memory case (most files: the review read them) uses raw
	// syscalls: an os.File costs several more per file.
	if d := c.data; it.content != nil || (d != nil && d.hasNew) {
		var data []byte
		if it.content != nil {
			data = []byte(*it.content)
		} else {
			data = d.new
			if digestBytes(&c, c.Mode, data) != it.want {
				return "", -1, &ChangedError{}
			}
			sum = sha256hex(d.new)
		}
		perm := unixMode(mode)
		fd, err = unix.Openat(sfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		if err != nil {
			return "", -1, err
		}
		for off := 0; off < len(data) && err == nil; {
			var n int
			n, err = unix.Write(fd, data[off:])
			off += n
		}
		err = finishStaged(t, fd, perm, err)
		if err != nil {
			unix.Close(fd)
			return "", -1, err
		}
		return sum, fd, nil
	}
	in, st, err := upper.OpenFd(c.Path)
	if err != nil {
		if gone(err) {
			return "", -1, &ChangedError{}
		}
		return "", -1, err
	}
	defer unix.Close(in)
	if modeOf(st.Mode) != c.Mode {
		return "", -1, &ChangedError{}
	}
	perm := unixMode(mode)
	fd, err = unix.Openat(sfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return "", -1, err
	}
	h := newContentHash()
	// The plain SHA-256 is what the session's base records of an accepted
	// file, to find its content again for later merges; only files small
	// enough to merge need it. Larger ones record the digest, which no
	// plain hash matches: their base content is unknown.
	var plain hash.Hash
	if st.Size <= maxTextDiff {
		plain = sha256.New()
	}
	err = copyHashed(fd, in, st.Size, h, plain)
	digest := digestOf(&c, c.Mode, h.sum())
	if err == nil && digest != it.want {
		err = &ChangedError{}
	}
	if err == nil {
		err = unix.Ftruncate(fd, st.Size)
	}
	if err == nil {
		err = finishStaged(t, fd, perm, nil)
	}
	if err != nil {
		unix.Close(fd)
		return "", -1, diskFull(err)
	}
	sum = digest
	if plain != nil {
		sum = hex.EncodeToString(plain.Sum(nil))
	}
	return sum, fd, nil
}

// finishStaged gives a staged file its owner and exact mode (the umask may
// have narrowed the create mode) and starts its writeback.
func finishStaged(t *tree, fd int, perm uint32, err error) error {
	if err == nil && (t.uid != os.Geteuid() || t.gid != os.Getegid()) {
		err = unix.Fchown(fd, t.uid, t.gid)
	}
	if err == nil && (perm&processUmask() != 0 || perm&^0o777 != 0) {
		err = unix.Fchmod(fd, perm)
	}
	if err == nil {
		err = unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	}
	return diskFull(err)
}

var umaskOnce = sync.OnceValue(func() uint32 {
	data, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(m)
				}
			}
		}
	}
	return 0o777 // unknown: always chmod
})

// processUmask is the bits a create mode may lose.
func processUmask() uint32 { return umaskOnce() }

func diskFull(err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("the project's disk is full")
	}
	return err
}
