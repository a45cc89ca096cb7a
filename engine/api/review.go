package api

import (
	"io/fs"
	"time"
)

// The review's wire types. Their JSON is what package review's types
// marshal to (the engine converts them, see engine/wire.go); a field added
// there is added here in the same commit.

// Kinds of change (Change.Kind, Stat.Kind, Outcome.Kind).
const (
	KindAdded    = "added"
	KindModified = "modified" // content changed (the mode may have too)
	KindMode     = "mode"     // only the permission bits changed
	KindDeleted  = "deleted"
	KindReplaced = "replaced" // the type changed (file <-> dir <-> symlink)
	KindRenamed  = "renamed"  // moved from From, with at most small edits
)

// Object types (Change.Type, Change.OldType); "" is none.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeSpecial = "special" // devices, FIFOs, sockets: listed, never accepted
)

// Resolutions of a conflict (Selection.Take).
const (
	TakeAgent   = "agent"
	TakeHost    = "host"
	TakeMarkers = "markers" // write git-style conflict markers
)

// Diff is a session's changes with their hunks.
type Diff struct {
	Session string     `json:"session"`
	Files   []FileDiff `json:"files"`
	// Commits are git commits made in the session that the project does
	// not have (accept --commits brings them in as a branch).
	Commits   []Commit  `json:"commits,omitempty"`
	Stats     []Stat    `json:"stats"`
	Workspace Workspace `json:"workspace"`
	// Ignored summarises the changes the project's ignore rules cover;
	// SessionIgnored those only rules the session wrote cover (flagged:
	// they are not left out of an accept of everything silently).
	Ignored        *Ignored `json:"ignored,omitempty"`
	SessionIgnored *Ignored `json:"session_ignored,omitempty"`
}

// Change is one path the session changed relative to the current project.
type Change struct {
	// ID names the file for selection; it depends on the path only.
	ID   string `json:"id"`
	Path string `json:"path"` // slash-separated, relative to the project root
	// RawPath is the path's bytes when they are not valid UTF-8 (JSON
	// would mangle Path); select such a file by ID or raw path.
	RawPath []byte      `json:"raw_path,omitempty"`
	Kind    string      `json:"kind"`               // Kind*
	Type    string      `json:"type"`               // what the session has ("" when deleted)
	OldType string      `json:"old_type,omitempty"` // what the project has ("" when added)
	Mode    fs.FileMode `json:"mode,omitempty"`
	OldMode fs.FileMode `json:"old_mode,omitempty"`
	Size    int64       `json:"size"`
	OldSize int64       `json:"old_size"`
	// Binary is set when either side is not text, or too large for a text
	// diff (TooLarge says why); no text diff is made.
	Binary      bool   `json:"binary,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	TooLarge    string `json:"too_large,omitempty"`
	// ContentSum digests the session's file when it gets no text diff.
	ContentSum string `json:"content_sum,omitempty"`
	Link       string `json:"link,omitempty"`     // symlink target in the session
	OldLink    string `json:"old_link,omitempty"` // symlink target in the project
	// Note explains why a change cannot be accepted, when it cannot.
	Note string `json:"note,omitempty"`
	// HostChanged: the project's version changed since the session
	// started; Merged: the session's change merged with it cleanly;
	// Conflict: they overlap (ConflictReason says how), accept needs a
	// choice.
	HostChanged    bool   `json:"host_changed,omitempty"`
	Merged         bool   `json:"merged,omitempty"`
	Conflict       bool   `json:"conflict,omitempty"`
	ConflictReason string `json:"conflict_reason,omitempty"`
	// From is the project path this one was renamed from (KindRenamed).
	From       string `json:"from,omitempty"`
	Similarity int    `json:"similarity,omitempty"` // percent, for renames
	// Ignored is set on a change ignore rules cover, listed only when the
	// diff asks for ignored changes (DiffQuery) or names the path:
	// IgnoredProject when the project's own rules ignore it,
	// IgnoredSession when only a rule the session wrote does. IgnoredBy
	// names the rule ("sub/.gitignore:3: node_modules/").
	Ignored   string `json:"ignored,omitempty"`
	IgnoredBy string `json:"ignored_by,omitempty"`
	// Generated says why the file is shown collapsed (a lockfile, or the
	// project's .gitattributes marks it linguist-generated or -diff): its
	// hunks are there, a display folds them unless the file is flagged.
	Generated string `json:"generated,omitempty"`
}

// The ignore marks of a change.
const (
	IgnoredProject = "project" // the project's own rules ignore it
	IgnoredSession = "session" // only a rule the session wrote does
)

// Ignored summarises the changes a review left out because ignore rules
// cover them: counted by place, never diffed, never taken by an accept of
// everything. The session keeps them.
type Ignored struct {
	Paths int64 `json:"paths"`
	Bytes int64 `json:"bytes"`
	// Dirs are where they are, most paths first (the first IgnoredDirs).
	Dirs []IgnoredDir `json:"dirs,omitempty"`
	// Rules are the rules that ignored them, most paths first.
	Rules []IgnoredRule `json:"rules,omitempty"`
	// Findings are what the scanners found in them all the same
	// (secrets, links leaving the project), the first IgnoredFindings.
	Findings     []IgnoredFinding `json:"findings,omitempty"`
	FindingCount int64            `json:"finding_count,omitempty"`
	// Unscanned counts the ignored files no scanner read (a summary, or
	// the scanners' budget spent).
	Unscanned int64 `json:"unscanned,omitempty"`
}

// How many places, rules and findings an Ignored lists at most.
const (
	IgnoredDirs     = 20
	IgnoredFindings = 50
)

// IgnoredDir is a place ignored paths are under: a directory a rule
// ignores whole ("node_modules/"), or the directory of files ignored one
// by one.
type IgnoredDir struct {
	Path  string `json:"path"`
	Paths int64  `json:"paths"`
	Bytes int64  `json:"bytes"`
}

// IgnoredRule is one ignore rule and how many paths it ignored.
type IgnoredRule struct {
	Source  string `json:"source"` // ".gitignore", "web/.gitignore", ".git/info/exclude", "core.excludesFile"
	Line    int    `json:"line"`
	Pattern string `json:"pattern"`
	Paths   int64  `json:"paths"`
}

// IgnoredFinding is a scanner's finding in an ignored path.
type IgnoredFinding struct {
	Path    string `json:"path"`
	Scanner string `json:"scanner"`
	Message string `json:"message"`
}

// DiffQuery is what a diff reads: Paths narrows it (a named ignored path
// is listed), Ignored chooses what happens to ignored changes.
type DiffQuery struct {
	Paths   []string
	Ignored string // IgnoredMode*
}

// What a diff does with ignored changes.
const (
	IgnoredModeSummarise = ""     // counted in Diff.Ignored, not listed
	IgnoredModeOnly      = "only" // only they are listed
	IgnoredModeAll       = "all"  // listed with the rest, marked
)

// FileDiff is a change with its text hunks (none for binary files,
// directories and special files).
type FileDiff struct {
	Change
	Hunks []Hunk `json:"hunks,omitempty"`
	// Conflicts are the regions both sides changed (Conflict is set).
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Held says why the policy holds this change for a human; AutoAccept
	// is set when the policy would accept it without one.
	Held       string    `json:"held,omitempty"`
	AutoAccept bool      `json:"auto_accept,omitempty"`
	Findings   []Finding `json:"findings,omitempty"`
	// Digest names the session's side of the file exactly as the review
	// read it: Selection.Digests pins an accept to it.
	Digest string `json:"digest,omitempty"`
}

// Hunk is one contiguous region of a text diff.
type Hunk struct {
	ID       string `json:"id"` // for per-hunk accept and discard
	OldStart int    `json:"old_start"`
	OldLines int    `json:"old_lines"`
	NewStart int    `json:"new_start"`
	NewLines int    `json:"new_lines"`
	// Lines are prefixed with ' ', '-' or '+' and keep their newline; a
	// line without one is the file's last and has no newline at its end.
	Lines []string `json:"lines"`
	// Digest pins the hunk for an accept (Selection.Digests).
	Digest string `json:"digest,omitempty"`
}

// Conflict is a region both the host and the session changed since the
// session started, differently. A whole-file conflict has no lines.
type Conflict struct {
	ID string `json:"id"`
	// HostStart is the region's first line in the current project file
	// (1-based); HostLines its length there.
	HostStart int      `json:"host_start"`
	HostLines int      `json:"host_lines"`
	Base      []string `json:"base"`
	Host      []string `json:"host"`
	Agent     []string `json:"agent"`
}

// Finding is something a scanner flagged in a change.
type Finding struct {
	Scanner string `json:"scanner"` // secrets, large_binary, exec_bit, setuid, symlink_escape
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Rule    string `json:"rule,omitempty"`
}

// Stat is the per-file line counts of a diff.
type Stat struct {
	Path     string `json:"path"`
	Kind     string `json:"kind"`
	Added    int    `json:"added"`
	Removed  int    `json:"removed"`
	Binary   bool   `json:"binary,omitempty"`
	TooLarge bool   `json:"too_large,omitempty"` // text, but no text diff (see Change.TooLarge)
	From     string `json:"from,omitempty"`
	Conflict bool   `json:"conflict,omitempty"`
	Merged   bool   `json:"merged,omitempty"`
	Held     bool   `json:"held,omitempty"`
	// Findings names the scanners that flagged the file.
	Findings []string `json:"findings,omitempty"`
	// Generated and Ignored repeat the change's marks (Change.Generated,
	// Change.Ignored).
	Generated bool   `json:"generated,omitempty"`
	Ignored   string `json:"ignored,omitempty"`
}

// Commit is a git commit made inside the session.
type Commit struct {
	Hash    string    `json:"hash"`
	Author  string    `json:"author"`
	Email   string    `json:"email"`
	When    time.Time `json:"when"`
	Subject string    `json:"subject"`
}

// Selection picks changes for accept and discard: whole files at or under
// Paths, hunks and conflicts by id, lines within hunks, and how to settle
// conflicts. An empty selection takes everything. review.Selection
// documents each field's rules.
type Selection struct {
	Paths    []string         `json:"paths,omitempty"`
	RawPaths [][]byte         `json:"raw_paths,omitempty"` // paths that are not UTF-8
	Hunks    []string         `json:"hunks,omitempty"`
	Lines    map[string][]int `json:"lines,omitempty"` // hunk id -> 1-based indexes into its lines
	Take     string           `json:"take,omitempty"`  // Take*
	// Auto takes only the changes the policy auto-accepts.
	Auto bool `json:"auto,omitempty"`
	// Commits (accept only) imports the session's git commits as Branch
	// (default airlock/<session>).
	Commits bool   `json:"commits,omitempty"`
	Branch  string `json:"branch,omitempty"`
	// Patch (accept only) is an edited `airlock diff --patch` to apply
	// instead of the session's changes.
	Patch string `json:"patch,omitempty"`
	// Digests pins an accept to what the user reviewed: file ids or paths
	// and hunk ids to their Digest.
	Digests map[string]string `json:"digests,omitempty"`
	// IncludeFlagged lets an accept of everything (or of a directory)
	// take changes the policy holds or a scanner flagged.
	IncludeFlagged bool `json:"include_flagged,omitempty"`
	// IncludeIgnored lets a selection of everything (or of a directory)
	// take the changes ignore rules cover; without it only ignored paths
	// named themselves (or under a named ignored directory) are taken.
	IncludeIgnored bool `json:"include_ignored,omitempty"`
}

// Outcomes is the per-path result of an accept or discard.
type Outcomes struct {
	Outcomes []Outcome `json:"outcomes"`
	// Branch and Commits report commits imported by accept --commits.
	Branch  string   `json:"branch,omitempty"`
	Commits []Commit `json:"commits,omitempty"`
	// Ignored and SessionIgnored say what the selection left in the
	// session because ignore rules cover it (see Diff.Ignored).
	Ignored        *Ignored `json:"ignored,omitempty"`
	SessionIgnored *Ignored `json:"session_ignored,omitempty"`
}

// Outcome is what happened to one selected change.
type Outcome struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"`
	Applied bool   `json:"applied"`
	// Partial is set when only some hunks or lines were taken.
	Partial bool `json:"partial,omitempty"`
	// Error says why the change was not applied; the project's file is
	// untouched.
	Error string `json:"error,omitempty"`
	// Left is set when an accept left the change in the session on
	// purpose: "held", "flagged" or "unreviewed"; Reason says why and how
	// to take it.
	Left   string `json:"left,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Digest is the digest of the session's version that was taken.
	Digest string `json:"digest,omitempty"`
}

// Stats counts added and removed lines per file: the summary Diff.Stats
// holds, which an engine leaves to its client when it streams the files.
func Stats(files []FileDiff) []Stat {
	out := make([]Stat, 0, len(files))
	for _, d := range files {
		s := Stat{Path: d.Path, Kind: d.Kind, Binary: d.Binary, TooLarge: d.TooLarge != "", From: d.From,
			Conflict: d.Conflict, Merged: d.Merged, Held: d.Held != "", Generated: d.Generated != "", Ignored: d.Ignored}
		for _, f := range d.Findings {
			s.Findings = append(s.Findings, f.Scanner)
		}
		for _, h := range d.Hunks {
			for _, l := range h.Lines {
				switch l[0] {
				case '+':
					s.Added++
				case '-':
					s.Removed++
				}
			}
		}
		out = append(out, s)
	}
	return out
}
