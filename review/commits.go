package review

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/airlock/airlock/errdefs"
)

// Commit is a git commit made inside the session.
type Commit struct {
	Hash    string    `json:"hash"`
	Author  string    `json:"author"`
	Email   string    `json:"email"`
	When    time.Time `json:"when"`
	Subject string    `json:"subject"`
}

// What one read of a session's history may cost, whatever its repository
// holds (see also the per-file limits in gitfs.go and the per-object
// limits in gitobjects.go).
const (
	// Commits the project lacks that are listed or imported. A session
	// with more is refused whole: a partial list would import a branch
	// whose history is missing from the project.
	maxCommits = 1000
	// Commit names looked up while walking, merges' parents included.
	maxExamined = 10 * maxCommits
	// Bytes inflated from the session's objects to list its commits (on
	// every diff) and to import them (accept --commits).
	listBudget   = 64 << 20
	importBudget = 1 << 30
	// Objects copied into the project by one import.
	maxImportObjects = 100_000
	// Directories nested deeper are refused: no project nests so deep,
	// and git limits what it checks out (core.maxTreeDepth).
	maxTreeDepth = 2048
)

// Commits lists the commits the session's repository has on its HEAD that
// the project's repository does not, newest first.
//
// The session's repository is the agent's: it is read with no git binary,
// hook or config of it ever running on the host, only beneath the
// session's workspace and only through the confined resolver (see
// openSessionRepo and gitObjects), with every size bounded. A repository
// that cannot be read that way gives no commits and an error saying why,
// for the engine's log; the diff goes on without them.
func Commits(project, merged string) ([]Commit, error) {
	host := openHostRepo(project)
	if host == nil {
		return nil, nil // not a git project
	}
	s, err := openSessionRepo(merged, listBudget)
	if err != nil {
		return nil, notOffered(err)
	}
	if s == nil {
		return nil, nil
	}
	defer s.close()
	h, err := newHistory(host, s)
	if err != nil {
		return nil, notOffered(err)
	}
	return h.list, nil
}

func notOffered(err error) error {
	return fmt.Errorf("the session's commits are not offered, its repository was refused: %w", err)
}

func notImported(err error) error {
	return errdefs.Invalidf("the session's commits were not imported, its repository was refused: %w. "+
		"No branch was created; accept the files without --commits, or repair the repository in the session (git fsck) and try again", err)
}

// ImportCommits copies the session's new commits (with their trees and
// blobs) into the project's repository and points branch at the session's
// HEAD. The working tree and the current branch are not touched.
//
// The project's repository is the user's and trusted; what goes into it
// is not: every object copied was read as Commits reads, hashed to the
// name it was asked by, and checked as git fsck would (commit headers;
// tree modes, names and order), and branch must be a valid branch name.
// A refused repository is an errdefs.Invalid error that says what was
// refused.
func ImportCommits(project, merged, branch string) ([]Commit, error) {
	ref, err := branchRef(branch)
	if err != nil {
		return nil, err
	}
	host := openHostRepo(project)
	if host == nil {
		return nil, &PathError{Path: project, Reason: "not a git repository: there are no commits to import"}
	}
	if _, err := host.repo.Reference(ref, false); err == nil {
		return nil, &PathError{Path: branch, Reason: "branch exists in the project: delete or rename it first"}
	}
	s, err := openSessionRepo(merged, importBudget)
	if err != nil {
		return nil, notImported(err)
	}
	if s == nil {
		return nil, &PathError{Path: ".git", Reason: "the session has no git repository: there are no commits to import"}
	}
	defer s.close()
	h, err := newHistory(host, s)
	if err != nil {
		return nil, notImported(err)
	}
	if len(h.list) == 0 {
		return nil, &NotFoundError{What: "the session made no commits the project does not have"}
	}
	im := newImporter(host, s.objects)
	for _, c := range h.commits {
		if err := im.plan(c.tree); err != nil {
			return nil, notImported(err)
		}
	}
	if err := im.copy(h.commits); err != nil {
		return nil, err
	}
	if err := host.repo.Storer.SetReference(plumbing.NewHashReference(ref, h.head)); err != nil {
		return nil, fmt.Errorf("create branch %s: %w", branch, err)
	}
	return h.list, nil
}

// hostRepo is the project's repository: the user's, trusted.
type hostRepo struct{ repo *git.Repository }

func openHostRepo(project string) *hostRepo {
	if _, err := os.Stat(filepath.Join(project, ".git")); err != nil {
		return nil
	}
	repo, err := git.PlainOpen(project)
	if err != nil {
		return nil
	}
	return &hostRepo{repo}
}

// has reports whether the project has object h (its alternates included).
func (h *hostRepo) has(x plumbing.Hash) bool {
	if h.repo.Storer.HasEncodedObject(x) == nil {
		return true
	}
	_, err := h.repo.Storer.EncodedObject(plumbing.AnyObject, x)
	return err == nil
}

// history is what the session's HEAD has that the project lacks.
type history struct {
	head    plumbing.Hash
	list    []Commit // newest first
	commits []sessionCommit
}

type sessionCommit struct {
	hash, tree plumbing.Hash
	raw        []byte
}

func newHistory(host *hostRepo, s *sessionRepo) (*history, error) {
	head, err := s.head()
	if err != nil || head.IsZero() {
		return &history{}, err
	}
	h := &history{head: head}
	queue := []plumbing.Hash{head}
	seen := map[plumbing.Hash]bool{head: true}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if host.has(c) {
			continue // the project has it, and so its ancestors
		}
		if len(h.list) == maxCommits {
			return nil, fmt.Errorf("it has more than %d commits the project does not have: squash them in the session to bring them in", maxCommits)
		}
		raw, err := s.objects.read(c, plumbing.CommitObject)
		if err != nil {
			return nil, err
		}
		tree, parents, err := parseCommit(raw)
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", c, err)
		}
		h.list = append(h.list, commitOf(c, raw))
		h.commits = append(h.commits, sessionCommit{hash: c, tree: tree, raw: raw})
		for _, p := range parents {
			if seen[p] {
				continue
			}
			if len(seen) == maxExamined {
				return nil, fmt.Errorf("its history has more than %d commits to examine", maxExamined)
			}
			seen[p] = true
			queue = append(queue, p)
		}
	}
	return h, nil
}

// commitOf is what a user sees of a commit: printable text only (a
// subject can carry terminal escapes), of a bounded length.
func commitOf(h plumbing.Hash, raw []byte) Commit {
	var c object.Commit
	c.Decode(&gitObject{hash: h, typ: plumbing.CommitObject, data: raw}) // checked by parseCommit
	subject, _, _ := strings.Cut(c.Message, "\n")
	return Commit{
		Hash:    h.String(),
		Author:  printable(c.Author.Name, 200),
		Email:   printable(c.Author.Email, 200),
		When:    c.Author.When,
		Subject: printable(subject, 500),
	}
}

func printable(s string, max int) string {
	var b strings.Builder
	for i, r := range []rune(s) {
		if i == max {
			b.WriteString("…")
			break
		}
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

// importer copies the trees and blobs of the session's commits that the
// project lacks. It works in two passes so that a repository refused for
// its shape (a tree too deep, a bad name or mode, too many objects) writes
// nothing: plan reads and checks every new tree; copy then reads, checks
// and writes the blobs, the trees (read again, so never held in memory
// all at once) and the commits, in that order, so that every object
// written has what it names.
type importer struct {
	host    *hostRepo
	objects *gitObjects
	planned map[plumbing.Hash]plumbing.ObjectType
	blobs   []planned
	trees   []planned
}

type planned struct {
	hash plumbing.Hash
	path string // for messages
}

func newImporter(host *hostRepo, objects *gitObjects) *importer {
	return &importer{host: host, objects: objects, planned: map[plumbing.Hash]plumbing.ObjectType{}}
}

// plan walks the tree root, one directory at a time, noting what the
// project lacks.
func (im *importer) plan(root plumbing.Hash) error {
	type dir struct {
		planned
		depth int
	}
	stack := []dir{{planned{root, "/"}, 1}}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		done, err := im.seen(d.planned, plumbing.TreeObject)
		if err != nil {
			return err
		}
		if done {
			continue
		}
		if d.depth > maxTreeDepth {
			return fmt.Errorf("its directories nest more than %d deep", maxTreeDepth)
		}
		entries, err := im.readTree(d.planned)
		if err != nil {
			return err
		}
		if err := im.note(&im.trees, d.planned, plumbing.TreeObject); err != nil {
			return err
		}
		for _, e := range entries {
			p := planned{e.hash, path.Join(d.path, e.name)}
			switch e.mode {
			case filemode.Dir:
				stack = append(stack, dir{p, d.depth + 1})
			case filemode.Submodule:
				// A commit of another repository: not the session's to give.
			default:
				done, err := im.seen(p, plumbing.BlobObject)
				if err == nil && !done {
					err = im.note(&im.blobs, p, plumbing.BlobObject)
				}
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// seen reports whether p is planned already or in the project.
func (im *importer) seen(p planned, t plumbing.ObjectType) (bool, error) {
	if pt, ok := im.planned[p.hash]; ok {
		if pt != t {
			return true, fmt.Errorf("%s: object %s is named both as a %s and as a %s", p.path, p.hash, pt, t)
		}
		return true, nil
	}
	return im.host.has(p.hash), nil
}

func (im *importer) note(list *[]planned, p planned, t plumbing.ObjectType) error {
	if len(im.blobs)+len(im.trees) == maxImportObjects {
		return fmt.Errorf("its commits bring more than %d objects", maxImportObjects)
	}
	im.planned[p.hash] = t
	*list = append(*list, p)
	return nil
}

func (im *importer) readTree(d planned) ([]gitEntry, error) {
	raw, err := im.objects.read(d.hash, plumbing.TreeObject)
	if err != nil {
		return nil, fmt.Errorf("directory %s: %w", d.path, err)
	}
	entries, err := parseTree(raw)
	if err != nil {
		return nil, fmt.Errorf("directory %s (tree %s): %w", d.path, d.hash, err)
	}
	return entries, nil
}

// copy writes what plan found, and then the commits (oldest first).
func (im *importer) copy(commits []sessionCommit) error {
	for _, set := range []struct {
		list []planned
		typ  plumbing.ObjectType
	}{{im.blobs, plumbing.BlobObject}, {im.trees, plumbing.TreeObject}} {
		for _, p := range set.list {
			b, err := im.objects.read(p.hash, set.typ)
			if err == nil && set.typ == plumbing.TreeObject {
				_, err = parseTree(b) // read again: check again
			}
			if err != nil {
				return notImported(fmt.Errorf("%s: %w", p.path, err))
			}
			if err := im.write(p.hash, set.typ, b); err != nil {
				return err
			}
		}
	}
	for i := len(commits) - 1; i >= 0; i-- {
		if err := im.write(commits[i].hash, plumbing.CommitObject, commits[i].raw); err != nil {
			return err
		}
	}
	return nil
}

func (im *importer) write(h plumbing.Hash, t plumbing.ObjectType, b []byte) error {
	if _, err := im.host.repo.Storer.SetEncodedObject(&gitObject{hash: h, typ: t, data: b}); err != nil {
		return fmt.Errorf("write object %s into the project's repository: %w", h, err)
	}
	return nil
}

// gitObject is a validated object's content as go-git's storers take it,
// without a copy.
type gitObject struct {
	hash plumbing.Hash
	typ  plumbing.ObjectType
	data []byte
}

var _ plumbing.EncodedObject = (*gitObject)(nil)

func (o *gitObject) Hash() plumbing.Hash         { return o.hash }
func (o *gitObject) Type() plumbing.ObjectType   { return o.typ }
func (o *gitObject) SetType(plumbing.ObjectType) {}
func (o *gitObject) Size() int64                 { return int64(len(o.data)) }
func (o *gitObject) SetSize(int64)               {}
func (o *gitObject) Reader() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(o.data)), nil
}
func (o *gitObject) Writer() (io.WriteCloser, error) {
	return nil, errors.New("a session's object is read-only")
}

// branchRef is refs/heads/branch, for a name git check-ref-format
// --branch accepts (and no more): nothing that leaves refs/heads, hides
// in a path (".", ".."), or carries control characters.
func branchRef(branch string) (plumbing.ReferenceName, error) {
	bad := func(why string) error {
		return &PathError{Path: branch, Reason: "not a valid branch name (" + why + "); use letters, digits, '-', '_', '.' and '/' between names"}
	}
	switch {
	case branch == "" || branch == "@" || branch == "HEAD":
		return "", bad("reserved or empty")
	case strings.HasPrefix(branch, "-"):
		return "", bad("starts with '-'")
	case strings.HasSuffix(branch, ".") || strings.HasSuffix(branch, "/"):
		return "", bad("ends with '.' or '/'")
	case strings.Contains(branch, "..") || strings.Contains(branch, "@{"):
		return "", bad("contains '..' or '@{'")
	case !utf8.ValidString(branch):
		return "", bad("not UTF-8")
	}
	for _, r := range branch {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return "", bad(fmt.Sprintf("contains %q", r))
		}
	}
	for _, part := range strings.Split(branch, "/") {
		if part == "" || strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return "", bad("an empty part, a part starting with '.' or ending with .lock")
		}
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if !ref.IsSafe() {
		return "", bad("unsafe")
	}
	return ref, nil
}
