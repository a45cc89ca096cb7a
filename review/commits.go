package review

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Commit is a git commit made inside the session.
type Commit struct {
	Hash    string    `json:"hash"`
	Author  string    `json:"author"`
	Email   string    `json:"email"`
	When    time.Time `json:"when"`
	Subject string    `json:"subject"`
}

// maxCommits bounds how far back the session's history is searched for
// commits the project does not have.
const maxCommits = 1000

// Commits lists the commits the session's repository has on its HEAD that
// the project's repository does not, newest first. It reads both
// repositories with a pure Go implementation: the session's .git is
// untrusted, so no git binary, hook or config of it ever runs on the host.
func Commits(project, merged string) ([]Commit, error) {
	host, sess, err := openPair(project, merged)
	if err != nil || host == nil {
		return nil, err
	}
	list, _, err := newCommits(host, sess)
	return list, err
}

func openPair(project, merged string) (*git.Repository, *git.Repository, error) {
	if _, err := os.Stat(filepath.Join(project, ".git")); err != nil {
		return nil, nil, nil // not a git project
	}
	host, err := git.PlainOpen(project)
	if err != nil {
		return nil, nil, nil
	}
	sess, err := git.PlainOpen(merged)
	if err != nil {
		return nil, nil, nil
	}
	return host, sess, nil
}

func newCommits(host, sess *git.Repository) ([]Commit, []*object.Commit, error) {
	head, err := sess.Head()
	if err != nil {
		return nil, nil, nil // no commits at all
	}
	var out []Commit
	var objs []*object.Commit
	seen := map[plumbing.Hash]bool{}
	queue := []plumbing.Hash{head.Hash()}
	for len(queue) > 0 && len(out) < maxCommits {
		h := queue[0]
		queue = queue[1:]
		if seen[h] {
			continue
		}
		seen[h] = true
		if _, err := host.CommitObject(h); err == nil {
			continue // the project has it, and so its ancestors
		}
		c, err := sess.CommitObject(h)
		if err != nil {
			return nil, nil, fmt.Errorf("read the session's commit %s: %w", h, err)
		}
		subject := c.Message
		for i, r := range subject {
			if r == '\n' {
				subject = subject[:i]
				break
			}
		}
		out = append(out, Commit{Hash: h.String(), Author: c.Author.Name, Email: c.Author.Email, When: c.Author.When, Subject: subject})
		objs = append(objs, c)
		queue = append(queue, c.ParentHashes...)
	}
	return out, objs, nil
}

// ImportCommits copies the session's new commits (with their trees and
// blobs) into the project's repository and points branch at the session's
// HEAD. The working tree and the current branch are not touched.
func ImportCommits(project, merged, branch string) ([]Commit, error) {
	host, sess, err := openPair(project, merged)
	if err != nil {
		return nil, err
	}
	if host == nil {
		return nil, &PathError{Path: project, Reason: "not a git repository, or the session has none: there are no commits to import"}
	}
	list, objs, err := newCommits(host, sess)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, &NotFoundError{What: "the session made no commits the project does not have"}
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if _, err := host.Reference(ref, false); err == nil {
		return nil, &PathError{Path: branch, Reason: "branch exists in the project: delete or rename it first"}
	}
	hs, ss := host.Storer, sess.Storer
	copied := map[plumbing.Hash]bool{}
	copyObj := func(h plumbing.Hash) error {
		if copied[h] {
			return nil
		}
		copied[h] = true
		if hs.HasEncodedObject(h) == nil {
			return nil
		}
		o, err := ss.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return err
		}
		_, err = hs.SetEncodedObject(o)
		return err
	}
	for _, c := range objs {
		tree, err := c.Tree()
		if err != nil {
			return nil, err
		}
		walker := object.NewTreeWalker(tree, true, nil)
		for {
			_, entry, err := walker.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				walker.Close()
				return nil, err
			}
			if entry.Mode.IsFile() || entry.Mode.String() == "0040000" {
				if err := copyObj(entry.Hash); err != nil {
					walker.Close()
					return nil, fmt.Errorf("copy object %s: %w", entry.Hash, err)
				}
			}
		}
		walker.Close()
		// Trees, including subtrees the walker entered.
		if err := copyTree(ss, hs, tree.Hash, copied); err != nil {
			return nil, err
		}
		if err := copyObj(c.Hash); err != nil {
			return nil, err
		}
	}
	head, _ := sess.Head()
	if err := hs.SetReference(plumbing.NewHashReference(ref, head.Hash())); err != nil {
		return nil, fmt.Errorf("create branch %s: %w", branch, err)
	}
	return list, nil
}

func copyTree(from, to storer.EncodedObjectStorer, h plumbing.Hash, copied map[plumbing.Hash]bool) error {
	if copied[h] {
		return nil
	}
	copied[h] = true
	if to.HasEncodedObject(h) == nil {
		return nil
	}
	o, err := from.EncodedObject(plumbing.TreeObject, h)
	if err != nil {
		return err
	}
	t, err := object.DecodeTree(from, o)
	if err != nil {
		return err
	}
	for _, e := range t.Entries {
		if e.Mode.String() == "0040000" {
			if err := copyTree(from, to, e.Hash, copied); err != nil {
				return err
			}
		}
	}
	_, err = to.SetEncodedObject(o)
	return err
}
