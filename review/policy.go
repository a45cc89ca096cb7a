package review

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/airlock/airlock/names"
	"github.com/airlock/airlock/secretscan"
	"github.com/bmatcuk/doublestar/v4"
	"gopkg.in/yaml.v3"
)

// Policy decides which changes may be accepted without a human: paths to
// auto-accept, paths always held for review, and scanners whose findings
// block auto-accept. It is read from the host side only (the project's
// .airlock/policy.yaml as it is on the host, or a file the user names),
// never from the session, so an agent cannot loosen it.
type Policy struct {
	AutoAccept []string `yaml:"auto_accept" json:"auto_accept"`
	// Hold adds to DefaultHold unless NoDefaultHold is set.
	Hold          []string `yaml:"hold" json:"hold"`
	NoDefaultHold bool     `yaml:"no_default_hold" json:"no_default_hold,omitempty"`
	Scanners      Scanners `yaml:"scanners" json:"scanners"`
	// Egress is the project's network policy, engine/egress's to read
	// (egress.ReadProject): the review only lets the section be.
	Egress yaml.Node `yaml:"egress" json:"-"`
}

// Scanners configures the pre-accept scanners. All are on by default.
type Scanners struct {
	Secrets *bool `yaml:"secrets" json:"secrets,omitempty"`
	// LargeBinary is the size from which a binary file is a finding
	// (default 1 MiB; 0 keeps the default, -1 turns the scanner off).
	LargeBinary   int64 `yaml:"large_binary" json:"large_binary,omitempty"`
	ExecBit       *bool `yaml:"exec_bit" json:"exec_bit,omitempty"`
	Setuid        *bool `yaml:"setuid" json:"setuid,omitempty"`
	SymlinkEscape *bool `yaml:"symlink_escape" json:"symlink_escape,omitempty"`
	// Names flags names that display as something else, or look like
	// another name in their directory (policy_names.go).
	Names *bool `yaml:"names" json:"names,omitempty"`
}

// DefaultHold are paths that always need a human: lockfiles, CI
// configuration, environment files, git's own files, Airlock's policy.
var DefaultHold = []string{
	"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "npm-shrinkwrap.json", "go.sum", "Cargo.lock",
	"poetry.lock", "Pipfile.lock", "composer.lock", "Gemfile.lock", "uv.lock",
	".github/**", ".gitlab-ci.yml", ".gitlab/**", ".circleci/**", "Jenkinsfile", ".travis.yml",
	"azure-pipelines.yml", ".buildkite/**", ".drone.yml",
	".env", ".env.*", ".envrc",
	".gitignore", ".gitattributes", ".gitmodules", ".git*",
	".airlock/**",
}

// PolicyFile is where a project keeps its policy, read on the host side.
const PolicyFile = ".airlock/policy.yaml"

// LoadPolicy reads a policy file; a missing file gives the defaults when
// optional.
func LoadPolicy(file string, optional bool) (Policy, error) {
	var p Policy
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) && optional {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("policy %s: %w", file, err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && err.Error() != "EOF" {
		return p, &PathError{Path: file, Reason: fmt.Sprintf("invalid policy: %v (fields: auto_accept, hold, no_default_hold, scanners, egress)", err)}
	}
	for _, g := range append(append([]string{}, p.AutoAccept...), p.Hold...) {
		if !doublestar.ValidatePattern(g) {
			return p, &PathError{Path: file, Reason: fmt.Sprintf("invalid glob %q", g)}
		}
	}
	return p, nil
}

// globSet is a list of globs compiled for matching many paths: plain names
// and paths are map lookups, patterns are tried only when their literal
// prefix matches. A review of 200,000 files matches each against the ~30
// default holds.
type globSet struct {
	names, paths map[string]int // plain globs, by what they match: their index
	base, full   []globPattern  // patterns on the base name, on the whole path
}

type globPattern struct {
	pat, prefix string // prefix: the literal text before the first pattern character
	index       int
}

func compileGlobs(globs []string) *globSet {
	s := &globSet{names: map[string]int{}, paths: map[string]int{}}
	for i, g := range globs {
		onPath := strings.Contains(g, "/")
		g = strings.TrimPrefix(g, "/")
		literal := !strings.ContainsAny(g, "*?[{\\")
		switch {
		case literal && onPath:
			if _, dup := s.paths[g]; !dup {
				s.paths[g] = i
			}
		case literal:
			if _, dup := s.names[g]; !dup {
				s.names[g] = i
			}
		default:
			gp := globPattern{pat: g, prefix: g[:strings.IndexAny(g, "*?[{\\")], index: i}
			if onPath {
				s.full = append(s.full, gp)
			} else {
				s.base = append(s.base, gp)
			}
		}
	}
	return s
}

// match returns the index of the first glob (in the order given) that
// matches p, or -1.
func (s *globSet) match(p string) int {
	best := -1
	better := func(i int) bool { return best < 0 || i < best }
	base := path.Base(p)
	if i, ok := s.names[base]; ok {
		best = i
	}
	if i, ok := s.paths[p]; ok && better(i) {
		best = i
	}
	for _, g := range s.base {
		if better(g.index) && strings.HasPrefix(base, g.prefix) {
			if ok, _ := doublestar.Match(g.pat, base); ok {
				best = g.index
			}
		}
	}
	for _, g := range s.full {
		if better(g.index) && strings.HasPrefix(p, g.prefix) {
			if ok, _ := doublestar.Match(g.pat, p); ok {
				best = g.index
			}
		}
	}
	return best
}

func (p Policy) holds() []string {
	if p.NoDefaultHold {
		return p.Hold
	}
	return append(append([]string{}, DefaultHold...), p.Hold...)
}

// Finding is something a scanner flagged in a change.
type Finding struct {
	Scanner string `json:"scanner"` // secrets, large_binary, exec_bit, setuid, symlink_escape, names
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Rule    string `json:"rule,omitempty"`
}

func on(b *bool) bool { return b == nil || *b }

// ScansSecrets reports whether the policy's secrets scanner is on.
func (p Policy) ScansSecrets() bool { return on(p.Scanners.Secrets) }

// Check applies the policy to each diff: it sets Held (with the glob that
// holds it), AutoAccept, and Findings, looking for secrets in what the session added with find (nil: none, every such file flagged). A
// scan that fails flags every file it was to look at ("not scanned for
// secrets") rather than failing the review: what was not scanned is not
// known to be clean, and is not accepted by a policy or `airlock ci`
// either. Check fails only when ctx ends.
func (p Policy) Check(ctx context.Context, l Layers, diffs []FileDiff, find secretscan.Finder) error {
	var scan secretScan
	holds, autos := p.holds(), compileGlobs(p.AutoAccept)
	held := compileGlobs(holds)
	for i := range diffs {
		d := &diffs[i]
		h := held.match(d.Path)
		if d.From != "" {
			if f := held.match(d.From); f >= 0 && (h < 0 || f < h) {
				h = f
			}
		}
		if h >= 0 {
			d.Held = "held by policy (" + holds[h] + ")"
		}
		d.AutoAccept = autos.match(d.Path) >= 0
		if on(p.Scanners.Secrets) && d.Type == File && !d.Binary && len(d.Hunks) > 0 {
			scan.add(i, d)
		}
		p.scan(d)
	}
	return scan.run(ctx, diffs, find)
}

// secretScan gathers what the session added to each file of a batch,
// one text per file, so that the secret detector is asked once per
// batch (one round trip to the scanner child) and scans each file on its
// own, as gitleaks scans a file.
type secretScan struct {
	texts []string
	files []int   // the diff each text is of
	lines [][]int // per text, the file's line of each of its lines
}

func (s *secretScan) add(file int, d *FileDiff) {
	var text strings.Builder
	var lines []int
	for _, h := range d.Hunks {
		newLine := h.NewStart
		for _, ln := range h.Lines {
			switch ln[0] {
			case '+':
				text.WriteString(ln[1:])
				if !strings.HasSuffix(ln, "\n") {
					text.WriteByte('\n')
				}
				lines = append(lines, newLine)
				newLine++
			case ' ':
				newLine++
			}
		}
	}
	if len(lines) == 0 {
		return // nothing added: nothing to scan, nor to flag when a scan fails
	}
	s.texts, s.files, s.lines = append(s.texts, text.String()), append(s.files, file), append(s.lines, lines)
}

func (s *secretScan) run(ctx context.Context, diffs []FileDiff, find secretscan.Finder) error {
	if len(s.texts) == 0 {
		return nil
	}
	var found [][]secretscan.Match
	var err error
	if find == nil {
		err = errors.New("this engine has no secret scanner")
	} else {
		found, err = find.Find(ctx, s.texts)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil && len(found) != len(s.texts) {
		err = fmt.Errorf("the secret scanner answered for %d files, asked about %d", len(found), len(s.texts))
	}
	if err != nil {
		for _, i := range s.files {
			diffs[i].Findings = append(diffs[i].Findings, Finding{Scanner: "secrets", Message: "not scanned for secrets: " + err.Error()})
		}
		return nil
	}
	for t, matches := range found {
		d, lines := &diffs[s.files[t]], s.lines[t]
		for _, m := range matches {
			if m.Line < 1 || m.Line > len(lines) {
				continue
			}
			d.Findings = append(d.Findings, Finding{Scanner: "secrets", Rule: m.Rule, Line: lines[m.Line-1],
				Message: fmt.Sprintf("looks like a secret (%s): %s", m.Rule, m.Description)})
		}
	}
	return nil
}

func (p Policy) scan(d *FileDiff) {
	s := p.Scanners
	limit := s.LargeBinary
	if limit == 0 {
		limit = 1 << 20
	}
	if limit > 0 && d.Binary && d.Type == File && d.Size >= limit {
		d.Findings = append(d.Findings, Finding{Scanner: "large_binary", Message: fmt.Sprintf("binary file of %d bytes (%s)", d.Size, d.ContentType)})
	}
	if on(s.ExecBit) && d.Type == File && d.Mode&0o111 != 0 && (d.OldType != File || d.OldMode&0o111 == 0) {
		d.Findings = append(d.Findings, Finding{Scanner: "exec_bit", Message: fmt.Sprintf("becomes executable (%v)", d.Mode.Perm())})
	}
	if on(s.Setuid) && d.Mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		d.Findings = append(d.Findings, Finding{Scanner: "setuid", Message: "setuid/setgid bit set in the session (accept strips it)"})
	}
	if on(s.SymlinkEscape) && d.Type == Symlink && escapes(d.Path, d.Link) {
		d.Findings = append(d.Findings, Finding{Scanner: "symlink_escape", Message: "symlink points outside the project: " + names.Quote(d.Link)})
	}
	if on(s.Names) {
		d.Findings = append(d.Findings, nameFindings(d)...)
	}
}

// escapes reports whether a symlink at p with target leaves the project.
func escapes(p, target string) bool {
	if filepath.IsAbs(target) {
		return !strings.HasPrefix(path.Clean(target)+"/", "/workspace/")
	}
	joined := path.Join(path.Dir(p), target)
	return joined == ".." || strings.HasPrefix(joined, "../")
}
