package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
	"golang.org/x/sys/unix"
)

// projectPolicyFile is where a project keeps its policies (the egress
// section beside the accept policy's), or the file Options.PolicyFile
// names instead.
func (e *Engine) projectPolicyFile(project string) string {
	if e.policy != "" {
		return e.policy
	}
	return filepath.Join(project, review.PolicyFile)
}

// projectEgress is the egress section of the project's policy file, as
// it is on the host: nil when the file or the section is missing.
func (e *Engine) projectEgress(project string) (*api.EgressPolicy, error) {
	file := e.projectPolicyFile(project)
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errdefs.Invalidf("%s: %v", file, err)
	}
	s, err := egress.ReadProject(b)
	if err != nil {
		return nil, errdefs.Invalidf("%s: %v: fix the file, or save a session's policy over it with `airlock policy save ID`", file, err)
	}
	if s == nil {
		return nil, nil
	}
	p := wirePolicy(*s)
	return &p, nil
}

// sessionPolicy compiles the policy a new session of project starts
// with: the project's saved policy in place of the engine's default,
// then what the request asks (see policyOf).
func (e *Engine) sessionPolicy(project string, spec *api.EgressPolicy) (*egress.Policy, error) {
	saved, err := e.projectEgress(project)
	if err != nil {
		return nil, err
	}
	switch {
	case saved == nil:
	case spec == nil:
		spec = saved
	case spec.Mode == "":
		spec = addRules(*saved, *spec)
	}
	return e.policyOf(spec)
}

// SavePolicy writes a session's policy, as it is now, into the egress
// section of its project's .airlock/policy.yaml for the user to review
// and commit; the file's other sections stay. New sessions of the
// project start from it.
func (e *Engine) SavePolicy(ctx context.Context, id string) (api.SavedPolicy, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.SavedPolicy{}, err
	}
	pol := storedPolicy(rec)
	if pol == nil {
		return api.SavedPolicy{}, errdefs.Conflictf("session %s has no network policy to save (it predates egress policies)", rec.ID)
	}
	file := filepath.Join(rec.Project, review.PolicyFile)
	if err := writeProjectPolicy(rec.Project, func(old []byte) ([]byte, error) { return egress.WriteProject(old, egressSpec(*pol)) }); err != nil {
		return api.SavedPolicy{}, errdefs.Invalidf("%s: %v", file, err)
	}
	e.log.Info("egress policy saved", "session", rec.ID, "file", file)
	return api.SavedPolicy{File: file, Policy: *pol}, nil
}

// maxPolicyFile bounds the policy file SavePolicy reads to rewrite.
const maxPolicyFile = 1 << 20

// writeProjectPolicy replaces the project's .airlock/policy.yaml with
// what edit makes of its contents (nil when missing). The engine is root
// and the project is the user's: nothing below the project's directory
// is followed if it is a symlink (.airlock -> /etc would otherwise have
// root write there), and what it makes belongs to the directory's owner.
func writeProjectPolicy(project string, edit func(old []byte) ([]byte, error)) error {
	pfd, err := unix.Open(project, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the project: %w", err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return err
	}
	dirName, fileName := filepath.Split(review.PolicyFile)
	dirName = filepath.Clean(dirName)
	if err := unix.Mkdirat(pfd, dirName, 0o755); err == nil {
		unix.Fchownat(pfd, dirName, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
	} else if !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("make %s: %w", dirName, err)
	}
	dfd, err := unix.Openat(pfd, dirName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s (a symlink is not followed): %w", dirName, err)
	}
	defer unix.Close(dfd)
	var old []byte
	mode := uint32(0o644)
	if fd, err := unix.Openat(dfd, fileName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
		f := os.NewFile(uintptr(fd), fileName)
		fi, serr := f.Stat()
		if serr == nil && !fi.Mode().IsRegular() {
			f.Close()
			return fmt.Errorf("%s is not a regular file", fileName)
		}
		old, err = io.ReadAll(io.LimitReader(f, maxPolicyFile+1))
		if err == nil && len(old) > maxPolicyFile {
			err = fmt.Errorf("%s is over %d bytes: not a policy file this writes into", fileName, maxPolicyFile)
		}
		if serr == nil {
			mode = uint32(fi.Mode().Perm())
		}
		f.Close()
		if err != nil {
			return err
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("open %s (a symlink is not followed): %w", fileName, err)
	}
	b, err := edit(old)
	if err != nil {
		return err
	}
	tmp := "." + fileName + ".tmp-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(b)
	if err == nil {
		err = f.Chown(int(st.Uid), int(st.Gid))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, fileName)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	return unix.Fsync(dfd)
}
