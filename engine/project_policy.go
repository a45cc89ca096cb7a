package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/egress"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
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
// section of its project's policy file for the user to review and
// commit; the file's other sections stay. New sessions of the project
// start from it.
func (e *Engine) SavePolicy(ctx context.Context, id string) (api.SavedPolicy, error) {
	rec, err := e.store.Session(ctx, id)
	if err != nil {
		return api.SavedPolicy{}, err
	}
	pol := storedPolicy(rec)
	if pol == nil {
		return api.SavedPolicy{}, errdefs.Conflictf("session %s has no network policy to save (it predates egress policies)", rec.ID)
	}
	file := e.projectPolicyFile(rec.Project)
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return api.SavedPolicy{}, errdefs.Invalidf("%s: %v", file, err)
	}
	b, err := egress.WriteProject(old, egressSpec(*pol))
	if err != nil {
		return api.SavedPolicy{}, errdefs.Invalidf("%s: %v", file, err)
	}
	// The file is the user's: made with the owner of the project's
	// directory, not the engine's root.
	var uid, gid = -1, -1
	if st, err := os.Stat(rec.Project); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(sys.Uid), int(sys.Gid)
		}
	}
	dir := filepath.Dir(file)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return api.SavedPolicy{}, err
		}
		os.Lchown(dir, uid, gid)
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(file); err == nil {
		mode = st.Mode().Perm()
	}
	if err := atomicfile.Write(file, b, mode); err != nil {
		return api.SavedPolicy{}, err
	}
	os.Lchown(file, uid, gid)
	e.log.Info("egress policy saved", "session", rec.ID, "file", file)
	return api.SavedPolicy{File: file, Policy: *pol}, nil
}
