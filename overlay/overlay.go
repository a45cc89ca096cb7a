// Package overlay mounts a session's workspace: a size-capped tmpfs holding
// the upper and work directories of an overlayfs whose lower layer is the
// user's project, or (a disk workspace) the same directories on the file
// system of the workspace directory itself. The lower layer is never
// written by this package.
//
// Layout under a workspace directory D:
//
//	D/ws          tmpfs (size-capped), mode 0700; a plain directory for a
//	              disk workspace
//	D/ws/upper    overlay upper dir: everything the session wrote
//	D/ws/work     overlay work dir
//	D/merged      the overlay mount, bound into the container at /workspace
//	              (rslave); where the mount D is on does not propagate,
//	              D/merged is first bound onto itself as a shared mount, so
//	              that a container binding it sees the overlay even when it
//	              is mounted after the container started (a warm container,
//	              see Prepare)
//
// Mounts live in the host's mount namespace, so they outlive the process that
// made them; Find recovers a workspace from /proc/self/mountinfo after a
// restart. Linux only; mounting needs root or CAP_SYS_ADMIN.
package overlay

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/names"
	"golang.org/x/sys/unix"
)

// Workspace is a mounted (or recovered) session workspace.
type Workspace struct {
	Dir   string // the workspace directory D
	Lower string // the project
	// Disk is set for a workspace whose upper and work directories are
	// on D's own file system instead of a tmpfs: it uses no memory,
	// survives a reboot, and its size is not capped.
	Disk bool
}

// Upper is the overlay upper directory: the session's writes.
func (w *Workspace) Upper() string { return filepath.Join(w.Dir, "ws", "upper") }

// Merged is the overlay mount point: the session's view of the project.
func (w *Workspace) Merged() string { return filepath.Join(w.Dir, "merged") }

// Tmpfs is the mount point of the tmpfs that holds the upper and work
// directories (and nothing else).
func (w *Workspace) Tmpfs() string { return filepath.Join(w.Dir, "ws") }
func (w *Workspace) work() string  { return filepath.Join(w.Dir, "ws", "work") }

// Check reports, as a user-readable error, why overlay workspaces cannot be
// mounted on this machine, or nil when they can.
func Check() error {
	data, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return errdefs.Unavailablef("cannot read /proc/filesystems (%v): Airlock needs Linux with overlayfs", err)
	}
	if !strings.Contains(string(data), "\toverlay\n") {
		return errdefs.Unavailablef("this kernel has no overlayfs: load it with `modprobe overlay` (Airlock's workspaces are overlay mounts)")
	}
	if !hasSysAdmin() {
		return errdefs.Forbiddenf("mounting a session workspace needs root or CAP_SYS_ADMIN: run the engine as root (`sudo airlock serve`, or `sudo airlock install-service` once)")
	}
	return nil
}

func hasSysAdmin() bool {
	if os.Geteuid() == 0 {
		return true
	}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_SYS_ADMIN) != 0
		}
	}
	return false
}

// Mount creates the workspace at dir over the project lower with a tmpfs of
// size bytes. The merged root takes the owner and mode of the project's root
// so that commands run as the project's owner can write there. On error
// nothing stays mounted.
func Mount(lower, dir string, size int64) (*Workspace, error) {
	return MountFilled(lower, dir, size, nil)
}

// MountFilled is Mount with the upper directory filled by fill (e.g. from
// a snapshot) before the overlay is mounted over it: overlayfs does not
// allow changing the upper directory under a mounted overlay.
func MountFilled(lower, dir string, size int64, fill func(upper string) error) (*Workspace, error) {
	return mount(lower, dir, size, false, false, fill)
}

// Prepare makes what a workspace at dir needs before its project is
// known: the tmpfs of size bytes and the mount point D/merged (see share). A
// container may bind D/merged (rslave) at once; MountPrepared later
// mounts the overlay there, and the container sees it. Unmount takes a
// prepared workspace back as it does a mounted one.
func Prepare(dir string, size int64) error {
	if size < 1<<20 {
		return errdefs.Invalidf("workspace size %d bytes is too small: give at least 1 MiB (e.g. --workspace-size 2g)", size)
	}
	w := &Workspace{Dir: dir}
	for _, d := range []string{w.Tmpfs(), w.Merged()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := unix.Mount("airlock-ws", w.Tmpfs(), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		return mountError("tmpfs", err)
	}
	if err := w.share(); err != nil {
		unix.Unmount(w.Tmpfs(), 0)
		return err
	}
	return nil
}

// MountPrepared mounts the workspace at dir over the project lower, in
// what Prepare made there, filled first by fill. On error the prepared
// tmpfs and mount point stay (Unmount takes them back).
func MountPrepared(lower, dir string, fill func(upper string) error) (*Workspace, error) {
	return mount(lower, dir, 0, false, true, fill)
}

// MountDisk is MountFilled for a disk workspace: the upper and work
// directories are made in D/ws on D's file system, not in a tmpfs.
func MountDisk(lower, dir string, fill func(upper string) error) (*Workspace, error) {
	return mount(lower, dir, 0, true, false, fill)
}

func mount(lower, dir string, size int64, disk, prepared bool, fill func(upper string) error) (*Workspace, error) {
	if !disk && !prepared && size < 1<<20 {
		return nil, errdefs.Invalidf("workspace size %d bytes is too small: give at least 1 MiB (e.g. --workspace-size 2g)", size)
	}
	st, err := os.Stat(lower)
	if err != nil {
		return nil, errdefs.NotFoundf("project %s: %w", lower, err)
	}
	if !st.IsDir() {
		return nil, errdefs.Invalidf("project %s is not a directory: point --project at the folder to work on", lower)
	}
	w := &Workspace{Dir: dir, Lower: lower, Disk: disk}
	for _, d := range []string{w.Tmpfs(), w.Merged()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if disk {
		// What an earlier, failed mount left.
		if err := os.RemoveAll(w.Upper()); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(w.work()); err != nil {
			return nil, err
		}
	} else if !prepared {
		if err := unix.Mount("airlock-ws", w.Tmpfs(), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
			fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
			return nil, mountError("tmpfs", err)
		}
	}
	ok := false
	defer func() {
		if !ok {
			if prepared {
				// The prepared tmpfs and mount point are the caller's
				// to take back; what this mount made in them goes.
				_ = unmountOverlay(w.Merged())
				_ = os.RemoveAll(w.Upper())
				_ = os.RemoveAll(w.work())
				return
			}
			_ = unmountAll(w.Merged())
			if disk {
				_ = os.RemoveAll(w.Upper())
				_ = os.RemoveAll(w.work())
			} else {
				_ = unix.Unmount(w.Tmpfs(), 0)
			}
		}
	}()
	if err := os.Mkdir(w.Upper(), st.Mode().Perm()); err != nil {
		return nil, err
	}
	sys := st.Sys().(*syscall.Stat_t)
	if err := os.Chown(w.Upper(), int(sys.Uid), int(sys.Gid)); err != nil {
		return nil, err
	}
	// Mkdir applies the umask; the root must carry the project's exact mode.
	if err := os.Chmod(w.Upper(), st.Mode()&(os.ModePerm|os.ModeSticky)); err != nil {
		return nil, err
	}
	if err := os.Mkdir(w.work(), 0o700); err != nil {
		return nil, err
	}
	if fill != nil {
		if err := fill(w.Upper()); err != nil {
			return nil, err
		}
	}
	if err := w.mountOverlay(); err != nil {
		return nil, err
	}
	ok = true
	return w, nil
}

// mountOverlay mounts the overlay over the upper directory, on the
// shared mount point (made first if it is not there).
func (w *Workspace) mountOverlay() error {
	if err := w.share(); err != nil {
		return err
	}
	dirs := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", escapeOpt(w.Lower), escapeOpt(w.Upper()), escapeOpt(w.work()))
	// redirect_dir and metacopy stay off so that the upper layer always holds
	// whole files and renamed directories are plain copies plus whiteouts:
	// the review reads the upper layer and relies on that.
	if err := unix.Mount("airlock", w.Merged(), "overlay", 0, dirs+",redirect_dir=off,metacopy=off,index=off"); err != nil {
		// Older kernels reject some of the explicit feature switches.
		if err2 := unix.Mount("airlock", w.Merged(), "overlay", 0, dirs); err2 != nil {
			return mountError("overlay", err)
		}
	}
	return nil
}

// share makes D/merged a place where an overlay mounted later reaches
// the containers that bind it rslave: it is when the mount it is on
// propagates already (shared, or a slave, as a state directory on a
// shared mount, or / on most systemd hosts, is); otherwise D/merged is
// bound onto itself and the bind made shared, in a peer group of its own.
// (Binding it where the mount propagates would take it out of the group
// that reaches the container runtime's mount namespace.)
func (w *Workspace) share() error {
	m := w.Merged()
	at, propagates, err := containingMount(m)
	if err != nil {
		return err
	}
	if at == m || propagates {
		return nil
	}
	if err := unix.Mount(m, m, "", unix.MS_BIND, ""); err != nil {
		return mountError("mount point", err)
	}
	if err := unix.Mount("", m, "", unix.MS_SHARED, ""); err != nil {
		unix.Unmount(m, 0)
		return mountError("mount point", err)
	}
	return nil
}

// containingMount is the mount point of the topmost mount holding path,
// and whether that mount propagates (shared or slave).
func containingMount(path string) (string, bool, error) {
	mounts, err := mountPoints()
	if err != nil {
		return "", false, err
	}
	best := ""
	for mp := range mounts {
		if (mp == path || mp == "/" || strings.HasPrefix(path, mp+"/")) && len(mp) > len(best) {
			best = mp
		}
	}
	return best, mounts[best].propagates, nil
}

// escapeOpt escapes the characters overlay's option parser splits on
// (',' between options, ':' between lower layers) and its escape '\'.
func escapeOpt(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`)
	return r.Replace(p)
}

func mountError(what string, err error) error {
	if errors.Is(err, unix.EPERM) {
		return errdefs.Forbiddenf("mounting the workspace %s was refused (%v): the engine needs root or CAP_SYS_ADMIN", what, err)
	}
	if errors.Is(err, unix.ENODEV) {
		return errdefs.Unavailablef("this kernel cannot mount %s (%v): Airlock needs overlayfs and tmpfs", what, err)
	}
	return errdefs.Unavailablef("mounting the workspace %s failed: %w", what, err)
}

// Find returns the workspace mounted at dir over lower, mounting its
// overlay again if only the tmpfs survived (or, for a disk workspace,
// over its upper directory on disk), or a NotFound error when the tmpfs
// is gone (for example after a host reboot, which loses the tmpfs and
// with it the session's changes since its last checkpoint).
func Find(lower, dir string) (*Workspace, error) {
	w := &Workspace{Dir: dir, Lower: lower}
	mounts, err := mountPoints()
	if err != nil {
		return nil, err
	}
	if mounts[w.Tmpfs()].fstype != "tmpfs" {
		// An unmounted tmpfs leaves its mount point empty; a disk
		// workspace's upper directory is there.
		st, err := os.Lstat(w.Upper())
		if err != nil || !st.IsDir() {
			return nil, errdefs.NotFoundf("workspace %s is not mounted (its tmpfs is gone, e.g. after a reboot)", dir)
		}
		w.Disk = true
	}
	if !mounts[w.Merged()].isOverlay() {
		// The writes survive in the tmpfs: mount the overlay over them again.
		if err := w.mountOverlay(); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// mounted is the topmost mount on a mount point: its file system type,
// source, and whether it propagates (shared or slave).
type mounted struct {
	fstype, source string
	propagates     bool
}

// isOverlay says whether the mount is a workspace's overlay (not the
// shared mount point below it, which may be on an overlay file system
// itself).
func (m mounted) isOverlay() bool { return m.fstype == "overlay" && m.source == "airlock" }

// mountPoints maps each mount point to its topmost mount.
func mountPoints() (map[string]mounted, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]mounted{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) {
			continue
		}
		// Later lines are mounts made later: on top of earlier ones.
		mt := mounted{fstype: fields[sep+1]}
		if sep+2 < len(fields) {
			mt.source = fields[sep+2]
		}
		for _, opt := range fields[6:sep] {
			if strings.HasPrefix(opt, "shared:") || strings.HasPrefix(opt, "master:") {
				mt.propagates = true
			}
		}
		m[unescapeMountinfo(fields[4])] = mt
	}
	return m, sc.Err()
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for space...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Unmount removes the overlay and then the tmpfs, discarding the session's
// writes, and deletes the workspace directory. Call it only once no
// container uses the workspace: a live container's writes would otherwise go
// to a detached tmpfs. Unmounting what is already gone is not an error.
func (w *Workspace) Unmount() error {
	for _, p := range []string{w.Merged(), w.Tmpfs()} {
		if err := unmountAll(p); err != nil {
			return err
		}
	}
	return os.RemoveAll(w.Dir)
}

// unmountAll unmounts every mount stacked on p (the overlay and the
// shared mount point below it).
func unmountAll(p string) error {
	for i := 0; i < 8; i++ {
		mounts, err := mountPoints()
		if err != nil {
			return err
		}
		if _, ok := mounts[p]; !ok {
			return nil
		}
		if err := unmount(p); err != nil {
			return err
		}
	}
	return fmt.Errorf("unmount %s: still mounted", p)
}

// unmountOverlay unmounts the overlay at p, if it is the topmost mount
// there, and leaves the mount point below it.
func unmountOverlay(p string) error {
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	if !mounts[p].isOverlay() {
		return nil
	}
	return unmount(p)
}

// unmount unmounts p; one not mounted is fine. A mount that is busy for a
// moment — a fill that failed leaves its chrooted helper process exiting
// with its root there — is tried again for up to two seconds.
func unmount(p string) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := unix.Unmount(p, 0)
		switch {
		case err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond)
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("unmount %s: %w%s", p, err, heldBy(p))
		default:
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
}

// maxHolders bounds what heldBy names.
const maxHolders = 5

// heldBy says which processes hold what under mount point p (an open
// file or directory, a working directory, a root): ": held by
// process 12 (node): its descriptor 5 on "node_modules/x"", up to
// maxHolders of them, or nothing when none is found (a mount beneath p,
// or a process of another mount namespace, whose paths read otherwise).
// The paths beneath p are the session's names: quoted.
func heldBy(p string) string {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	self := os.Getpid()
	var held []string
	more := 0
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		what := heldIn(pid, p)
		if what == "" {
			continue
		}
		if len(held) == maxHolders {
			more++
			continue
		}
		who := procName(pid)
		if pid == self {
			who += "; the engine itself, which lets go when restarted"
		}
		held = append(held, fmt.Sprintf("process %d (%s): %s", pid, who, what))
	}
	if len(held) == 0 {
		return ""
	}
	if more > 0 {
		held = append(held, fmt.Sprintf("and %d more processes", more))
	}
	return ": held by " + strings.Join(held, "; ")
}

// heldIn is what process pid holds under p (the first found), or "".
func heldIn(pid int, p string) string {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	under := func(link string) (string, bool) {
		target, err := os.Readlink(filepath.Join(dir, link))
		if err != nil {
			return "", false
		}
		if target == p {
			return names.Quote("."), true
		}
		rel, ok := strings.CutPrefix(target, p+"/")
		return names.Quote(rel), ok
	}
	if rel, ok := under("cwd"); ok {
		return "its working directory is " + rel
	}
	if rel, ok := under("root"); ok {
		return "its root is " + rel
	}
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return ""
	}
	for _, fd := range fds {
		if rel, ok := under(filepath.Join("fd", fd.Name())); ok {
			return fmt.Sprintf("its descriptor %s on %s", fd.Name(), rel)
		}
	}
	return ""
}

// procName is process pid's command name, quoted (a session's process
// names itself).
func procName(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return "?"
	}
	return names.Quote(strings.TrimSuffix(string(b), "\n"))
}

// Close unmounts the overlay and, for a tmpfs workspace, the tmpfs with
// everything the session wrote (hibernation: a checkpoint holds it). A
// disk workspace's directories stay for Find to mount again, and so does
// everything else in D (the base, the container's configuration). Like
// Unmount, only once no container uses the workspace.
func (w *Workspace) Close() error {
	if err := unmountAll(w.Merged()); err != nil {
		return err
	}
	if w.Disk {
		return nil
	}
	return unmount(w.Tmpfs())
}

// Usage is the tmpfs's fill level.
type Usage struct {
	Used  int64 `json:"used"`
	Size  int64 `json:"size"`
	Full  bool  `json:"full"`  // writes now fail with ENOSPC
	Files int64 `json:"files"` // inodes in use
}

// Usage reports how full the workspace's tmpfs is (for a disk workspace:
// the file system it is on).
func (w *Workspace) Usage() (Usage, error) {
	var s unix.Statfs_t
	if err := unix.Statfs(w.Tmpfs(), &s); err != nil {
		return Usage{}, err
	}
	bs := int64(s.Bsize)
	u := Usage{Size: int64(s.Blocks) * bs, Used: int64(s.Blocks-s.Bfree) * bs, Files: int64(s.Files - s.Ffree)}
	// A page or two left means the next write of any size fails.
	u.Full = int64(s.Bavail)*bs < 2*bs || s.Ffree == 0
	return u, nil
}

// Resize changes the workspace's size cap in place (a tmpfs remount); it
// refuses a size below what the session already wrote.
func (w *Workspace) Resize(size int64) error {
	if size < 1<<20 {
		return errdefs.Invalidf("workspace size %d bytes is too small: give at least 1 MiB", size)
	}
	if w.Disk {
		return errdefs.Invalidf("a disk workspace has no size cap to change: it takes what its file system has")
	}
	u, err := w.Usage()
	if err != nil {
		return err
	}
	if size < u.Used {
		return errdefs.Invalidf("the session already wrote %d MiB: a workspace of %d MiB cannot hold it", u.Used>>20, size>>20)
	}
	if err := unix.Mount("airlock-ws", w.Tmpfs(), "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		return mountError("tmpfs remount", err)
	}
	return nil
}
