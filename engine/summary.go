package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/index"
	"github.com/airlock/airlock/overlay"
	"github.com/airlock/airlock/review"
)

// summaries is what a live session keeps of engine/index: the watch on
// its workspace and the summary of its changes from the last walk, which
// a `diff --stat` and the listings read back while it holds.
type summaries struct {
	mu      sync.Mutex
	watch   *index.Watch // nil: not watched, every summary walks
	summary *index.Summary
	ignored review.IgnoredSummary // what the summary's walk left to ignore rules
	// gen moves with what changes a review without touching the
	// workspace: an accept or discard (the base and the project).
	gen atomic.Uint64
	// captured is set once the base's contents are captured: until
	// then a review may see conflicts that later merge.
	captured atomic.Bool
	// periodic is the mark when the timeline last looked for a periodic
	// checkpoint: an unchanged workspace is not walked again.
	periodic string
}

// movedSincePeriodic says whether the workspace may have changed since
// the last time it was asked (always, without a watch), so that a large
// idle session's periodic checkpoint costs no walk.
func (s *summaries) movedSincePeriodic() bool {
	if s == nil || s.watch == nil {
		return true
	}
	m := s.watch.Mark()
	s.mu.Lock()
	defer s.mu.Unlock()
	moved := m != s.periodic
	s.periodic = m
	return moved
}

// watchWorkspace starts the watch on ws's tmpfs; a workspace that cannot
// be watched (no fanotify, a disk workspace) is summarised by walking.
func (e *Engine) watchWorkspace(id string, ws *overlay.Workspace) *summaries {
	s := &summaries{}
	w, err := index.Start(ws.Tmpfs())
	if err != nil {
		e.log.Debug("the workspace is not watched: summaries walk", "session", id, "err", err)
		return s
	}
	s.watch = w
	return s
}

func (s *summaries) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watch != nil {
		s.watch.Close()
	}
	s.summary.Remove()
	s.summary = nil
}

// invalidate drops the summary: an accept or discard changed what a
// review finds.
func (s *summaries) invalidate() {
	if s != nil {
		s.gen.Add(1)
	}
}

func (e *Engine) summaryFile(l *live) string { return filepath.Join(l.ws.Dir, "summary") }

// stamp is what a summary is made under: the workspace's mark and what
// else decides a review's result (the base, the accept policy's file, the
// limits). "" when the session has no watch.
func (e *Engine) stamp(l *live, layers review.Layers) string {
	s := l.sums
	if s == nil || s.watch == nil || !s.captured.Load() {
		return ""
	}
	file := filepath.Join(layers.Project, review.PolicyFile)
	if e.policy != "" {
		file = e.policy
	}
	var st unix.Stat_t
	if err := unix.Lstat(file, &st); err != nil {
		st = unix.Stat_t{}
	}
	return fmt.Sprintf("%s|%d|%t|%d.%d.%d.%d|%+v|%s", s.watch.Mark(), s.gen.Load(), layers.Base != nil,
		st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano(), e.reviewLimits(), globalsStamp(layers.Project))
}

// current is the session's summary if it still holds: same stamp, the
// project paths it depends on unchanged, and no process of the session
// holding a shared writable mapping of a workspace file (whose writes
// make no event).
func (e *Engine) current(sid string, l *live, layers review.Layers) (*index.Summary, review.IgnoredSummary, string) {
	stamp := e.stamp(l, layers)
	if stamp == "" {
		return nil, review.IgnoredSummary{}, ""
	}
	l.sums.mu.Lock()
	sum, ignored := l.sums.summary, l.sums.ignored
	l.sums.mu.Unlock()
	if sum == nil || !sum.Holds(stamp, layers.Project) || e.mapped(sid, l) {
		return nil, review.IgnoredSummary{}, stamp
	}
	return sum, ignored, stamp
}

// mapped says whether a process of the session may write a workspace
// file through a shared mapping (when unsure: yes).
func (e *Engine) mapped(sid string, l *live) bool {
	pids, err := e.meter.Procs(sid)
	if err != nil {
		return true
	}
	var a, b unix.Stat_t
	if unix.Stat(l.ws.Tmpfs(), &a) != nil || unix.Stat(l.ws.Merged(), &b) != nil {
		return true
	}
	found, err := index.WritableMappings(pids, a.Dev, b.Dev)
	return found || err != nil
}

// keep makes w the session's summary if nothing changed since stamp.
func (e *Engine) keep(sid string, l *live, layers review.Layers, stamp string, w *index.Writer, ignored review.IgnoredSummary) {
	if stamp == "" || e.stamp(l, layers) != stamp || e.mapped(sid, l) {
		w.Abort()
		return
	}
	sum, err := w.Commit(stamp)
	if err != nil {
		e.log.Debug("summary not kept", "session", sid, "err", err)
		return
	}
	l.sums.mu.Lock()
	l.sums.summary, l.sums.ignored = sum, ignored
	l.sums.mu.Unlock()
}

// DiffStatLines is the session's diff summary, a line per changed path
// (api.AppendStatLine) handed to each in path order: read back from the
// last walk's summary while it holds (first a line with the longest
// path's width, api.AppendStatWidth), else from a walk that is kept for
// the next time. The api.Diff returned has neither files nor stats. q is
// as DiffEach's.
func (e *Engine) DiffStatLines(ctx context.Context, id string, q api.DiffQuery, each func(line []byte) error) (api.Diff, error) {
	mode, err := ignoredMode(q.Ignored)
	if err != nil {
		return api.Diff{}, err
	}
	sid, l, layers, err := e.reviewable(ctx, id)
	if err != nil {
		return api.Diff{}, err
	}
	h, err := e.heavy(ctx, sid, l)
	if err != nil {
		return api.Diff{}, err
	}
	defer h.done()
	sum, ignored, stamp := (*index.Summary)(nil), review.IgnoredSummary{}, ""
	if len(q.Paths) == 0 && mode == review.IgnoredSummarise {
		sum, ignored, stamp = e.current(sid, l, layers)
	}
	if sum != nil {
		// The widest path first: a client prints each line as it comes.
		if err := each(api.AppendStatWidth(nil, sum.Width())); err != nil {
			return api.Diff{}, err
		}
		if err := h.without(ctx, func() error { return sum.Each(each) }); err != nil {
			return api.Diff{}, err
		}
	} else if ignored, err = e.walkStats(ctx, sid, l, layers, review.Options{Paths: q.Paths, Ignored: mode}, stamp, each, h); err != nil {
		return api.Diff{}, err
	}
	commits, err := review.Commits(layers.Project, l.ws.Merged())
	if err != nil {
		e.log.Warn("read the session's commits", "session", sid, "err", err)
	}
	return api.Diff{Session: sid, Workspace: e.usage(l), Commits: wireCommits(commits),
		Ignored: wireIgnored(ignored.Project), SessionIgnored: wireIgnored(ignored.Session)}, nil
}

// walkStats reviews the session for its summary, handing each line on and
// writing it to a summary kept if nothing changed meanwhile (stamp "":
// none is kept), and says what ignore rules covered. The summary depends
// on the project's rule files the review read too.
func (e *Engine) walkStats(ctx context.Context, sid string, l *live, layers review.Layers, opts review.Options, stamp string, each func([]byte) error, h *hold) (review.IgnoredSummary, error) {
	var ignored review.IgnoredSummary
	var rulesMu sync.Mutex
	rules := map[string]bool{}
	if layers.Ignoring != nil {
		layers.Ignoring.ProjectRead = func(rel string, found bool) {
			rulesMu.Lock()
			rules[rel] = found
			rulesMu.Unlock()
		}
	}
	var w *index.Writer
	if stamp != "" {
		var err error
		if w, err = index.Create(e.summaryFile(l), layers.Project); err != nil {
			e.log.Debug("summary not kept", "session", sid, "err", err)
		}
	}
	var line []byte
	opts.Hunks, opts.NoDigests = true, true
	opts.OnIgnored = func(s review.IgnoredSummary) { ignored = s }
	err := e.reviewEach(ctx, sid, layers, opts, func(batch []review.FileDiff) error {
		return h.without(ctx, func() error {
			for _, f := range batch {
				st := api.Stats([]api.FileDiff{wireFileDiff(f)})[0]
				line = api.AppendStatLine(line[:0], st)
				if w != nil {
					measured := st.Kind != "added" || st.Conflict || st.Merged
					w.Add(line, st.Path, measured)
					if st.From != "" {
						w.Depend(st.From, true)
					}
				}
				if err := each(line); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		if w != nil {
			w.Abort()
		}
		return ignored, selectErr(err)
	}
	if w != nil {
		rulesMu.Lock()
		for rel, found := range rules {
			w.Depend(rel, found)
		}
		if layers.Ignoring != nil && layers.Ignoring.Tracked != nil {
			w.Depend(".git/index", true)
		}
		rulesMu.Unlock()
		e.keep(sid, l, layers, stamp, w, ignored)
	}
	return ignored, nil
}

// changeCount is how many paths the session changed: the summary's count
// while it holds, else a count by walking (no listing kept).
func (e *Engine) changeCount(ctx context.Context, sid string, l *live, project string) (int, error) {
	layers := review.Layers{Upper: l.ws.Upper(), Project: project, Base: l.base}
	if l.base.Ready() != nil {
		layers.Base = nil
	}
	if sum, _, _ := e.current(sid, l, layers); sum != nil {
		return sum.Count(), nil
	}
	return review.CountChanges(ctx, review.Layers{Upper: l.ws.Upper(), Project: project, Ignoring: ignoringFor(project, l.ws.Upper())}, e.reviewers)
}
