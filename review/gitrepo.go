package review

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"github.com/airlock/airlock/confined"
)

// sessionRepo is a session's git repository, opened beneath its
// workspace and read only through the confined resolver. The git
// directory is found the way git finds it (.git, or the gitdir a .git
// file names, and its commondir), except that every one of these must
// lie beneath the workspace and be reached without a symlink; the
// directories are held open, so swapping them afterwards changes
// nothing.
type sessionRepo struct {
	roots   []*confined.Root
	fs      billy.Filesystem // the git directory, with commondir applied
	refused error            // the first refusal met while go-git read refs
	objects *gitObjects
}

// openSessionRepo opens the repository of the workspace at merged; nil
// when it has none. budget bounds the bytes inflated from its objects.
func openSessionRepo(merged string, budget int64) (_ *sessionRepo, err error) {
	ws, err := confined.OpenRoot(merged)
	if err != nil {
		return nil, err
	}
	s := &sessionRepo{roots: []*confined.Root{ws}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	gitdir, err := findGitDir(ws)
	if err != nil || gitdir == "" {
		return nil, err
	}
	git, err := ws.OpenDir(gitdir)
	if err != nil {
		return nil, fmt.Errorf("gitdir %s: %w", gitdir, err)
	}
	s.roots = append(s.roots, git)
	var common *confined.Root
	var dir string
	switch b, err := git.ReadFile("commondir", gitSmallFile); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("%s/commondir: %w", gitdir, err)
	default:
		if dir, err = beneath(gitdir, strings.TrimRight(string(b), "\r\n")); err != nil {
			return nil, fmt.Errorf("%s/commondir: %w", gitdir, err)
		}
		if common, err = ws.OpenDir(dir); err != nil {
			return nil, fmt.Errorf("%s/commondir %s: %w", gitdir, dir, err)
		}
		s.roots = append(s.roots, common)
	}
	var fsys billy.Filesystem = newGitFS(git, gitdir, &s.refused)
	if common != nil {
		fsys = dotgit.NewRepositoryFilesystem(fsys, newGitFS(common, dir, &s.refused))
	}
	s.fs = fsys
	s.objects = newGitObjects(fsys, budget)
	return s, nil
}

func (s *sessionRepo) close() {
	if s.objects != nil {
		s.objects.close()
	}
	for _, r := range s.roots {
		r.Close()
	}
}

// findGitDir returns the git directory of the workspace, relative to it:
// ".git", or what a .git file names; "" when there is none.
func findGitDir(ws *confined.Root) (string, error) {
	fi, err := ws.Lstat(".git")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	case fi.IsDir():
		return ".git", nil
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", fmt.Errorf(".git: %w", confined.ErrSymlink)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf(".git: %w", confined.ErrNotRegular)
	}
	b, err := ws.ReadFile(".git", gitSmallFile)
	if err != nil {
		return "", err
	}
	// As git reads it: "gitdir: <path>", relative to the .git file.
	line := strings.TrimRight(string(b), "\r\n")
	dir, ok := strings.CutPrefix(line, "gitdir: ")
	if !ok || strings.ContainsAny(dir, "\n\x00") {
		return "", errors.New(".git is a file but not a gitdir link")
	}
	rel, err := beneath("", dir)
	if err != nil {
		return "", fmt.Errorf(".git: gitdir %q: %w", dir, err)
	}
	return rel, nil
}

// beneath resolves p, relative to the directory dir of the workspace,
// to a path beneath the workspace. The resolution is lexical: no
// component is ever a symlink when it is opened.
func beneath(dir, p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty path")
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("an absolute path: only a path inside the workspace is followed: %w", confined.ErrEscape)
	}
	c := path.Join(dir, p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("leaves the workspace: %w", confined.ErrEscape)
	}
	return c, nil
}

// head resolves HEAD to a commit name with go-git's reference reader
// (through the confined filesystem); the zero hash when HEAD names a
// branch that has no commit yet.
func (s *sessionRepo) head() (plumbing.Hash, error) {
	d := dotgit.New(s.fs)
	name := plumbing.HEAD
	for range 5 { // git's own limit on symbolic refs
		ref, err := d.Ref(name)
		if s.refused != nil {
			// go-git may have found the name elsewhere (packed-refs)
			// after a loose file was refused: trust neither.
			return plumbing.ZeroHash, s.refused
		}
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return plumbing.ZeroHash, nil
		}
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: %w", name, err)
		}
		if ref.Type() == plumbing.HashReference {
			if h := ref.Hash(); !h.IsZero() {
				return h, nil
			}
			return plumbing.ZeroHash, fmt.Errorf("%s does not hold an object name", name)
		}
		name = ref.Target()
		if !strings.HasPrefix(name.String(), "refs/") {
			return plumbing.ZeroHash, fmt.Errorf("HEAD points at %q, not a branch", name)
		}
	}
	return plumbing.ZeroHash, errors.New("HEAD: symbolic references nest more than 5 deep")
}

// parseCommit checks a commit's headers the way git fsck does (a tree,
// then parents, then an author and a committer, object names in full)
// and returns its tree and parents.
func parseCommit(raw []byte) (tree plumbing.Hash, parents []plumbing.Hash, err error) {
	header, _, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		header = raw
	}
	lines := strings.Split(string(header), "\n")
	next := func(key string) (string, bool) {
		if len(lines) == 0 {
			return "", false
		}
		v, ok := strings.CutPrefix(lines[0], key+" ")
		if ok {
			lines = lines[1:]
		}
		return v, ok
	}
	v, ok := next("tree")
	if tree, ok = parseHex(v); !ok {
		return tree, nil, errors.New("commit without a valid tree line")
	}
	for {
		v, ok := next("parent")
		if !ok {
			break
		}
		p, ok := parseHex(v)
		if !ok {
			return tree, nil, fmt.Errorf("commit with a bad parent line %q", v)
		}
		parents = append(parents, p)
	}
	if _, ok := next("author"); !ok {
		return tree, nil, errors.New("commit without an author")
	}
	if _, ok := next("committer"); !ok {
		return tree, nil, errors.New("commit without a committer")
	}
	return tree, parents, nil
}

// gitEntry is a tree entry.
type gitEntry struct {
	mode filemode.FileMode
	name string
	hash plumbing.Hash
}

// parseTree checks a tree the way git fsck does, and more strictly where
// a checkout would suffer: only the five modes git writes; names that are
// not empty, ".", "..", ".git" (in any case, or as Windows and macOS
// would read it) or contain "/"; no name twice; entries in git's order.
func parseTree(raw []byte) ([]gitEntry, error) {
	var out []gitEntry
	names := map[string]bool{}
	var prev *gitEntry
	for len(raw) > 0 {
		sp := bytes.IndexByte(raw, ' ')
		if sp < 0 {
			return nil, errors.New("tree entry without a mode")
		}
		var mode filemode.FileMode
		switch string(raw[:sp]) {
		case "100644":
			mode = filemode.Regular
		case "100755":
			mode = filemode.Executable
		case "120000":
			mode = filemode.Symlink
		case "40000":
			mode = filemode.Dir
		case "160000":
			mode = filemode.Submodule
		default:
			return nil, fmt.Errorf("tree entry with mode %q", raw[:sp])
		}
		raw = raw[sp+1:]
		nul := bytes.IndexByte(raw, 0)
		if nul < 0 || len(raw) < nul+21 {
			return nil, errors.New("truncated tree entry")
		}
		e := gitEntry{mode: mode, name: string(raw[:nul])}
		copy(e.hash[:], raw[nul+1:nul+21])
		raw = raw[nul+21:]
		if err := checkTreeName(e.name); err != nil {
			return nil, err
		}
		if names[e.name] {
			return nil, fmt.Errorf("tree entry %q twice", e.name)
		}
		names[e.name] = true
		if prev != nil && treeOrder(prev, &e) >= 0 {
			return nil, fmt.Errorf("tree entries %q and %q out of order", prev.name, e.name)
		}
		out = append(out, e)
		prev = &out[len(out)-1]
	}
	return out, nil
}

func checkTreeName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("tree entry named %q", name)
	}
	// Windows drops trailing dots and spaces, and calls .git GIT~1;
	// macOS ignores case.
	n := strings.ToLower(strings.TrimRight(name, ". "))
	if n == ".git" || n == "git~1" {
		return fmt.Errorf("tree entry named %q: a checkout would write into the repository", name)
	}
	return nil
}

// treeOrder is git's order of tree entries: by name, a directory's as
// if it ended in "/".
func treeOrder(a, b *gitEntry) int {
	an, bn := a.name, b.name
	n := min(len(an), len(bn))
	if c := strings.Compare(an[:n], bn[:n]); c != 0 {
		return c
	}
	end := func(e *gitEntry, s string) byte {
		if len(s) > n {
			return s[n]
		}
		if e.mode == filemode.Dir {
			return '/'
		}
		return 0
	}
	ca, cb := end(a, an), end(b, bn)
	switch {
	case ca < cb:
		return -1
	case ca > cb:
		return 1
	}
	return 0
}
