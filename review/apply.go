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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/names"
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
	return acceptEach(l, sel, journalPath, review, each, nil)
}

// acceptEach is AcceptEach calling step (when not nil) after each of its
// steps that change the disk from staging on: what the crash test kills
// the process at.
func acceptEach(l Layers, sel Selection, journalPath string, review func(func([]FileDiff) error) error, each func(Outcome) error, step func(string)) error {
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
	if step != nil {
		a.step = step
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
	// placing are the directories new to the project being staged whole
	// (see stageAt), innermost last: the ones whose paths may still
	// come.
	placing []placing
	scratch *os.File
	sw      *bufio.Writer
	senc    *gob.Encoder
	items   int
	// cause is why the accept writes nothing (staging failed); items
	// after it are only planned, for their outcomes.
	cause     error
	committed bool
	step      func(string) // see acceptEach
	stagers   *stagers     // nil until the staging directory is made
}

// placing is a directory staged whole: path in the project, rel in the
// staging directory, and fd open on it. top is the item (plus one) whose
// "place" operation moves it, or the directory holding it, into place.
type placing struct {
	path, rel string
	fd        int
	top       int
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
	// Under is the item (plus one) whose "place" operation writes this
	// one, which is staged inside a new directory and has none of its own.
	Under int
}

func newAccepter(l Layers, journalPath string) (*accepter, error) {
	st, err := os.Stat(l.Project)
	if err != nil {
		return nil, fmt.Errorf("project %s: %w", l.Project, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	a := &accepter{l: l, journalPath: journalPath, sfd: -1, staging: ".airlock-staging-" + randHex(), step: func(string) {}}
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
	a.stopStagers()
	a.popPlacing("")
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
		r.Error = fmt.Sprintf("refusing unsafe path %s", names.Quote(c.Path))
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
		if a.stagers != nil && a.cause == nil {
			a.cause = a.stagers.failed()
		}
		if stage && a.cause == nil {
			sum, under, err := a.write(it, i)
			r.Sum, r.Under = sum, under
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
func (a *accepter) write(it item, i int) (sum string, under int, err error) {
	if a.journal == nil {
		if a.journal, err = createJournal(a.journalPath, a.l.Project, a.staging); err != nil {
			return "", 0, fmt.Errorf("write the accept journal: %w", err)
		}
	}
	ops, staged := opsFor(it, i)
	if a.sfd < 0 && (staged || len(ops) == 1 && ops[0].Op == "mkdir") {
		if err := unix.Mkdirat(a.t.fds["."], a.staging, 0o700); err != nil {
			return "", 0, fmt.Errorf("create the staging directory: %w", err)
		}
		if a.sfd, err = a.t.dir(a.staging, nil); err != nil {
			return "", 0, err
		}
		if n := min(2, runtime.NumCPU()); n > 1 {
			a.stagers = newStagers(a.t, a.sfd, n)
		}
	}
	// A directory new to the project is staged whole, with everything
	// under it, and placed by one rename rather than a rename per file.
	if it.d.Kind == Added && len(ops) == 1 && (staged || ops[0].Op == "mkdir") {
		p, top, err := a.placingDir(it, i)
		if err != nil {
			return "", 0, err
		}
		if p != nil {
			sum, err := a.stageAt(it, p.fd, p.rel, path.Base(it.d.Path))
			return sum, top, err
		}
	}
	for _, op := range ops {
		// Renames move their sources before a deleted directory that
		// held them goes.
		op.First = it.d.Kind == Renamed
		if err := a.journal.add(op); err != nil {
			return "", 0, fmt.Errorf("write the accept journal: %w", err)
		}
	}
	if !staged {
		return "", 0, nil
	}
	sum, err = a.stageAt(it, a.sfd, "", ops[len(ops)-1].Tmp)
	return sum, 0, err
}

// stageAt stages item it (a file, symlink or empty directory) as name in
// dirfd, the staging directory's descendant rel ("" for itself).
func (a *accepter) stageAt(it item, dirfd int, rel, name string) (sum string, err error) {
	if it.d.Type == Dir {
		// An empty directory the session added.
		fd, err := a.t.mkdirFd(dirfd, name, it.d.Mode)
		if err != nil {
			return "", fmt.Errorf("%s: %w; the accept was rolled back and the project is unchanged", names.Quote(it.d.Path), diskFull(err))
		}
		unix.Close(fd)
		return "", nil
	}
	var put func([]byte, uint32)
	if a.stagers != nil {
		put = func(data []byte, perm uint32) {
			a.stagers.write(stageJob{dir: rel, name: name, path: it.d.Path, data: data, perm: perm})
		}
	}
	sum, err = stage(a.t, dirfd, name, a.upper, a.l, it, put)
	if err != nil {
		var ce *ChangedError
		if errors.As(err, &ce) {
			return "", &ChangedError{Paths: []string{it.d.Path}}
		}
		return "", fmt.Errorf("%s: %w; the accept was rolled back and the project is unchanged", names.Quote(it.d.Path), err)
	}
	return sum, nil
}

// stopStagers waits for every file handed to the stagers and says whether
// one failed: nothing is synced or removed while they write.
func (a *accepter) stopStagers() error {
	if a.stagers == nil {
		return nil
	}
	return a.stagers.wait()
}

// placingDir is the staged directory that added item it (item i) goes
// into when its parent is new to the project, or nil. The parent and the
// directories above it that the project lacks are made in the staging
// directory as they first come, the topmost with a "place" operation
// (item i's) that renames it into the project at the commit; top is that
// item plus one.
//
// Paths come in byte order, so everything under a directory comes
// together (though not always right after it: "d.txt" sorts between "d"
// and "d/x"); directories whose part is over are closed on the way.
func (a *accepter) placingDir(it item, i int) (p *placing, top int, err error) {
	a.popPlacing(it.d.Path)
	dir := path.Dir(it.d.Path)
	var missing []string // from the nearest staged (or existing) one down to dir
	var parent *placing
	for d := dir; d != "." && parent == nil; d = path.Dir(d) {
		for k := len(a.placing) - 1; k >= 0; k-- {
			if a.placing[k].path == d {
				parent = &a.placing[k]
				break
			}
		}
		if parent == nil {
			missing = append(missing, d)
		}
	}
	slices.Reverse(missing)
	if parent == nil {
		// Which of dir's ancestors the project lacks: from the first on.
		k := 0
		for k < len(missing) && !a.absent(missing[k]) {
			k++
		}
		if k == len(missing) {
			return nil, 0, nil // dir is in the project: the file is renamed into it
		}
		rel := strconv.Itoa(i)
		if err := a.journal.add(jop{Op: "place", Path: missing[k], Tmp: rel, Item: i}); err != nil {
			return nil, 0, fmt.Errorf("write the accept journal: %w", err)
		}
		if err := a.stageDir(a.sfd, missing[k], rel, rel, i+1); err != nil {
			return nil, 0, err
		}
		missing = missing[k+1:]
		parent = &a.placing[len(a.placing)-1]
	}
	top = parent.top
	for _, d := range missing {
		if err := a.stageDir(parent.fd, d, parent.rel+"/"+path.Base(d), path.Base(d), top); err != nil {
			return nil, 0, err
		}
		parent = &a.placing[len(a.placing)-1]
	}
	return parent, top, nil
}

// stageDir makes directory d (a project path) as name in dirfd, a
// descendant of the staging directory at rel, with the session's mode
// for it, and keeps it open for what comes under it.
func (a *accepter) stageDir(dirfd int, d, rel, name string, top int) error {
	fd, err := a.t.mkdirFd(dirfd, name, a.mkMode(d))
	if err != nil {
		return fmt.Errorf("%s: %w; the accept was rolled back and the project is unchanged", d, diskFull(err))
	}
	a.placing = append(a.placing, placing{path: d, rel: rel, fd: fd, top: top})
	return nil
}

// popPlacing closes the directories staged whole whose part of the path
// order is over once p comes ("" closes them all).
func (a *accepter) popPlacing(p string) {
	for len(a.placing) > 0 {
		top := a.placing[len(a.placing)-1]
		prefix := top.path + "/"
		if p != "" && (p < prefix || strings.HasPrefix(p, prefix)) {
			return
		}
		unix.Close(top.fd)
		a.placing = a.placing[:len(a.placing)-1]
	}
}

// absent reports whether nothing is at p in the project now.
func (a *accepter) absent(p string) bool {
	pfd, err := a.t.dir(path.Dir(p), nil)
	if err != nil {
		return errors.Is(err, unix.ENOENT)
	}
	var st unix.Stat_t
	return errors.Is(unix.Fstatat(pfd, path.Base(p), &st, unix.AT_SYMLINK_NOFOLLOW), unix.ENOENT)
}

// commit makes the accept durable and does it, records it in the session's
// base and hands the outcomes to each.
func (a *accepter) commit(each func(Outcome) error) error {
	if err := a.stopStagers(); err != nil && a.cause == nil {
		a.cause = err
	}
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
	a.step("committed")
	// Committed: from here a crash is finished by Recover.
	failed := map[int]string{}
	for _, first := range []bool{true, false} {
		err := eachOp(a.journalPath, first, func(op jop) error {
			if _, ok := failed[op.Item]; ok {
				return nil
			}
			a.t.trim(a.staging)
			if err := a.t.do(op, a.staging, a.mkMode); err != nil {
				failed[op.Item] = err.Error()
			}
			a.step(op.Op)
			return nil
		})
		if err != nil {
			return err
		}
	}
	// The renames, removals and modes are durable once their directories
	// are: one sync of the file system (see sync).
	unix.Syncfs(a.t.fds["."])
	a.step("synced")
	removeAll(a.t.fds["."], a.staging)
	a.step("staging removed")
	jerr := removeJournal(a.journalPath)
	a.step("journal removed")
	// What was written is the new common base of the host and the session.
	if err := a.recordBase(failed); err != nil {
		return fmt.Errorf("record the accepted files in the session's base: %w", err)
	}
	if err := a.report(each, failed); err != nil {
		return err
	}
	return jerr
}

// sync makes everything staged durable (data, inodes, directories), then
// the journal's operations, then commits the journal.
//
// One syncfs of the project's file system does the first: an fsync per
// staged file would cost a disk cache flush each, and syncing only the
// staging directory after sync_file_range on each file (which writes
// data, not inodes) is not enough on a file system without a journal
// (ext2, or ext4 without one as on the machines measured here): the files'
// inodes could still be unwritten when the renames reach the disk.
// `cp -a` then `sync`, the alternative an accept is measured against,
// pays the same.
func (a *accepter) sync() error {
	if err := a.stopStagers(); err != nil {
		return err
	}
	a.popPlacing("")
	a.step("staged")
	if a.sfd >= 0 {
		if err := unix.Syncfs(a.sfd); err != nil {
			return fmt.Errorf("sync the project's file system: %w", diskFull(err))
		}
	}
	a.step("staging synced")
	if err := a.journal.commit(); err != nil {
		return fmt.Errorf("commit the accept journal: %w", err)
	}
	return nil
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
	if msg, ok := failed[r.Under-1]; ok && r.Under > 0 {
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
// symlink) as tmp in the staging directory sfd; small content already in
// memory goes to put, when not nil, to be written there.
//
// The session's file is read through upper (confined: no symlink in its
// path, no FIFO or device) and hashed as it is copied: if what was copied
// is not what the review digested (it.want) — the file changed since the
// review, or while it was copied — the result is a ChangedError. So the
// bytes written are the bytes the user reviewed and the scanners read.
func stage(t *tree, sfd int, tmp string, upper *confined.Root, l Layers, it item, put func([]byte, uint32)) (sum string, err error) {
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
				return "", &ChangedError{}
			}
			return "", err
		}
		if digestBytes(&c, c.Mode, []byte(target)) != it.want {
			return "", &ChangedError{}
		}
		if err := unix.Symlinkat(target, sfd, tmp); err != nil {
			return "", err
		}
		return "", unix.Fchownat(sfd, tmp, t.uid, t.gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if it.content != nil && c.Type == Symlink && !it.keepMode {
		if err := unix.Symlinkat(strings.TrimSuffix(*it.content, "\n"), sfd, tmp); err != nil {
			return "", err
		}
		return "", unix.Fchownat(sfd, tmp, t.uid, t.gid, unix.AT_SYMLINK_NOFOLLOW)
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
				return "", &ChangedError{}
			}
			sum = sha256hex(d.new)
		}
		perm := unixMode(mode)
		if put != nil && len(data) <= maxStagedAsync {
			put(data, perm)
			return sum, nil
		}
		return sum, writeStaged(t, sfd, tmp, data, perm)
	}
	in, st, err := upper.OpenFd(c.Path)
	if err != nil {
		if gone(err) {
			return "", &ChangedError{}
		}
		return "", err
	}
	defer unix.Close(in)
	if modeOf(st.Mode) != c.Mode {
		return "", &ChangedError{}
	}
	perm := unixMode(mode)
	fd, err := unix.Openat(sfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return "", diskFull(err)
	}
	defer unix.Close(fd)
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
		return "", diskFull(err)
	}
	sum = digest
	if plain != nil {
		sum = hex.EncodeToString(plain.Sum(nil))
	}
	return sum, nil
}

// finishStaged gives a staged file its owner and exact mode (the umask may
// have narrowed the create mode). Its data is made durable with the rest
// of the accept's (see sync).
func finishStaged(t *tree, fd int, perm uint32, err error) error {
	if err == nil && (t.uid != os.Geteuid() || t.gid != os.Getegid()) {
		err = unix.Fchown(fd, t.uid, t.gid)
	}
	if err == nil && (perm&processUmask() != 0 || perm&^0o777 != 0) {
		err = unix.Fchmod(fd, perm)
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
