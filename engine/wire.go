package engine

import (
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/review"
)

// The engine speaks the review's and the agents' types; its API speaks
// engine/api's, which import nothing so that clients link neither. These
// convert between them at the engine's edge. The JSON of each pair is the
// same (engine/wire_test.go compares them).

// wireAll converts a slice, keeping nil nil and empty empty: the JSON of
// a nil slice is null, of an empty one [].
func wireAll[S, T any](in []S, f func(S) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func wireFileDiff(f review.FileDiff) api.FileDiff {
	return api.FileDiff{
		Change:     wireChange(f.Change),
		Hunks:      wireAll(f.Hunks, func(h review.Hunk) api.Hunk { return api.Hunk(h) }),
		Conflicts:  wireAll(f.Conflicts, func(c review.Conflict) api.Conflict { return api.Conflict(c) }),
		Held:       f.Held,
		AutoAccept: f.AutoAccept,
		Findings:   wireAll(f.Findings, func(x review.Finding) api.Finding { return api.Finding(x) }),
		Digest:     f.Digest,
	}
}

func wireChange(c review.Change) api.Change {
	return api.Change{
		ID: c.ID, Path: c.Path, RawPath: c.RawPath,
		Kind: string(c.Kind), Type: string(c.Type), OldType: string(c.OldType),
		Mode: c.Mode, OldMode: c.OldMode, Size: c.Size, OldSize: c.OldSize,
		Binary: c.Binary, ContentType: c.ContentType, TooLarge: c.TooLarge, ContentSum: c.ContentSum,
		Link: c.Link, OldLink: c.OldLink, Note: c.Note,
		HostChanged: c.HostChanged, Merged: c.Merged, Conflict: c.Conflict, ConflictReason: c.ConflictReason,
		From: c.From, Similarity: c.Similarity,
		Ignored: c.Ignored, IgnoredBy: c.IgnoredBy, Generated: c.Generated,
	}
}

func wireCommits(cs []review.Commit) []api.Commit {
	return wireAll(cs, func(c review.Commit) api.Commit { return api.Commit(c) })
}

func wireOutcomes(os []review.Outcome) []api.Outcome { return wireAll(os, wireOutcome) }

func wireOutcome(o review.Outcome) api.Outcome {
	return api.Outcome{Path: o.Path, Kind: string(o.Kind), Applied: o.Applied, Partial: o.Partial,
		Error: o.Error, Left: o.Left, Reason: o.Reason, Digest: o.Digest}
}

// reviewSelection is a selection from the wire in the review's terms.
func reviewSelection(s api.Selection) review.Selection {
	return review.Selection{
		Paths: s.Paths, RawPaths: s.RawPaths, Hunks: s.Hunks, Lines: s.Lines,
		Take: review.Resolution(s.Take), Auto: s.Auto, Commits: s.Commits, Branch: s.Branch,
		Patch: s.Patch, Digests: s.Digests, IncludeFlagged: s.IncludeFlagged, IncludeIgnored: s.IncludeIgnored,
	}
}

// wireIgnored is a review's ignored tally on the wire (nil when nothing
// was ignored).
func wireIgnored(t review.IgnoredTally) *api.Ignored {
	if t.Empty() {
		return nil
	}
	return &api.Ignored{
		Paths: t.Paths, Bytes: t.Bytes, FindingCount: t.FindingCount, Unscanned: t.Unscanned,
		Dirs: wireAll(t.Dirs, func(p review.IgnoredPlace) api.IgnoredDir {
			return api.IgnoredDir{Path: p.Path, Paths: p.Paths, Bytes: p.Bytes}
		}),
		Rules: wireAll(t.Rules, func(r review.IgnoredRule) api.IgnoredRule { return api.IgnoredRule(r) }),
		Findings: wireAll(t.Findings, func(f review.IgnoredFinding) api.IgnoredFinding {
			return api.IgnoredFinding{Path: f.Path, Scanner: f.Scanner, Message: f.Message}
		}),
	}
}
