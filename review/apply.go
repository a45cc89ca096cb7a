package review

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
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
	if err := Recover(journalPath); err != nil {
		return nil, err
	}
	items, err := plan(l, diffs, sel, true)
	if err != nil {
		return nil, err
	}
	// Renames move their sources before a deleted directory that held
	// them goes.
	sort.SliceStable(items, func(i, j int) bool {
		return items[i].d.Kind == Renamed && items[j].d.Kind != Renamed
	})
	st, err := os.Stat(l.Project)
	if err != nil {
		return nil, fmt.Errorf("project %s: %w", l.Project, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	t, err := openTree(l.Project, int(sys.Uid), int(sys.Gid))
	if err != nil {
		return nil, err
	}
	defer t.close()
	// The session's side is read beneath its upper layer only, never
	// through a symlink, never a FIFO or device.
	upper, err := confined.OpenRoot(l.Upper)
	if err != nil {
		return nil, err
	}
	defer upper.Close()
	mkMode := func(rel string) fs.FileMode {
		if fi, err := upper.Lstat(rel); err == nil && fi.IsDir() {
			return fi.Mode()
		}
		return 0o755
	}

	out := make([]Outcome, len(items))
	j := &journal{State: journalStaging, Project: l.Project, Staging: ".airlock-staging-" + randHex()}
	type stageJob struct {
		item int
		tmp  string
	}
	var jobs []stageJob
	sums := make([]string, len(items))
	for i, it := range items {
		c := it.d.Change
		out[i] = Outcome{Path: c.Path, Kind: c.Kind, Partial: !it.whole}
		if it.left != "" {
			out[i].Left, out[i].Reason = it.left, it.reason
			continue
		}
		if it.err != nil {
			out[i].Error = it.err.Error()
			continue
		}
		if it.skip {
			out[i].Applied = true
			continue
		}
		if _, err := CleanPath(c.Path); err != nil || c.Path == "." {
			out[i].Error = fmt.Sprintf("refusing unsafe path %q", c.Path)
			continue
		}
		if c.Type == Special && it.content == nil {
			out[i].Error = "skipped: " + c.Note
			continue
		}
		if err := t.check(c.Path); err != nil {
			out[i].Error = err.Error()
			continue
		}
		if c.Kind == Renamed {
			if err := t.check(c.From); err != nil {
				out[i].Error = err.Error()
				continue
			}
		}
		ops, staged := opsFor(it, i)
		if staged {
			jobs = append(jobs, stageJob{i, ops[len(ops)-1].Tmp})
		}
		j.Ops = append(j.Ops, ops...)
	}
	if len(j.Ops) == 0 {
		return out, nil
	}
	if err := writeJournal(journalPath, j); err != nil {
		return nil, fmt.Errorf("write the accept journal: %w", err)
	}
	rollback := func(cause error) ([]Outcome, error) {
		removeAll(t.fds["."], j.Staging)
		removeJournal(journalPath)
		var ce *ChangedError
		if errors.As(cause, &ce) {
			return nil, ce
		}
		for _, op := range j.Ops {
			out[op.Item].Applied = false
			out[op.Item].Error = "not applied: " + cause.Error()
		}
		return out, nil
	}
	if len(jobs) > 0 {
		if err := unix.Mkdirat(t.fds["."], j.Staging, 0o700); err != nil {
			return rollback(fmt.Errorf("create the staging directory: %w", err))
		}
		sfd, err := t.dir(j.Staging, nil)
		if err != nil {
			return rollback(err)
		}
		// Every staged file's writeback starts as soon as it is written;
		// then each is waited for, in batches, and one fsync of the
		// staging directory commits their metadata and flushes the disk
		// cache. Far cheaper than an fsync per file, and unlike syncfs it
		// does not wait for unrelated dirty data on the filesystem.
		var open []int
		wait := func() error {
			var first error
			for _, fd := range open {
				if err := unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER); err != nil && first == nil {
					first = err
				}
				unix.Close(fd)
			}
			open = open[:0]
			return first
		}
		for _, job := range jobs {
			sum, fd, err := stage(t, sfd, job.tmp, upper, l, items[job.item])
			sums[job.item] = sum
			if err != nil {
				wait()
				var ce *ChangedError
				if errors.As(err, &ce) {
					return rollback(&ChangedError{Paths: []string{items[job.item].d.Path}})
				}
				return rollback(fmt.Errorf("%s: %w; the accept was rolled back and the project is unchanged", items[job.item].d.Path, err))
			}
			if fd >= 0 {
				open = append(open, fd)
			}
			if len(open) >= 256 {
				if err := wait(); err != nil {
					return rollback(fmt.Errorf("write back staged files: %w", err))
				}
			}
		}
		if err := wait(); err != nil {
			return rollback(fmt.Errorf("write back staged files: %w", err))
		}
		if err := unix.Fsync(sfd); err != nil {
			return rollback(fmt.Errorf("sync: %w", err))
		}
	}
	j.State = journalCommitted
	if err := writeJournal(journalPath, j); err != nil {
		return rollback(fmt.Errorf("commit the accept journal: %w", err))
	}
	// Committed: from here a crash is finished by Recover.
	failed := map[int]bool{}
	for _, op := range j.Ops {
		if failed[op.Item] {
			continue
		}
		if err := t.do(op, j.Staging, mkMode); err != nil {
			failed[op.Item] = true
			out[op.Item].Error = err.Error()
		}
	}
	for i := range out {
		if out[i].Error == "" && out[i].Left == "" && !failed[i] && items[i].err == nil {
			out[i].Applied = true
			if items[i].whole {
				out[i].Digest = items[i].d.Digest
			}
		}
	}
	// The renames are durable once their directories are synced.
	synced := map[string]bool{}
	for _, op := range j.Ops {
		for _, p := range []string{op.Path, op.From} {
			if p == "" {
				continue
			}
			dir := path.Dir(p)
			if synced[dir] {
				continue
			}
			synced[dir] = true
			if fd, err := t.dir(dir, nil); err == nil {
				unix.Fsync(fd)
			}
		}
	}
	if len(jobs) > 0 {
		removeAll(t.fds["."], j.Staging)
	}
	if err := removeJournal(journalPath); err != nil {
		return out, err
	}
	// What was written is the new common base of the host and the session.
	var acc []AcceptedFile
	for i, it := range items {
		if !out[i].Applied || it.skip || it.d.Type == Dir {
			continue
		}
		acc = append(acc, AcceptedFile{Path: it.d.Path, Content: it.content, SessionSum: sums[i]})
		if it.d.Kind == Renamed {
			acc = append(acc, AcceptedFile{Path: it.d.From})
		}
	}
	if err := l.Base.Accepted(acc); err != nil {
		return out, fmt.Errorf("record the accepted files in the session's base: %w", err)
	}
	return out, nil
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
