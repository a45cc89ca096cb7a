// Package audit writes a run's audit bundle: one gzipped tar per session
// (`airlock audit ID`, and `airlock ci` beside verdict.json) holding an
// index (index.json, schema airlock.audit/v2, documented in
// docs/AUDIT.md) of what the run did — every command and agent tool call
// with its time, exit code and output digest, every connection with its
// decision and rule, every secret injected (name and host, never the
// value), every snapshot and checkpoint, the project files the patch
// changes and, for each hunk, the turn (or command) and tool call that
// produced it — and the final patch itself. It reads the
// session through Source, which the engine (for ci) and the API client
// (for the CLI) both provide, so it knows nothing of how either works.
package audit

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// Schema names the index's format; a change that removes or changes a
// field gets a new version.
const Schema = "airlock.audit/v2"

// Files of the bundle.
const (
	IndexName = "index.json"
	PatchName = "changes.patch"
)

// Source is what a bundle is read from: the engine's calls of the same
// names (engine.Engine has them; the CLI wraps its API client).
type Source interface {
	Get(ctx context.Context, id string) (api.Session, error)
	Commands(ctx context.Context, id string, withOutput bool) ([]api.Command, error)
	Turns(ctx context.Context, id string) ([]api.Turn, error)
	Events(ctx context.Context, id string, turn int) ([]api.Event, error)
	EgressLog(ctx context.Context, id string, blockedOnly bool, limit int) ([]api.EgressEntry, error)
	Snapshots(ctx context.Context) ([]api.Snapshot, error)
	Checkpoints(ctx context.Context, id string) ([]api.Checkpoint, error)
	Patch(ctx context.Context, id string, paths []string, w io.Writer) error
	Blame(ctx context.Context, id string, paths []string) (api.Blame, error)
}

// Index is index.json.
type Index struct {
	Schema   string            `json:"schema"`
	Written  time.Time         `json:"written"`
	Session  Session           `json:"session"`
	Policy   *api.EgressPolicy `json:"policy,omitempty"`
	Commands []Command         `json:"commands"`
	Turns    []Turn            `json:"turns"`
	// Connections are the session's connections and lookups, oldest
	// first, each with its decision and the rule that made it.
	Connections []api.EgressEntry `json:"connections"`
	Secrets     []SecretUse       `json:"secrets"`
	Snapshots   []Snapshot        `json:"snapshots"`
	// Checkpoints are the session's timeline, oldest first.
	Checkpoints []Checkpoint `json:"checkpoints"`
	Patch       Patch        `json:"patch"`
}

// Session is the session the bundle is of.
type Session struct {
	ID      string    `json:"id"`
	Project string    `json:"project"`
	Image   string    `json:"image"`
	Created time.Time `json:"created"`
	State   string    `json:"state"`
	Agent   string    `json:"agent,omitempty"`
}

// Command is one command run in the session (by the user, ci, or an
// agent's turn). Its output is kept as a digest only.
type Command struct {
	ID       int64      `json:"id"`
	Argv     []string   `json:"argv"`
	User     string     `json:"user"`
	Started  time.Time  `json:"started"`
	Ended    *time.Time `json:"ended,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`
	State    string     `json:"state"`
	// OutputSHA256 is of the output the engine kept (OutputBytes of
	// it); Truncated says the engine kept only the end of it.
	OutputSHA256 string `json:"output_sha256"`
	OutputBytes  int    `json:"output_bytes"`
	Truncated    bool   `json:"truncated,omitempty"`
}

// Turn is one agent turn and its tool calls.
type Turn struct {
	N         int        `json:"n"`
	Agent     string     `json:"agent"`
	Model     string     `json:"model,omitempty"`
	PromptSHA string     `json:"prompt_sha256"`
	State     string     `json:"state"`
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	Usage     api.Usage  `json:"usage"`
	Calls     []Call     `json:"calls"`
}

// Call is one thing an agent did in a turn that touches the world: a
// tool call, a command it ran, a file it edited. Seq is the event's place
// in the turn (from 1), which Patch.Files refers to.
type Call struct {
	Seq      int       `json:"seq"`
	ID       string    `json:"id,omitempty"` // the agent's id of the call (a tool_call and its file_edit share it)
	Type     string    `json:"type"`         // tool_call, command, file_edit
	Time     time.Time `json:"time"`
	Tool     string    `json:"tool,omitempty"`
	Path     string    `json:"path,omitempty"`
	Command  string    `json:"command,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	// InputSHA256 is of the tool's input as the agent's CLI reported it.
	InputSHA256 string `json:"input_sha256,omitempty"`
}

// SecretUse is a secret the policy injects into a host's requests, and
// how many connections to that host the policy allowed.
type SecretUse struct {
	Name        string `json:"name"`
	Host        string `json:"host"`
	Header      string `json:"header"`
	Connections int    `json:"connections"`
}

// Snapshot is a snapshot of the session.
type Snapshot struct {
	ID      string    `json:"id"`
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	Digest  string    `json:"digest"`
}

// Checkpoint is a recorded state of the session's workspace: at the end
// of a turn, of a command that changed it, periodically, after an undo.
// Files, Added and Removed are what changed since checkpoint From.
type Checkpoint struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"`
	Time    time.Time `json:"time"`
	Turn    int       `json:"turn,omitempty"`
	Command int64     `json:"command,omitempty"`
	UndoTo  int64     `json:"undo_to,omitempty"`
	From    int64     `json:"from"`
	Files   int       `json:"files"`
	Added   int       `json:"added"`
	Removed int       `json:"removed"`
}

// Patch is the final patch (changes.patch in the bundle) and, for each
// file it changes, its hunks and the agent calls that edited the file.
type Patch struct {
	File   string      `json:"file,omitempty"` // "" when nothing changed
	SHA256 string      `json:"sha256,omitempty"`
	Bytes  int64       `json:"bytes"`
	Files  []PatchFile `json:"files"`
}

// PatchFile is one file of the patch. EditedBy lists the calls whose
// file_edit event names the file, oldest first, in any turn.
type PatchFile struct {
	Path     string    `json:"path"`
	Hunks    []Hunk    `json:"hunks"`
	EditedBy []CallRef `json:"edited_by"`
}

// Hunk is one hunk of a file's diff, by its header. Producer is nil when
// no checkpoint holds its lines (they changed after the newest).
type Hunk struct {
	Header   string    `json:"header"`
	SHA256   string    `json:"sha256"`
	Producer *Producer `json:"producer,omitempty"`
}

// Producer is what produced a hunk (see docs/AUDIT.md for the rule): the
// checkpoint that last changed its lines and its kind, the turn or
// command that checkpoint belongs to, and within the turn the call (Seq,
// and the agent's id of it and its tool) that edited the hunk's file,
// when an event of the turn names it; Match says how that call was told
// (api.BlameMatch*: its text holds the hunk's lines, or it is the last
// edit of the file in the turn).
type Producer struct {
	Checkpoint int64  `json:"checkpoint,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Turn       int    `json:"turn,omitempty"`
	Seq        int    `json:"seq,omitempty"`
	Call       string `json:"call,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Match      string `json:"match,omitempty"`
	Command    int64  `json:"command,omitempty"`
}

// CallRef names a call: turn N's event Seq.
type CallRef struct {
	Turn int `json:"turn"`
	Seq  int `json:"seq"`
}

// Write writes session id's bundle to w.
func Write(ctx context.Context, src Source, id string, w io.Writer) (*Index, error) {
	s, err := src.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	ix := &Index{Schema: Schema, Written: time.Now().UTC(), Policy: s.Egress,
		Session:  Session{ID: s.ID, Project: s.Project, Image: s.Image, Created: s.Created, State: s.State, Agent: s.Agent},
		Commands: []Command{}, Turns: []Turn{}, Connections: []api.EgressEntry{}, Secrets: []SecretUse{}, Snapshots: []Snapshot{},
		Checkpoints: []Checkpoint{}, Patch: Patch{Files: []PatchFile{}}}

	cmds, err := src.Commands(ctx, id, true)
	if err != nil {
		return nil, fmt.Errorf("the session's commands: %w", err)
	}
	for _, c := range cmds {
		ix.Commands = append(ix.Commands, Command{ID: c.ID, Argv: c.Argv, User: c.User, Started: c.Started, Ended: c.Ended, ExitCode: c.ExitCode,
			State: c.State, OutputSHA256: digest(c.Output), OutputBytes: len(c.Output), Truncated: c.Truncated})
	}

	turns, err := src.Turns(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("the session's turns: %w", err)
	}
	edits := edits{all: map[string][]CallRef{}}
	for _, t := range turns {
		evs, err := src.Events(ctx, id, t.N)
		if err != nil {
			return nil, fmt.Errorf("turn %d's events: %w", t.N, err)
		}
		tu := Turn{N: t.N, Agent: t.Agent, Model: t.Model, PromptSHA: digest(t.Prompt), State: t.State, Started: t.Started, Ended: t.Ended,
			ExitCode: t.ExitCode, Usage: t.Usage, Calls: []Call{}}
		for i, ev := range evs {
			switch ev.Type {
			case api.EventToolCall, api.EventCommand, api.EventFileEdit:
			default:
				continue
			}
			c := Call{Seq: i + 1, ID: ev.ID, Type: ev.Type, Time: ev.Time, Tool: ev.Tool, Path: ev.Path, Command: ev.Command, ExitCode: ev.ExitCode}
			if ev.Input != "" {
				c.InputSHA256 = digest(ev.Input)
			}
			tu.Calls = append(tu.Calls, c)
			if ev.Type == api.EventFileEdit && ev.Path != "" {
				edits.add(t.N, i+1, ev.Path)
			}
		}
		ix.Turns = append(ix.Turns, tu)
	}

	conns, err := src.EgressLog(ctx, id, false, 0)
	if err != nil {
		return nil, fmt.Errorf("the session's connections: %w", err)
	}
	ix.Connections = append(ix.Connections, conns...)
	if s.Egress != nil {
		ix.Secrets = secretUses(s.Egress.Inject, conns)
	}

	snaps, err := src.Snapshots(ctx)
	if err != nil {
		return nil, fmt.Errorf("the snapshots: %w", err)
	}
	for _, sn := range snaps {
		if sn.Session == id {
			ix.Snapshots = append(ix.Snapshots, Snapshot{ID: sn.ID, Name: sn.Name, Created: sn.Created, Digest: sn.Digest})
		}
	}

	cps, err := src.Checkpoints(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("the session's checkpoints: %w", err)
	}
	ix.Checkpoints = make([]Checkpoint, 0, len(cps))
	for _, c := range cps {
		ix.Checkpoints = append(ix.Checkpoints, Checkpoint{ID: c.ID, Kind: c.Kind, Time: c.Time, Turn: c.Turn, Command: c.Command,
			UndoTo: c.UndoTo, From: c.From, Files: c.Files, Added: c.Added, Removed: c.Removed})
	}

	// The patch goes through a temporary file: it can be larger than
	// is reasonable to hold, and is read twice (its hunks, the tar).
	patch, err := os.CreateTemp("", "airlock-audit-*.patch")
	if err != nil {
		return nil, err
	}
	defer os.Remove(patch.Name())
	defer patch.Close()
	h := sha256.New()
	if err := src.Patch(ctx, id, nil, io.MultiWriter(patch, h)); err != nil {
		return nil, fmt.Errorf("the session's patch: %w", err)
	}
	size, err := patch.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		ix.Patch.File, ix.Patch.SHA256, ix.Patch.Bytes = PatchName, "sha256:"+hex.EncodeToString(h.Sum(nil)), size
		if _, err := patch.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		blame, err := src.Blame(ctx, id, nil)
		if err != nil {
			return nil, fmt.Errorf("which turn changed each hunk: %w", err)
		}
		at := attribution{edits: edits, blame: blameByRange(blame), untracked: len(ix.Checkpoints) == 0}
		if ix.Patch.Files, err = patchFiles(patch, edits.all, at.producer); err != nil {
			return nil, fmt.Errorf("read the session's patch: %w", err)
		}
	}

	index, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return nil, err
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name string, r io.Reader, size int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: ix.Written, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	index = append(index, '\n')
	if err := add(IndexName, bytes.NewReader(index), int64(len(index))); err != nil {
		return nil, err
	}
	if size > 0 {
		if _, err := patch.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		if err := add(PatchName, io.LimitReader(patch, size), size); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return ix, gz.Close()
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// secretRef is how an injection's value names a secret (egress's form).
var secretRef = regexp.MustCompile(`secret:([A-Za-z_][A-Za-z0-9_]*)`)

// secretUses lists the secrets injections name, with the connections
// the policy allowed to their hosts. An injection is HOST[:PORT]:HEADER=VALUE.
func secretUses(injects []string, conns []api.EgressEntry) []SecretUse {
	out := []SecretUse{}
	for _, inj := range injects {
		left, value, ok := strings.Cut(inj, "=")
		c := strings.LastIndex(left, ":")
		if !ok || c < 0 {
			continue
		}
		host, header := left[:c], left[c+1:]
		name := host
		if h, _, ok := strings.Cut(host, ":"); ok && !strings.HasPrefix(host, "[") {
			name = h
		}
		n := 0
		for _, e := range conns {
			if e.Allowed && e.Kind != "dns" && hostMatch(name, e.Host) {
				n++
			}
		}
		for _, m := range secretRef.FindAllStringSubmatch(value, -1) {
			out = append(out, SecretUse{Name: m[1], Host: host, Header: header, Connections: n})
		}
	}
	return out
}

// hostMatch: a rule's host (example.com, *.example.com) against a host.
func hostMatch(rule, host string) bool {
	rule, host = strings.ToLower(rule), strings.ToLower(strings.TrimSuffix(host, "."))
	if d, ok := strings.CutPrefix(rule, "*."); ok {
		return strings.HasSuffix(host, "."+d)
	}
	return host == rule
}

// patchFiles reads the files and hunks of a git patch, with the calls
// that edited each file and what produced each hunk.
func patchFiles(patch io.Reader, edits map[string][]CallRef, producer func(path, header string) *Producer) ([]PatchFile, error) {
	var files []PatchFile
	var cur *PatchFile
	var hunk *Hunk
	body := sha256.New()
	endHunk := func() {
		if hunk != nil {
			hunk.SHA256 = "sha256:" + hex.EncodeToString(body.Sum(nil))
			cur.Hunks = append(cur.Hunks, *hunk)
		}
		hunk = nil
		body.Reset()
	}
	sc := bufio.NewScanner(patch)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "diff --git "):
			endHunk()
			files = append(files, PatchFile{Path: diffPath(line), Hunks: []Hunk{}, EditedBy: []CallRef{}})
			cur = &files[len(files)-1]
			if e := edits[cur.Path]; len(e) > 0 {
				cur.EditedBy = e
			}
		case cur != nil && strings.HasPrefix(line, "@@"):
			endHunk()
			hunk = &Hunk{Header: line, Producer: producer(cur.Path, line)}
		case hunk != nil:
			io.WriteString(body, line+"\n")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	endHunk()
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	if files == nil {
		files = []PatchFile{}
	}
	return files, nil
}

// diffPath is the new path of a "diff --git a/X b/Y" line; git quotes a
// path holding a control character, a quote, a backslash or a non-ASCII
// byte C-style ("b/x\n\303\251"), which Go's unquoting reads.
func diffPath(line string) string {
	rest := strings.TrimPrefix(line, "diff --git ")
	if strings.HasSuffix(rest, `"`) {
		if i := strings.LastIndex(rest, ` "b/`); i >= 0 {
			if p, err := strconv.Unquote(rest[i+1:]); err == nil {
				return p[2:]
			}
		}
	}
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return strings.Trim(rest[i+3:], `"`)
	}
	return rest
}
