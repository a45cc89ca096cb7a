package review

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/gitrules"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// Ignoring decides which changes ignore rules cover. Project holds the
// project's own rules, read from the project's copy: what they ignore is
// left out of a review and of an accept of everything. Session holds the
// rules as the session's workspace has them (the session's rule files over
// the project's): what only they ignore is not hidden but counted apart
// and flagged, since an agent must not hide a file by ignoring it.
type Ignoring struct {
	Project *gitrules.Rules
	Session *gitrules.Rules
	// Tracked reports whether the project's git index tracks p, or, for
	// a directory, anything under it: git reviews a tracked path whatever
	// the rules say. Nil: nothing is tracked.
	Tracked func(p string, isDir bool) bool
	// ProjectRead, when set (before the review), is told each rule file
	// read from the project and whether it was there: what a summary kept
	// between reviews depends on. It may be called from several
	// goroutines at once.
	ProjectRead func(rel string, found bool)
}

// maxRuleFile is the largest rule file read (.gitignore, .gitattributes,
// info/exclude); a larger one is not a rule file any project writes.
const maxRuleFile = 1 << 20

// maxIndex is the largest git index read for the tracked paths.
const maxIndex = 256 << 20

// Globals are the project owner's own rule files (core.excludesFile and
// core.attributesFile), read as data by the caller.
type Globals struct {
	Ignore, Attributes []byte
}

// LoadIgnoring reads the rules of the project at project for the session
// whose upper layer is upper. Nothing is read yet but the project's git
// index (lazily, at the first question): rule files are read as the walk
// reaches their directories, each through a confined read (no symlink is
// followed, nothing outside the root is read). git is never run.
func LoadIgnoring(upper, project string, g Globals) *Ignoring {
	gitDir, isGit := gitDirOf(project)
	ig := &Ignoring{}
	read := projectReader(project, gitDir)
	pr := func(rel string) ([]byte, error) {
		b, err := read(rel)
		if ig.ProjectRead != nil {
			ig.ProjectRead(rel, err == nil)
		}
		return b, err
	}
	*ig = Ignoring{
		Project: gitrules.New(gitrules.Options{Read: pr, Git: isGit, Global: g.Ignore, GlobalAttributes: g.Attributes, MaxFile: maxRuleFile}),
		Session: gitrules.New(gitrules.Options{Read: sessionReader(upper, pr), Git: isGit, Global: g.Ignore, GlobalAttributes: g.Attributes, MaxFile: maxRuleFile}),
	}
	if isGit {
		ig.Tracked = trackedSet(gitDir)
	}
	return ig
}

// gitDirOf is the project's git directory: .git, or where a .git file
// ("gitdir: …", a worktree or submodule) points.
func gitDirOf(project string) (string, bool) {
	dotGit := filepath.Join(project, ".git")
	fi, err := os.Lstat(dotGit)
	switch {
	case err != nil:
		return "", false
	case fi.IsDir():
		return dotGit, true
	case !fi.Mode().IsRegular() || fi.Size() > 4096:
		return "", false
	}
	b, err := os.ReadFile(dotGit)
	if err != nil {
		return "", false
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", false
	}
	dir = strings.TrimSpace(dir)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(project, dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", false
	}
	return dir, true
}

// projectReader reads a rule file of the project: paths under ".git/" from
// its git directory, the rest from its tree, confined to each.
func projectReader(project, gitDir string) func(string) ([]byte, error) {
	return func(rel string) ([]byte, error) {
		root := project
		if r, ok := strings.CutPrefix(rel, ".git/"); ok {
			if gitDir == "" {
				return nil, fs.ErrNotExist
			}
			root, rel = gitDir, r
		}
		return readConfined(root, rel)
	}
}

// sessionReader reads a rule file as the session's workspace has it: the
// upper layer's version when the session wrote one (none when it deleted
// it), else the project's. Git's own files come from the project only: a
// session's .git is its own.
func sessionReader(upper string, project func(string) ([]byte, error)) func(string) ([]byte, error) {
	return func(rel string) ([]byte, error) {
		if strings.HasPrefix(rel, ".git/") {
			return project(rel)
		}
		root, err := confined.OpenRoot(upper)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		fi, err := root.Lstat(rel)
		switch {
		case err == nil && fi.Mode()&fs.ModeCharDevice != 0:
			return nil, fs.ErrNotExist // a whiteout: the session deleted it
		case err == nil:
			return root.ReadFile(rel, maxRuleFile)
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, confined.ErrSymlink):
			return project(rel)
		}
		return nil, err
	}
}

func readConfined(dir, rel string) ([]byte, error) {
	root, err := confined.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.ReadFile(rel, maxRuleFile)
}

// trackedSet reads the git index in gitDir once, at the first question,
// and answers from it: a path it holds, or a directory holding one.
func trackedSet(gitDir string) func(string, bool) bool {
	var once sync.Once
	var files, dirs map[string]struct{}
	load := func() {
		files, dirs = map[string]struct{}{}, map[string]struct{}{}
		b, err := readConfined(gitDir, "index")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			b, err = nil, nil
		}
		if err != nil || len(b) == 0 || len(b) > maxIndex {
			return
		}
		idx := &index.Index{}
		if index.NewDecoder(bufio.NewReader(bytes.NewReader(b))).Decode(idx) != nil {
			return
		}
		for _, e := range idx.Entries {
			files[e.Name] = struct{}{}
			for d := path.Dir(e.Name); d != "." && d != "/"; d = path.Dir(d) {
				if _, ok := dirs[d]; ok {
					break
				}
				dirs[d] = struct{}{}
			}
		}
	}
	return func(p string, isDir bool) bool {
		once.Do(load)
		if _, ok := files[p]; ok {
			return true
		}
		if isDir {
			_, ok := dirs[p]
			return ok
		}
		return false
	}
}

// ruleFile reports whether name is one of the files rules are read from:
// the session's own versions of them are always reviewed.
func ruleFile(name string) bool {
	return name == ".gitignore" || name == ".gitattributes"
}

// lockfiles are the files package managers generate: collapsed in a
// display (never held less for it: the policy decides that).
var lockfiles = map[string]bool{
	"package-lock.json": true, "npm-shrinkwrap.json": true, "yarn.lock": true, "pnpm-lock.yaml": true,
	"go.sum": true, "Cargo.lock": true, "poetry.lock": true, "Pipfile.lock": true, "composer.lock": true,
	"Gemfile.lock": true, "uv.lock": true, "bun.lockb": true, "flake.lock": true,
}

// generated says why a display folds the file at p: a lockfile, or the
// project's attributes mark it generated ("" when neither).
func (ig *Ignoring) generated(p string) string {
	if lockfiles[path.Base(p)] {
		return "lockfile"
	}
	if ig == nil || ig.Project == nil {
		return ""
	}
	if why, ok := ig.Project.Generated(p); ok {
		return why
	}
	return ""
}

// ruleName is how a rule is shown: "sub/.gitignore:3: node_modules/".
func ruleName(r gitrules.Rule) string {
	if r.Source == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d: %s", r.Source, r.Line, r.Pattern)
}
