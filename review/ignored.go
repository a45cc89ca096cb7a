package review

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/airlock/airlock/confined"
	"github.com/airlock/airlock/gitrules"
	"golang.org/x/sys/unix"
)

// IgnoredMode is what a review does with the changes ignore rules cover
// (Layers.Ignoring).
type IgnoredMode int

const (
	// IgnoredSummarise counts them by place (IgnoredSummary) and lists
	// only those Options.Paths names: their contents are never read for
	// the review (a scanner may read them: see ScanIgnored).
	IgnoredSummarise IgnoredMode = iota
	// IgnoredOnly lists only them, marked (Change.Ignored).
	IgnoredOnly
	// IgnoredAll lists them with the rest, marked.
	IgnoredAll
)

// IgnoredSummary is what a review's ignore rules covered: by the project's
// own rules, and by rules only the session wrote.
type IgnoredSummary struct {
	Project, Session IgnoredTally
}

// IgnoredTally counts ignored changes.
type IgnoredTally struct {
	Paths int64
	Bytes int64
	// Dirs are the places they are under, most paths first (at most
	// maxPlacesShown): a directory ignored whole ("node_modules/"), or
	// the directory of files ignored one by one.
	Dirs []IgnoredPlace
	// Rules are the rules that decided, most paths first.
	Rules []IgnoredRule
	// Findings are the scanners' findings in ignored paths (symlinks
	// leaving the project from the walk; secrets from ScanIgnored), the
	// first maxIgnoredFindings of FindingCount.
	Findings     []IgnoredFinding
	FindingCount int64
	// Unscanned counts the ignored files no scanner read.
	Unscanned int64
}

// IgnoredPlace is one place ignored changes are under.
type IgnoredPlace struct {
	Path         string
	Paths, Bytes int64
}

// IgnoredRule is one rule and how many changes it ignored.
type IgnoredRule struct {
	Source  string
	Line    int
	Pattern string
	Paths   int64
}

// IgnoredFinding is a scanner's finding in an ignored path.
type IgnoredFinding struct {
	Path string
	Finding
}

// Empty reports whether nothing was ignored.
func (t *IgnoredTally) Empty() bool { return t.Paths == 0 && t.FindingCount == 0 }

const (
	maxPlacesShown     = 20
	maxPlacesCounted   = 4096
	maxRulesShown      = 20
	maxIgnoredFindings = 50
)

// The ignore marks of a change (Change.Ignored).
const (
	IgnoredByProject = "project"
	IgnoredBySession = "session"
)

// ignoreMark is how ignore rules cover a walk's entry or directory: by
// whose rules (none, the project's, the session's only), from which
// directory on (region: the path the rule matched), by which rule.
type ignoreMark struct {
	who    string // "", IgnoredByProject, IgnoredBySession
	region string
	rule   gitrules.Rule
}

// ignoreWalk is a walk's part in ignore rules: what it was asked and what
// it counted.
type ignoreWalk struct {
	ig    *Ignoring
	mode  IgnoredMode
	named []string // Options.Paths, cleaned

	mu      sync.Mutex
	tallies [2]tally // project, session
	// scan: ignored files to read for secrets (Options.ScanIgnored),
	// within the scan's budget; the rest are counted unscanned.
	scan      bool
	toScan    []ignoredFile
	scanBytes int64
}

// ignoredFile is an ignored file a scanner reads.
type ignoredFile struct {
	path, who string
	size      int64
}

type tally struct {
	unscanned    int64
	paths, bytes int64
	places       map[string]*IgnoredPlace
	rules        map[gitrules.Rule]int64
	findings     []IgnoredFinding
	findingCount int64
}

// marks says how ignore rules cover the entry name of directory job j
// (path p): the entry's own mark, and the mark the directory's job
// inherits when it is one. A tracked path is never ignored (git's rule),
// but the untracked paths under an ignored directory are.
func (iw *ignoreWalk) marks(j *dirJob, name, p string, isDir bool) (entry, sub ignoreMark) {
	if iw == nil || iw.ig == nil {
		return
	}
	tracked := iw.ig.Tracked != nil && iw.ig.Tracked(p, isDir)
	if j.ign.who != "" {
		sub = j.ign
		if !tracked {
			entry = j.ign
		}
		return entry, sub
	}
	if j.pd != nil {
		if ok, rule := j.pd.Ignored(name, isDir); ok {
			sub = ignoreMark{who: IgnoredByProject, region: p, rule: rule}
		}
	}
	if sub.who == "" && j.sd != nil && !ruleFile(name) {
		if ok, rule := j.sd.Ignored(name, isDir); ok {
			sub = ignoreMark{who: IgnoredBySession, region: p, rule: rule}
		}
	}
	if !tracked {
		entry = sub
	}
	if !isDir {
		sub = ignoreMark{}
	}
	return entry, sub
}

// listed reports whether an ignored change at p (marked m) is listed
// rather than only counted: the review asks for ignored changes, or a
// named path takes it (the path itself, or a path inside the ignored
// directory it is under: naming web/ takes none of web/node_modules/,
// naming web/node_modules/ takes it all).
func (iw *ignoreWalk) listed(p string, m ignoreMark) bool {
	if iw.mode != IgnoredSummarise {
		return true
	}
	for _, n := range iw.named {
		if n == "." {
			continue
		}
		if under(p, n) && under(n, m.region) {
			return true
		}
	}
	return false
}

// reaches reports whether a named path lies inside the ignored directory
// p (so the walk must list what is under it).
func (iw *ignoreWalk) reaches(p string) bool {
	for _, n := range iw.named {
		if n != "." && under(n, p) {
			return true
		}
	}
	return false
}

// under reports whether p is at or under dir.
func under(p, dir string) bool {
	return p == dir || len(p) > len(dir) && strings.HasPrefix(p, dir) && p[len(dir)] == '/'
}

// tallyOf is the tally of whose rules ignored a change (iw.mu held).
func (iw *ignoreWalk) tallyOf(who string) *tally {
	if who == IgnoredBySession {
		return &iw.tallies[1]
	}
	return &iw.tallies[0]
}

// count adds an ignored change to its tally.
func (iw *ignoreWalk) count(p string, size int64, isDir bool, m ignoreMark) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	t := iw.tallyOf(m.who)
	if t.places == nil {
		t.places, t.rules = map[string]*IgnoredPlace{}, map[gitrules.Rule]int64{}
	}
	t.paths++
	t.bytes += size
	t.rules[m.rule]++
	where := m.region
	if where == p && !isDir {
		where = path.Dir(p) // a file ignored by itself: counted by its directory
	}
	if where == "." {
		where = p
	} else if where != p || isDir {
		where += "/"
	}
	pl := t.places[where]
	if pl == nil {
		if len(t.places) >= maxPlacesCounted {
			where, _, _ = strings.Cut(where, "/") // too many: by top directory
			where += "/"
			if pl = t.places[where]; pl == nil {
				pl = &IgnoredPlace{Path: where}
				t.places[where] = pl
			}
		} else {
			pl = &IgnoredPlace{Path: where}
			t.places[where] = pl
		}
	}
	pl.Paths++
	pl.Bytes += size
}

// finding records a scanner's finding in an ignored path.
func (iw *ignoreWalk) finding(who string, f IgnoredFinding) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	t := iw.tallyOf(who)
	t.findingCount++
	if len(t.findings) < maxIgnoredFindings {
		t.findings = append(t.findings, f)
	}
}

// summary is what the walk counted.
func (iw *ignoreWalk) summary() IgnoredSummary {
	if iw == nil {
		return IgnoredSummary{}
	}
	iw.mu.Lock()
	defer iw.mu.Unlock()
	return IgnoredSummary{Project: iw.tallies[0].result(), Session: iw.tallies[1].result()}
}

func (t *tally) result() IgnoredTally {
	out := IgnoredTally{Paths: t.paths, Bytes: t.bytes, Findings: t.findings, FindingCount: t.findingCount, Unscanned: t.unscanned}
	for _, pl := range t.places {
		out.Dirs = append(out.Dirs, *pl)
	}
	slices.SortFunc(out.Dirs, func(a, b IgnoredPlace) int {
		return cmp.Or(cmp.Compare(b.Paths, a.Paths), strings.Compare(a.Path, b.Path))
	})
	out.Dirs = out.Dirs[:min(len(out.Dirs), maxPlacesShown)]
	for r, n := range t.rules {
		out.Rules = append(out.Rules, IgnoredRule{Source: r.Source, Line: r.Line, Pattern: r.Pattern, Paths: n})
	}
	slices.SortFunc(out.Rules, func(a, b IgnoredRule) int {
		return cmp.Or(cmp.Compare(b.Paths, a.Paths), strings.Compare(a.Source, b.Source), cmp.Compare(a.Line, b.Line))
	})
	out.Rules = out.Rules[:min(len(out.Rules), maxRulesShown)]
	return out
}

// countIgnored counts, without listing or reading it, an upper entry that
// ignore rules cover: the walk goes on into a directory (the returned
// job), a file counts its size, a symlink leaving the project is a
// finding all the same. A file both sides have counts when its size,
// mode or modification time differ (content is not read for what is not
// reviewed).
func (w *walker) countIgnored(d *confined.Root, name, p string, ust *unix.Stat_t, hasHost bool, hst *unix.Stat_t, entry, sub ignoreMark, opaque bool) *dirJob {
	utype, umode := typeOf(modeOf(ust.Mode)), modeOf(ust.Mode)
	var htype Type
	if hasHost {
		htype = typeOf(modeOf(hst.Mode))
	}
	if utype == Dir {
		job := &dirJob{rel: p, inherited: opaque, hostDir: htype == Dir, ign: sub, self: entry}
		switch {
		case !hasHost:
			job.added = &Change{Path: p, Kind: Added, Type: Dir, Mode: umode} // counted if empty
		case htype != Dir || modeOf(hst.Mode) != umode:
			w.ignore.count(p, 0, true, entry) // replaced, or its mode changed
		}
		return job
	}
	if htype == utype && utype != Symlink && ust.Size == hst.Size && ust.Mtim == hst.Mtim && umode == modeOf(hst.Mode) {
		return nil // copied up, not changed
	}
	size := int64(0)
	if utype == File {
		size = ust.Size
	}
	w.ignore.count(p, size, false, entry)
	if utype == File {
		w.ignore.toRead(p, size, entry.who)
	}
	if utype == Symlink {
		if t, err := d.Readlink(name); err == nil && escapes(p, t) {
			w.ignore.finding(entry.who, IgnoredFinding{Path: p, Finding: Finding{Scanner: "symlink_escape",
				Message: fmt.Sprintf("symlink points outside the project: %s", t)}})
		}
	}
	return nil
}

// counted reports whether the change at p marked m is only counted (the
// review summarises it), and counts it then.
func (iw *ignoreWalk) counted(p string, size int64, isDir bool, m ignoreMark) bool {
	if iw == nil || m.who == "" || iw.listed(p, m) {
		return false
	}
	iw.count(p, size, isDir, m)
	return true
}

// keeps reports whether a listed change marked m goes into the review's
// list (an IgnoredOnly review keeps only ignored ones), marking it.
func (iw *ignoreWalk) keeps(c *Change, m ignoreMark) bool {
	if iw == nil {
		return true
	}
	c.Ignored, c.IgnoredBy = m.who, ruleName(m.rule)
	if m.who != "" {
		iw.countListed(c, m)
		return true
	}
	return iw.mode != IgnoredOnly
}

// countListed counts an ignored change that is listed too, so that the
// summary says the same whatever is listed.
func (iw *ignoreWalk) countListed(c *Change, m ignoreMark) {
	size := int64(0)
	if c.Type == File {
		size = c.Size
	}
	iw.count(c.Path, size, c.Type == Dir, m)
}

// toRead keeps an ignored file for the secrets scan, or counts it
// unscanned past the scan's budget (or when nothing scans).
func (iw *ignoreWalk) toRead(p string, size int64, who string) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if size == 0 {
		return
	}
	if !iw.scan || size > maxScanFile || len(iw.toScan) >= maxScanFiles || iw.scanBytes+size > maxScanBytes {
		t := iw.tallyOf(who)
		t.unscanned++
		return
	}
	iw.toScan = append(iw.toScan, ignoredFile{path: p, who: who, size: size})
	iw.scanBytes += size
}

// flagHidingRules gives each rule file of the session whose rules hide
// paths the project's rules do not an ignore_rule finding: an agent's
// rule hides nothing silently, and an accept of everything leaves the
// rule (and what it hides) until someone looks.
func flagHidingRules(files []FileDiff, session IgnoredTally) {
	if len(session.Rules) == 0 {
		return
	}
	for i := range files {
		f := &files[i]
		if !ruleFile(path.Base(f.Path)) {
			continue
		}
		var n int64
		var patterns []string
		for _, r := range session.Rules {
			if r.Source == f.Path {
				n += r.Paths
				patterns = append(patterns, fmt.Sprintf("line %d %q", r.Line, r.Pattern))
			}
		}
		if n > 0 {
			f.Findings = append(f.Findings, Finding{Scanner: "ignore_rule",
				Message: fmt.Sprintf("this session's rule hides %d path(s) the project's own rules do not ignore (%s): `airlock diff --ignored` lists them", n, strings.Join(patterns, ", "))})
		}
	}
}
