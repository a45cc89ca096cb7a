package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxPatch bounds the patch one diff call returns.
const maxPatch = 512 << 10

type diffInput struct {
	Stat  bool     `json:"stat,omitempty" jsonschema:"only the changed files with their added and removed line counts"`
	Paths []string `json:"paths,omitempty" jsonschema:"only these files or directories (relative to /workspace); default all"`
}

// DiffResult is the session's changes: per file stats, and the patch unless
// only the stat was asked for.
type DiffResult struct {
	Session string       `json:"session"`
	Files   []FileChange `json:"files"`
	Patch   string       `json:"patch,omitempty"`
	// Truncated says the patch is longer than what Patch holds.
	Truncated bool `json:"truncated,omitempty"`
}

// FileChange is one changed path.
type FileChange struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	// Held and Flagged say the project's policy holds the change, or a
	// scanner flagged it (which scanners): a human accepts those.
	Held     bool     `json:"held,omitempty"`
	Flagged  []string `json:"flagged,omitempty"`
	Conflict bool     `json:"conflict,omitempty"`
}

type snapshotInput struct {
	Name string `json:"name,omitempty" jsonschema:"a name to find the snapshot by (optional)"`
}

// SnapshotInfo is one snapshot of a session.
type SnapshotInfo struct {
	ID      string    `json:"id"`
	Name    string    `json:"name,omitempty"`
	Session string    `json:"session"`
	Created time.Time `json:"created"`
}

// Snapshots lists the session's snapshots.
type Snapshots struct {
	Snapshots []SnapshotInfo `json:"snapshots"`
}

// AcceptResult says what an accept wrote into the project and what it left
// in the session.
type AcceptResult struct {
	Accepted []string    `json:"accepted"`
	Left     []LeftEntry `json:"left,omitempty"`
}

// LeftEntry is a change left in the session, and why.
type LeftEntry struct {
	Path   string `json:"path"`
	Why    string `json:"why"` // held, flagged, unreviewed, or failed
	Reason string `json:"reason"`
}

func (s *server) addReviewTools(srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{Name: "diff",
		Description: "Show the session's changes against the project: the patch (git format), or with stat only the changed files and line counts. " +
			"Marks changes the project's policy holds or a scanner flagged."},
		s.diff)
	sdk.AddTool(srv, &sdk.Tool{Name: "snapshot",
		Description: "Take a snapshot of the session (its workspace and container), to go back to or fork from later with `airlock restore`."},
		s.snapshot)
	sdk.AddTool(srv, &sdk.Tool{Name: "list_snapshots",
		Description: "List the snapshots taken of the session."}, s.listSnapshots)
	if s.opts.AllowAccept {
		sdk.AddTool(srv, &sdk.Tool{Name: "accept",
			Description: "Write all of the session's changes into the project, except those the project's policy holds, a scanner flagged or that conflict with the host: " +
				"those stay in the session for a human, and the result names them."},
			s.accept)
	}
}

func (s *server) diff(ctx context.Context, _ *sdk.CallToolRequest, in diffInput) (*sdk.CallToolResult, DiffResult, error) {
	var paths []string
	for _, p := range in.Paths {
		rel, err := projectPath(p)
		if err != nil {
			return nil, DiffResult{}, err
		}
		paths = append(paths, rel)
	}
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, DiffResult{}, err
	}
	d, err := eng.DiffStat(ctx, id, paths)
	if err != nil {
		return nil, DiffResult{}, err
	}
	res := DiffResult{Session: id, Files: []FileChange{}}
	var b strings.Builder
	for _, st := range d.Stats {
		f := FileChange{Path: st.Path, Kind: string(st.Kind), Added: st.Added, Removed: st.Removed, Held: st.Held, Flagged: st.Findings, Conflict: st.Conflict}
		res.Files = append(res.Files, f)
		fmt.Fprintf(&b, "%-9s %s +%d -%d", f.Kind, names.Quote(f.Path), f.Added, f.Removed)
		if f.Held {
			b.WriteString("  [held by the project's policy]")
		}
		if len(f.Flagged) > 0 {
			b.WriteString("  [flagged: " + strings.Join(f.Flagged, ", ") + "]")
		}
		if f.Conflict {
			b.WriteString("  [conflicts with the host]")
		}
		b.WriteString("\n")
	}
	if len(res.Files) == 0 {
		return text("session %s has no changes", id), res, nil
	}
	if !in.Stat {
		var patch strings.Builder
		p := &capped{buf: &patch, limit: maxPatch}
		if err := eng.Patch(ctx, id, paths, p); err != nil && !errors.Is(err, errFull) {
			return nil, DiffResult{}, err
		}
		res.Patch, res.Truncated = strings.ToValidUTF8(patch.String(), "\uFFFD"), p.full
		b.WriteString("\n" + res.Patch)
		if res.Truncated {
			b.WriteString("\n(the patch goes on: ask for fewer paths)")
		}
	}
	return text("session %s, %d changed file(s):\n%s", id, len(res.Files), b.String()), res, nil
}

func (s *server) snapshot(ctx context.Context, _ *sdk.CallToolRequest, in snapshotInput) (*sdk.CallToolResult, SnapshotInfo, error) {
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, SnapshotInfo{}, err
	}
	snap, err := eng.Snapshot(ctx, id, api.SnapshotRequest{Name: in.Name})
	if err != nil {
		return nil, SnapshotInfo{}, err
	}
	out := snapshotInfo(snap)
	return text("snapshot %s of session %s taken; `airlock restore %s` makes a session from it", out.ID, id, out.ID), out, nil
}

func snapshotInfo(s api.Snapshot) SnapshotInfo {
	return SnapshotInfo{ID: s.ID, Name: s.Name, Session: s.Session, Created: s.Created}
}

func (s *server) listSnapshots(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, Snapshots, error) {
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, Snapshots{}, err
	}
	all, err := eng.Snapshots(ctx)
	if err != nil {
		return nil, Snapshots{}, err
	}
	out := Snapshots{Snapshots: []SnapshotInfo{}}
	var b strings.Builder
	for _, snap := range all {
		if snap.Session != id {
			continue
		}
		out.Snapshots = append(out.Snapshots, snapshotInfo(snap))
		fmt.Fprintf(&b, "%s %s %s\n", snap.ID, snap.Created.Format(time.RFC3339), snap.Name)
	}
	if len(out.Snapshots) == 0 {
		return text("session %s has no snapshots", id), out, nil
	}
	return text("snapshots of session %s:\n%s", id, b.String()), out, nil
}

func (s *server) accept(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, AcceptResult, error) {
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, AcceptResult{}, err
	}
	// Everything, never named paths: the engine's "everything" leaves what
	// the policy holds and what a scanner flags, at the moment it accepts.
	res, err := eng.Accept(ctx, id, api.Selection{})
	if err != nil {
		return nil, AcceptResult{}, err
	}
	out := AcceptResult{Accepted: []string{}}
	var b strings.Builder
	for _, o := range res.Outcomes {
		switch {
		case o.Applied:
			out.Accepted = append(out.Accepted, o.Path)
		case o.Left != "":
			out.Left = append(out.Left, LeftEntry{Path: o.Path, Why: o.Left, Reason: o.Reason})
		default:
			out.Left = append(out.Left, LeftEntry{Path: o.Path, Why: "failed", Reason: o.Error})
		}
	}
	fmt.Fprintf(&b, "accepted %d change(s) into %s", len(out.Accepted), "the project")
	for _, p := range out.Accepted {
		b.WriteString("\n  " + names.Quote(p))
	}
	if len(out.Left) > 0 {
		fmt.Fprintf(&b, "\nleft %d change(s) in session %s for a human (`airlock diff %s`, then `airlock accept %s PATH`):", len(out.Left), id, id, id)
		for _, l := range out.Left {
			fmt.Fprintf(&b, "\n  %s (%s): %s", names.Quote(l.Path), l.Why, names.Safe(l.Reason))
		}
	}
	return text("%s", b.String()), out, nil
}
