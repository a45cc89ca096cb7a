package timeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/checkpoint"
	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// Sessions is what the timeline asks of the session core, declared by
// its consumer. The real one is the engine's; unit tests fake it.
type Sessions interface {
	// Workspace returns the session's workspace directories: its upper
	// layer (read through package confined only), its merged view (what
	// undo writes) and its project (the lower layer). An errdefs
	// NotFound or Conflict error when it has none.
	Workspace(ctx context.Context, id string) (upper, merged, project string, err error)
	// Project is the session's project, also for a session without a
	// workspace now (its diffs and blame are read from the checkpoints).
	Project(ctx context.Context, id string) (string, error)
	// Active lists the sessions whose workspace can change now (running,
	// not paused): those a periodic checkpoint looks at.
	Active() []string
	// Turns and Commands list what ran in the session, for the usage of
	// each checkpoint's turn or command.
	Turns(ctx context.Context, id string) ([]api.Turn, error)
	Commands(ctx context.Context, id string) ([]api.Command, error)
	// Events lists an agent turn's events in order: blame names the tool
	// call that edited a hunk's file from them.
	Events(ctx context.Context, id string, turn int) ([]api.Event, error)
	// StopProcesses stops every process running in the session but its
	// container's own, and keeps new work out until release is called.
	// stopped counts the processes stopped.
	StopProcesses(ctx context.Context, id string) (stopped int, release func(), err error)
	// RecordLayers checkpoints the session's container layer and home,
	// each in its own store and only when it changed since that store's
	// newest checkpoint, and returns the checkpoints they are now (zero
	// for one the session does not have). changed says whether either is
	// new.
	RecordLayers(ctx context.Context, id, label string) (l Layers, changed bool, err error)
	// RestoreLayers puts the container layer and home back to l while
	// the session's processes are stopped (StopProcesses): its container
	// is made again, unless they hold what l holds (restored false).
	RestoreLayers(ctx context.Context, id string, l Layers) (restored bool, err error)
	// PruneLayers removes the layer checkpoints no listed checkpoint
	// names (keep), but the newest and pinned ones.
	PruneLayers(ctx context.Context, id string, keep []Layers) error
}

// Layers are the checkpoints of a session's container layer and home
// (in their own stores, beside the workspace's) that a checkpoint of its
// workspace goes with; zero: none, or not known (a checkpoint recorded
// before layers were, a session without them).
type Layers struct {
	Container checkpoint.ID `json:"container,omitempty"`
	Home      checkpoint.ID `json:"home,omitempty"`
}

// Options tune a Timeline. Zero fields take the defaults.
type Options struct {
	// Every is how often the workspaces of active sessions are
	// checkpointed when they changed (default DefaultEvery; negative:
	// never).
	Every time.Duration
	// Keep is how many checkpoints a session keeps (default
	// DefaultKeep; negative: no limit); MaxBytes bounds their size on
	// disk (0: no limit). Pinned checkpoints and the newest are kept.
	Keep     int
	MaxBytes int64
	Logger   *slog.Logger // nil logs nothing
}

// Defaults.
const (
	DefaultEvery = 60 * time.Second
	DefaultKeep  = 200
)

// Timeline keeps the checkpoints of every session. It is safe for
// concurrent use.
type Timeline struct {
	dir  string // STATE/checkpoints
	core Sessions
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	stores map[string]*checkpoint.Store
	// layers are the stores of sessions' container layers and homes, by
	// session and directory (LayerStore).
	layers map[string]map[string]*checkpoint.Store
	// watches are what tells a session's layers unchanged (the
	// engine's), closed with its layer stores.
	watches map[string]io.Closer
	// busy serializes, per session, what records or rewrites its
	// workspace: a checkpoint never sees an undo half done.
	busy map[string]*sync.Mutex
	// pending counts, per session, the checkpoints RecordLater started
	// that are not written yet: readers of the timeline wait for them.
	pending map[string]*pending
	all     sync.WaitGroup
}

// pending counts checkpoints under way (a WaitGroup may not be waited on
// while another Add starts from zero: this may).
type pending struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (p *pending) add(d int) {
	p.mu.Lock()
	p.n += d
	if p.n == 0 {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
}

func (p *pending) wait() {
	p.mu.Lock()
	for p.n > 0 {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

func (t *Timeline) pendingOf(id string) *pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pending[id]
	if p == nil {
		p = &pending{}
		p.cond = sync.NewCond(&p.mu)
		t.pending[id] = p
	}
	return p
}

// RecordLater is Record in the background, so that a command that wrote
// many files returns before they are checkpointed (the checkpoint syncs
// every new object). What reads session id's timeline (List, Diff,
// Undo, Blame) waits for it first, and so must what writes the workspace
// next (the engine's Exec settles before it starts a command).
func (t *Timeline) RecordLater(id string, m Mark) {
	p := t.pendingOf(id)
	p.add(1)
	t.all.Add(1)
	go func() {
		defer t.all.Done()
		defer p.add(-1)
		if _, _, err := t.Record(context.Background(), id, m); err != nil {
			t.log.Warn("checkpoint", "session", id, "kind", m.Kind, "err", err)
		}
	}()
}

// Settle waits for session id's checkpoints under way.
func (t *Timeline) Settle(id string) { t.pendingOf(id).wait() }

// Wait waits for every checkpoint under way (the engine closes).
func (t *Timeline) Wait() { t.all.Wait() }

// lock takes session id's lock.
func (t *Timeline) lock(id string) func() {
	t.mu.Lock()
	m := t.busy[id]
	if m == nil {
		m = new(sync.Mutex)
		t.busy[id] = m
	}
	t.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// Dir is where the checkpoints of session id are kept: the same path for
// every part of the engine that records them.
func Dir(stateDir, id string) string { return filepath.Join(stateDir, "checkpoints", id) }

// New returns the timeline of the sessions under stateDir.
func New(stateDir string, core Sessions, opts Options) *Timeline {
	if opts.Every == 0 {
		opts.Every = DefaultEvery
	}
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Timeline{dir: filepath.Join(stateDir, "checkpoints"), core: core, opts: opts, log: log.With("component", "timeline"), stores: map[string]*checkpoint.Store{}, layers: map[string]map[string]*checkpoint.Store{}, watches: map[string]io.Closer{}, busy: map[string]*sync.Mutex{}, pending: map[string]*pending{}}
}

// Store opens (once) the checkpoint store of session id.
func (t *Timeline) Store(id string) (*checkpoint.Store, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.stores[id]; s != nil {
		return s, nil
	}
	s, err := checkpoint.Open(filepath.Join(t.dir, id))
	if err != nil {
		return nil, fmt.Errorf("open the checkpoints of session %s: %w", id, err)
	}
	t.stores[id] = s
	return s, nil
}

// LayerStore opens (once) the store at dir of one of session id's other
// layers (its container layer, its home): every part of the engine that
// records or restores it shares one Store, whose cached trees the next
// Record compares against, and which no other Store's GC can change
// under it. Remove forgets them.
func (t *Timeline) LayerStore(id, dir string) (*checkpoint.Store, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.layers[id][dir]; s != nil {
		return s, nil
	}
	s, err := checkpoint.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open the checkpoints of session %s: %w", id, err)
	}
	if t.layers[id] == nil {
		t.layers[id] = map[string]*checkpoint.Store{}
	}
	t.layers[id][dir] = s
	return s, nil
}

// DropLayers forgets session id's layer stores and the trees they keep
// (a hibernated session's: nothing records them until it wakes), and
// closes its layer watch.
func (t *Timeline) DropLayers(id string) {
	t.mu.Lock()
	delete(t.layers, id)
	w := t.watches[id]
	delete(t.watches, id)
	t.mu.Unlock()
	if w != nil {
		w.Close()
	}
}

// LayerWatch is session id's layer watch (nil: none). SetLayerWatch
// replaces it, closing the one before; DropLayers and Remove close it.
func (t *Timeline) LayerWatch(id string) io.Closer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.watches[id]
}

// SetLayerWatch: see LayerWatch.
func (t *Timeline) SetLayerWatch(id string, w io.Closer) {
	t.mu.Lock()
	old := t.watches[id]
	t.watches[id] = w
	t.mu.Unlock()
	if old != nil && old != w {
		old.Close()
	}
}

// existing is the store of session id when it has one on disk, else nil.
func (t *Timeline) existing(id string) (*checkpoint.Store, error) {
	if _, err := os.Stat(filepath.Join(t.dir, id)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return t.Store(id)
}

// Remove deletes session id's checkpoints (the session is removed).
func (t *Timeline) Remove(id string) error {
	t.Settle(id)
	defer t.lock(id)()
	t.mu.Lock()
	delete(t.stores, id)
	t.mu.Unlock()
	t.DropLayers(id)
	if id == "" || strings.ContainsAny(id, "/.") {
		return errdefs.Invalidf("session id %q", id)
	}
	return os.RemoveAll(filepath.Join(t.dir, id))
}

// Mark says what a checkpoint records.
type Mark struct {
	Kind    string // api.Checkpoint*
	Turn    int
	Command int64
	UndoTo  int64
	// Since is when the turn or command started: its changes are
	// counted from the newest checkpoint before it (zero: from the
	// parent).
	Since time.Time
	// Always records even when nothing changed since the newest
	// checkpoint (a turn is listed whatever it did).
	Always bool
}

func (m Mark) label() string {
	switch {
	case m.Turn > 0:
		return fmt.Sprintf("%s %d", m.Kind, m.Turn)
	case m.Command > 0:
		return fmt.Sprintf("%s %d", m.Kind, m.Command)
	case m.UndoTo > 0:
		return fmt.Sprintf("%s to %d", m.Kind, m.UndoTo)
	}
	return m.Kind
}

// meta is what the timeline keeps beside a checkpoint's record.
type meta struct {
	Kind    string `json:"kind"`
	Turn    int    `json:"turn,omitempty"`
	Command int64  `json:"command,omitempty"`
	UndoTo  int64  `json:"undo_to,omitempty"`
	From    int64  `json:"from"`
	Files   int    `json:"files"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	// Layers are the container layer's and home's checkpoints then.
	Layers Layers `json:"layers,omitzero"`
}

func metaPath(s *checkpoint.Store, id checkpoint.ID) string {
	return filepath.Join(s.Dir(), "timeline", id.String()+".json")
}

// Record checkpoints session id's workspace as m says. recorded is false
// when nothing changed and nothing was recorded (a command that wrote
// nothing). An undo of the session under way is waited for.
func (t *Timeline) Record(ctx context.Context, id string, m Mark) (c api.Checkpoint, recorded bool, err error) {
	defer t.lock(id)()
	return t.record(ctx, id, m)
}

func (t *Timeline) record(ctx context.Context, id string, m Mark) (c api.Checkpoint, recorded bool, err error) {
	upper, _, project, err := t.core.Workspace(ctx, id)
	if err != nil {
		return c, false, err
	}
	s, err := t.Store(id)
	if err != nil {
		return c, false, err
	}
	prev, err := s.Latest()
	if err != nil {
		return c, false, err
	}
	// A command whose changes a periodic checkpoint took meanwhile is
	// still recorded: its checkpoint names it.
	if undoneSince(s, m.Since) {
		// An undo stopped this turn or command and put the workspace
		// back: what is there now is the undo's, not theirs.
		return c, false, nil
	}
	always := m.Always || prev != nil && !m.Since.IsZero() && prev.Time.After(m.Since)
	// The container layer and home first: a command that only installed
	// a package is a checkpoint too.
	t0 := time.Now()
	layers, moved, err := t.core.RecordLayers(ctx, id, m.label())
	layersTook := time.Since(t0)
	if err != nil {
		// The workspace is still recorded; undo to this checkpoint then
		// leaves the container as it is.
		t.log.Warn("checkpoint a session's container layer and home", "session", id, "err", err)
		layers = Layers{}
	}
	always = always || moved
	if prev == nil && !always && emptyDir(upper) {
		return c, false, nil // as the session started: its implicit checkpoint 0
	}
	cp, err := s.RecordDir(ctx, upper, checkpoint.RecordOptions{Label: m.label(), IfChanged: !always})
	if err != nil {
		return c, false, fmt.Errorf("checkpoint session %s: %w", id, err)
	}
	if prev != nil && cp.ID == prev.ID {
		return c, false, nil
	}
	md := meta{Kind: m.Kind, Turn: m.Turn, Command: m.Command, UndoTo: m.UndoTo, From: int64(cp.Parent), Layers: layers}
	if !m.Since.IsZero() {
		md.From = int64(newestBefore(s, m.Since, cp.ID))
	}
	err = t.eachBetween(ctx, s, project, checkpoint.ID(md.From), cp.ID, func(f api.FileDiff) error {
		md.Files++
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				switch l[0] {
				case '+':
					md.Added++
				case '-':
					md.Removed++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.log.Warn("count a checkpoint's changes", "session", id, "checkpoint", cp.ID, "err", err)
	}
	data, _ := json.Marshal(md)
	if err := os.MkdirAll(filepath.Dir(metaPath(s, cp.ID)), 0o700); err != nil {
		return c, false, err
	}
	if err := atomicfile.Write(metaPath(s, cp.ID), data, 0o600); err != nil {
		return c, false, err
	}
	t.log.Debug("checkpoint", "session", id, "checkpoint", cp.ID, "kind", m.Kind, "files", md.Files, "took", cp.Stats.Duration, "written", cp.Stats.BytesWritten, "layers_took", layersTook, "layers_moved", moved)
	if cp.ID%10 == 0 {
		t.prune(id, s)
	}
	return view(*cp, md, true), true, nil
}

// emptyDir says whether the directory dir (an upper layer) holds nothing.
func emptyDir(dir string) bool {
	r, err := confined.OpenRoot(dir)
	if err != nil {
		return false
	}
	defer r.Close()
	names, err := r.ReadDirNames("", 1)
	return err == nil && len(names) == 0
}

// undoneSince says whether an undo was recorded after since (zero: no).
func undoneSince(s *checkpoint.Store, since time.Time) bool {
	if since.IsZero() {
		return false
	}
	list, err := s.List()
	if err != nil {
		return false
	}
	for i := len(list) - 1; i >= 0 && list[i].Time.After(since); i-- {
		if strings.HasPrefix(list[i].Label, api.CheckpointUndo+" ") {
			return true
		}
	}
	return false
}

// newestBefore is the newest checkpoint recorded before time at and
// other than self (0: none).
func newestBefore(s *checkpoint.Store, at time.Time, self checkpoint.ID) checkpoint.ID {
	list, err := s.List()
	if err != nil {
		return 0
	}
	var best checkpoint.ID
	for _, c := range list {
		if c.ID != self && !c.Time.After(at) {
			best = c.ID
		}
	}
	return best
}

// prune removes what the count and size settings do not keep.
func (t *Timeline) prune(id string, s *checkpoint.Store) {
	o := checkpoint.PruneOptions{MaxBytes: t.opts.MaxBytes}
	if t.opts.Keep > 0 {
		o.Keep = t.opts.Keep
	}
	if o.Keep == 0 && o.MaxBytes == 0 {
		return
	}
	res, err := s.Prune(o)
	if err != nil {
		t.log.Warn("prune checkpoints", "session", id, "err", err)
		return
	}
	for _, r := range res.Removed {
		os.Remove(metaPath(s, r))
	}
	// The layers' checkpoints the remaining ones name are kept.
	list, err := s.List()
	if err != nil {
		return
	}
	keep := make([]Layers, 0, len(list))
	for _, c := range list {
		md, _ := readMeta(s, c)
		keep = append(keep, md.Layers)
	}
	if err := t.core.PruneLayers(context.Background(), id, keep); err != nil {
		t.log.Warn("prune the checkpoints of a session's container layer and home", "session", id, "err", err)
	}
}

// LayersOf are the container layer's and home's checkpoints that
// checkpoint cid of session id goes with (zero when not known).
func (t *Timeline) LayersOf(id string, cid checkpoint.ID) (Layers, error) {
	s, err := t.Store(id)
	if err != nil {
		return Layers{}, err
	}
	c, err := s.Get(cid)
	if err != nil {
		return Layers{}, err
	}
	md, _ := readMeta(s, *c)
	return md.Layers, nil
}

// readMeta is the timeline's file of checkpoint c, or what its label
// says when it has none.
func readMeta(s *checkpoint.Store, c checkpoint.Checkpoint) (meta, bool) {
	var md meta
	if data, err := os.ReadFile(metaPath(s, c.ID)); err == nil && json.Unmarshal(data, &md) == nil && md.Kind != "" {
		return md, true
	}
	f := strings.Fields(c.Label)
	md = meta{Kind: "checkpoint", From: int64(c.Parent)}
	if len(f) > 0 {
		md.Kind = f[0]
	}
	if len(f) > 1 {
		n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		switch md.Kind {
		case api.CheckpointTurn:
			md.Turn = int(n)
		case api.CheckpointCommand:
			md.Command = n
		}
	}
	return md, false
}

func view(c checkpoint.Checkpoint, md meta, counted bool) api.Checkpoint {
	return api.Checkpoint{ID: int64(c.ID), Kind: md.Kind, Time: c.Time, Turn: md.Turn, Command: md.Command, UndoTo: md.UndoTo,
		From: md.From, Files: md.Files, Added: md.Added, Removed: md.Removed, Pins: c.Pins}
}

// List returns session id's checkpoints, oldest first, with the usage of
// the turn or command each ended.
func (t *Timeline) List(ctx context.Context, id string) ([]api.Checkpoint, error) {
	t.Settle(id)
	s, err := t.existing(id)
	if err != nil || s == nil {
		return []api.Checkpoint{}, err
	}
	list, err := s.List()
	if err != nil {
		return nil, err
	}
	turns, _ := t.core.Turns(ctx, id)
	byTurn := map[int]api.Turn{}
	for _, tr := range turns {
		byTurn[tr.N] = tr
	}
	var cmds map[int64]api.Command
	out := make([]api.Checkpoint, 0, len(list))
	for _, c := range list {
		md, ok := readMeta(s, c)
		v := view(c, md, ok)
		switch {
		case v.Turn > 0 && v.Kind == api.CheckpointTurn:
			if tr, ok := byTurn[v.Turn]; ok {
				u := tr.Usage
				v.Usage, v.CPUSeconds = &u, tr.CPUSeconds
			}
		case v.Command > 0:
			if cmds == nil {
				cmds = map[int64]api.Command{}
				all, _ := t.core.Commands(ctx, id)
				for _, x := range all {
					cmds[x.ID] = x
				}
			}
			v.CPUSeconds = cmds[v.Command].CPUSeconds
		}
		out = append(out, v)
	}
	return out, nil
}

// Usage is the size on disk of session id's checkpoints.
func (t *Timeline) Usage(id string) (int64, error) {
	s, err := t.existing(id)
	if err != nil || s == nil {
		return 0, err
	}
	return s.Usage()
}

// turnCheckpoint finds the checkpoint that ended turn n (the newest, if
// a turn was recorded twice).
func turnCheckpoint(list []api.Checkpoint, id string, n int) (api.Checkpoint, error) {
	var found *api.Checkpoint
	for i, c := range list {
		if c.Kind == api.CheckpointTurn && c.Turn == n {
			found = &list[i]
		}
	}
	if found == nil {
		return api.Checkpoint{}, errdefs.NotFoundf("session %s has no checkpoint of turn %d: `airlock turns %s` lists its checkpoints", id, n, id)
	}
	return *found, nil
}

func byID(list []api.Checkpoint, id string, cid int64) (api.Checkpoint, error) {
	for _, c := range list {
		if c.ID == cid {
			return c, nil
		}
	}
	return api.Checkpoint{}, errdefs.NotFoundf("session %s has no checkpoint %d (pruned, or never made): `airlock turns %s` lists its checkpoints", id, cid, id)
}

// Run checkpoints the active sessions' workspaces every Options.Every
// while they change, until ctx ends.
func (t *Timeline) Run(ctx context.Context) {
	if t.opts.Every < 0 {
		return
	}
	tick := time.NewTicker(t.opts.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, id := range t.core.Active() {
			if _, _, err := t.Record(ctx, id, Mark{Kind: api.CheckpointPeriodic}); err != nil && ctx.Err() == nil {
				t.log.Debug("periodic checkpoint", "session", id, "err", err)
			}
		}
	}
}
