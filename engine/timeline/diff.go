package timeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"

	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/review"
)

// Bounds of a checkpoint diff, as the review's: a text diff only for
// files of at most maxText bytes, at most maxTotal of text in all, and
// at most maxProjectNames names of the project looked at beneath a
// directory a checkpoint deleted or made opaque.
const (
	maxText         = 8 << 20
	maxTotal        = 64 << 20
	maxProjectNames = 200_000
)

// Diff is what changed in session id's workspace between two of its
// checkpoints (q), computed from the stored checkpoints and the project:
// the live session is not read.
func (t *Timeline) Diff(ctx context.Context, id string, q api.CheckpointDiffQuery) (api.Diff, error) {
	s, err := t.existing(id)
	if err != nil {
		return api.Diff{}, err
	}
	if s == nil {
		return api.Diff{}, errdefs.NotFoundf("session %s has no checkpoints yet: they are made at the end of each agent turn and command", id)
	}
	project, err := t.core.Project(ctx, id)
	if err != nil {
		return api.Diff{}, err
	}
	list, err := t.List(ctx, id)
	if err != nil {
		return api.Diff{}, err
	}
	from, to, err := resolveRange(list, id, q)
	if err != nil {
		return api.Diff{}, err
	}
	files, err := t.between(ctx, s, project, checkpoint.ID(from), checkpoint.ID(to))
	if err != nil {
		return api.Diff{}, err
	}
	d := api.Diff{Session: id, Files: files, Stats: []api.Stat{}}
	for _, f := range files {
		st := api.Stat{Path: f.Path, Kind: f.Kind, Binary: f.Binary && f.TooLarge == "", TooLarge: f.TooLarge != ""}
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				switch l[0] {
				case '+':
					st.Added++
				case '-':
					st.Removed++
				}
			}
		}
		d.Stats = append(d.Stats, st)
	}
	return d, nil
}

// resolveRange turns a query into two checkpoint ids (from 0: the
// session's start).
func resolveRange(list []api.Checkpoint, id string, q api.CheckpointDiffQuery) (from, to int64, err error) {
	switch {
	case q.Turn > 0:
		c, err := turnCheckpoint(list, id, q.Turn)
		return c.From, c.ID, err
	case q.FromCheckpoint > 0 || q.ToCheckpoint > 0:
		from, to = q.FromCheckpoint, q.ToCheckpoint
	default:
		if q.From > 0 {
			c, err := turnCheckpoint(list, id, q.From)
			if err != nil {
				return 0, 0, err
			}
			from = c.ID
		}
		if q.To > 0 {
			c, err := turnCheckpoint(list, id, q.To)
			if err != nil {
				return 0, 0, err
			}
			to = c.ID
		}
	}
	if to == 0 {
		if len(list) == 0 {
			return 0, 0, errdefs.NotFoundf("session %s has no checkpoints yet", id)
		}
		to = list[len(list)-1].ID
	}
	for _, c := range []int64{from, to} {
		if c > 0 {
			if _, err := byID(list, id, c); err != nil {
				return 0, 0, err
			}
		}
	}
	return from, to, nil
}

// side is what a path is in one state of the workspace: an entry of a
// checkpoint, the project's file, or nothing.
type side struct {
	typ   string // review's types: file, dir, symlink, special; "" when absent
	mode  fs.FileMode
	size  int64
	link  string
	entry *checkpoint.Entry // from the checkpoint
	proj  bool              // from the project
}

func (x side) same(y side) bool {
	if x.typ != y.typ || x.mode != y.mode || x.link != y.link || x.size != y.size {
		return false
	}
	if x.proj && y.proj {
		return true
	}
	return x.entry != nil && y.entry != nil && x.entry.Digest == y.entry.Digest
}

// state reads the workspace as checkpoint id (0: an empty upper layer)
// over the project.
type state struct {
	s       *checkpoint.Store
	id      checkpoint.ID
	project *confined.Root
	r       *checkpoint.Resolver // of id (nil for 0)
}

func newState(s *checkpoint.Store, id checkpoint.ID, project *confined.Root) (state, error) {
	st := state{s: s, id: id, project: project}
	if id == 0 {
		return st, nil
	}
	var err error
	st.r, err = s.NewResolver(id)
	return st, err
}

func (st state) at(p string) (side, error) {
	if st.id != 0 {
		e, lower, err := st.r.Resolve(p)
		if err != nil {
			return side{}, err
		}
		if e != nil {
			return entrySide(e), nil
		}
		if !lower {
			return side{}, nil
		}
	}
	fi, err := st.project.Lstat(p)
	if err != nil {
		return side{}, nil // absent (or unreadable) in the project
	}
	sd := side{proj: true, mode: fi.Mode().Perm(), size: fi.Size()}
	switch {
	case fi.Mode().IsRegular():
		sd.typ = string(review.File)
	case fi.IsDir():
		sd.typ, sd.size = string(review.Dir), 0
	case fi.Mode()&fs.ModeSymlink != 0:
		sd.typ, sd.size = string(review.Symlink), 0
		sd.link, _ = st.project.Readlink(p)
	default:
		sd.typ, sd.size = string(review.Special), 0
	}
	return sd, nil
}

func entrySide(e *checkpoint.Entry) side {
	sd := side{entry: e, mode: fs.FileMode(e.Mode & 0o777)}
	switch e.Type {
	case checkpoint.Whiteout:
		return side{}
	case checkpoint.File:
		sd.typ, sd.size = string(review.File), e.Size
	case checkpoint.Dir:
		sd.typ = string(review.Dir)
	case checkpoint.Symlink:
		sd.typ, sd.link = string(review.Symlink), e.Target
	default:
		sd.typ = string(review.Special)
	}
	return sd
}

// text reads a file side whole, or says why it gets no text diff.
func (st state) text(p string, sd side) (string, bool, string, error) {
	if sd.typ != string(review.File) {
		return sd.link, false, "", nil
	}
	if sd.size > maxText {
		return "", false, fmt.Sprintf("the file is %d bytes: text diffs stop at %d", sd.size, maxText), nil
	}
	var b []byte
	if sd.proj {
		var err error
		if b, err = st.project.ReadFile(p, maxText); err != nil {
			return "", false, "", err
		}
	} else {
		r, err := st.s.OpenContent(sd.entry)
		if err != nil {
			return "", false, "", err
		}
		b, err = io.ReadAll(io.LimitReader(r, maxText+1))
		r.Close()
		if err != nil {
			return "", false, "", err
		}
	}
	return string(b), bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0, "", nil
}

// between lists, as the review's file diffs, what differs in the
// workspace (upper layer over the project as it is now) from checkpoint
// a to checkpoint b.
func (t *Timeline) between(ctx context.Context, s *checkpoint.Store, project string, a, b checkpoint.ID) ([]api.FileDiff, error) {
	out := []api.FileDiff{}
	err := t.eachBetween(ctx, s, project, a, b, func(f api.FileDiff) error {
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachBetween is between handing each file diff on in path order instead
// of keeping them: a checkpoint's counts never hold a large command's
// every diff at once.
func (t *Timeline) eachBetween(ctx context.Context, s *checkpoint.Store, project string, a, b checkpoint.ID, each func(api.FileDiff) error) error {
	proj, err := confined.OpenRoot(project)
	if err != nil {
		return fmt.Errorf("open the project %s: %w", project, err)
	}
	defer proj.Close()
	// Paths to compare: those whose entries changed, and beneath a
	// directory that was deleted, replaced or made opaque on either side,
	// the project's names it hides or shows again. Only the paths are
	// kept, not the changes (whose entries would keep every tree read).
	var paths []string
	budget := maxProjectNames
	err = s.DiffEach(a, b, func(c checkpoint.Change) error {
		paths = append(paths, c.Path)
		if hides(c.Old) || hides(c.New) {
			projectNames(proj, c.Path, &paths, &budget)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(paths)
	sorted := slices.Compact(paths)
	sa, err := newState(s, a, proj)
	if err != nil {
		return err
	}
	sb, err := newState(s, b, proj)
	if err != nil {
		return err
	}
	total := 0
	for _, p := range sorted {
		if err := ctx.Err(); err != nil {
			return err
		}
		x, err := sa.at(p)
		if err != nil {
			return err
		}
		y, err := sb.at(p)
		if err != nil {
			return err
		}
		if x.typ == "" && y.typ == "" || x.same(y) || x.typ == string(review.Dir) && y.typ == string(review.Dir) || x.typ == "" && y.typ == string(review.Dir) || x.typ == string(review.Dir) && y.typ == "" {
			continue
		}
		f := api.FileDiff{Change: api.Change{Path: p, Type: y.typ, OldType: x.typ, Mode: y.mode, OldMode: x.mode, Size: y.size, OldSize: x.size, Link: y.link, OldLink: x.link}}
		switch {
		case x.typ == "":
			f.Kind = string(review.Added)
		case y.typ == "":
			f.Kind = string(review.Deleted)
		case x.typ != y.typ:
			f.Kind = string(review.Replaced)
		case x.mode != y.mode && x.size == y.size && x.link == y.link && (x.entry == nil || y.entry == nil || x.entry.Digest == y.entry.Digest):
			f.Kind = string(review.Mode)
		default:
			f.Kind = string(review.Modified)
		}
		if f.Kind != string(review.Mode) {
			if err := diffText(&f, sa, sb, p, x, y, &total); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		if err := each(f); err != nil {
			return err
		}
	}
	return nil
}

func diffText(f *api.FileDiff, sa, sb state, p string, x, y side, total *int) error {
	textual := func(s side) bool {
		return s.typ == "" || s.typ == string(review.File) || s.typ == string(review.Symlink)
	}
	if !textual(x) || !textual(y) {
		return nil
	}
	if *total > maxTotal {
		f.TooLarge = "the diff's text budget is spent: diff this turn's files alone"
		f.Binary = true
		return nil
	}
	old, obin, owhy, err := sa.text(p, x)
	if err != nil {
		return err
	}
	new, nbin, nwhy, err := sb.text(p, y)
	if err != nil {
		return err
	}
	switch {
	case owhy != "" || nwhy != "":
		f.Binary, f.TooLarge = true, owhy+nwhy
		return nil
	case obin || nbin:
		f.Binary = true
		return nil
	}
	*total += len(old) + len(new)
	for _, h := range review.Hunks(old, new) {
		f.Hunks = append(f.Hunks, api.Hunk{OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines, Lines: h.Lines})
	}
	return nil
}

// hides says whether an upper entry hides what the project has beneath
// its path: a whiteout, an opaque directory, anything not a directory.
func hides(e *checkpoint.Entry) bool {
	return e != nil && (e.Type != checkpoint.Dir || e.Opaque)
}

// projectNames adds the project's paths beneath dir to paths, at most
// budget of them.
func projectNames(proj *confined.Root, dir string, paths *[]string, budget *int) {
	names, err := proj.ReadDirNames(dir, *budget)
	if err != nil {
		return
	}
	for _, n := range names {
		if *budget <= 0 {
			return
		}
		*budget--
		p := path.Join(dir, n)
		*paths = append(*paths, p)
		if fi, err := proj.Lstat(p); err == nil && fi.IsDir() {
			projectNames(proj, p, paths, budget)
		}
	}
}
