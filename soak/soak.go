package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/names"
)

// Options say what to soak and for how long.
type Options struct {
	// Seed fixes the schedule.
	Seed uint64
	// Duration: no new step starts after it.
	Duration time.Duration
	// CLI is the airlock binary the engine is served and driven with.
	CLI string
	// Dir is the soak's directory (state, projects, logs); it is kept.
	Dir string
	// Sessions is how many sessions live at most at once (default 4).
	Sessions int
	// Progress receives a line per step (nil: nothing).
	Progress io.Writer
}

// Figures are what a soak did and found.
type Figures struct {
	Seed       uint64
	Took       time.Duration
	Steps      int
	Ops        map[string]int
	Faults     map[string]int
	Checks     int
	Unverified int // workspace digests with no known checkpoint to compare with
	Violations []string
	// OpLog is the file the operation log was saved to.
	OpLog string
}

// ErrViolation is returned (wrapped) when an invariant failed.
var ErrViolation = errors.New("invariant violated")

type session struct {
	id      string
	project string
	image   string
	files   []string         // what the soak's own commands made in /workspace
	cps     map[int64]string // checkpoint -> the upper layer's digest when it was taken
	n       int
}

type soaker struct {
	o       Options
	rng     *rand.Rand
	eng     *engineProc
	fig     *Figures
	log     []string
	step    int
	live    []*session
	gone    []string        // the sessions removed
	model   map[string]tree // project dir -> what it should hold
	nproj   int
	images  []string
	started time.Time
}

// Run runs the soak. It returns its figures, and an error wrapping
// ErrViolation when an invariant failed (the op log is then saved), or
// another error when the soak itself could not run.
func Run(ctx context.Context, o Options) (*Figures, error) {
	if o.Sessions <= 0 {
		o.Sessions = 4
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	eng, err := newEngine(o.CLI, o.Dir)
	if err != nil {
		return nil, err
	}
	s := &soaker{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), eng: eng,
		fig: &Figures{Seed: o.Seed, Ops: map[string]int{}, Faults: map[string]int{}}, model: map[string]tree{}, started: time.Now()}
	runErr := s.run(ctx)
	// Whatever a failed run left (it is reported already) goes, so the
	// machine is as it was: the engine, its containers, its mounts.
	s.eng.stop()
	if n, _ := s.eng.removeContainers(context.Background()); n > 0 {
		s.logf("cleanup: %d containers removed", n)
	}
	if n, _ := unmountAll(s.eng.state); n > 0 {
		s.logf("cleanup: %d mounts unmounted", n)
	}
	s.fig.Took = time.Since(s.started)
	s.fig.Steps = max(0, s.step-1)
	s.fig.OpLog = filepath.Join(o.Dir, fmt.Sprintf("oplog-%d.txt", o.Seed))
	os.WriteFile(s.fig.OpLog, []byte(strings.Join(s.log, "\n")+"\n"), 0o644)
	if runErr == nil && len(s.fig.Violations) > 0 {
		runErr = fmt.Errorf("%w: %s", ErrViolation, s.fig.Violations[0])
	}
	return s.fig, runErr
}

func (s *soaker) run(ctx context.Context) error {
	before, err := s.eng.containers(ctx)
	if err != nil {
		return err
	}
	if len(before) > 0 {
		return fmt.Errorf("containers labelled for %s exist before the soak: %v", s.eng.state, before)
	}
	if err := s.eng.start(ctx); err != nil {
		return err
	}
	defer s.eng.stop()
	if err := s.setupImages(ctx); err != nil {
		return err
	}
	for s.step = 1; time.Since(s.started) < s.o.Duration && len(s.fig.Violations) == 0 && ctx.Err() == nil; s.step++ {
		if err := s.next(ctx); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.logf("end: rm every session")
	if len(s.fig.Violations) == 0 {
		s.checkAll(ctx, "end")
	}
	for len(s.live) > 0 {
		s.remove(ctx, s.live[0])
	}
	s.checkEmpty(ctx)
	return nil
}

// The schedule's table: each action with its weight.
var actions = []struct {
	name   string
	weight int
	fault  bool
}{
	{"create", 6, false}, {"exec", 20, false}, {"turns", 3, false}, {"diff", 4, false},
	{"undo", 4, false}, {"accept-all", 3, false}, {"accept-file", 4, false}, {"accept-hunk", 4, false},
	{"discard", 3, false}, {"snapshot-restore", 2, false}, {"fork-checkpoint", 2, false},
	{"hibernate", 4, false}, {"wake", 3, false}, {"rm", 2, false},
	{"kill-engine", 3, true}, {"reboot", 2, true}, {"kill-cli", 4, true}, {"concurrent-clients", 3, true},
}

// next draws the next step from the schedule and runs it.
func (s *soaker) next(ctx context.Context) error {
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	r := s.rng.IntN(total)
	name, fault := "", false
	for _, a := range actions {
		if r < a.weight {
			name, fault = a.name, a.fault
			break
		}
		r -= a.weight
	}
	// The target is drawn whatever the action, so the schedule's draws
	// do not depend on which actions apply.
	pick := s.rng.IntN(1 << 20)
	switch {
	case len(s.live) == 0:
		name, fault = "create", false
	case (name == "create" || name == "snapshot-restore" || name == "fork-checkpoint") && len(s.live) >= s.o.Sessions:
		name = "exec"
	case name == "rm" && len(s.live) < 2:
		name = "exec"
	}
	var target *session
	if len(s.live) > 0 {
		target = s.live[pick%len(s.live)]
	}
	if fault {
		s.fig.Faults[name]++
	} else {
		s.fig.Ops[name]++
	}
	fmt.Fprintf(s.o.Progress, "step %d: %s\n", s.step, name)
	s.logf("step %d: %s %s", s.step, name, idOf(target))
	switch name {
	case "create":
		return s.create(ctx)
	case "exec":
		s.exec(ctx, target)
	case "turns":
		s.turns(ctx, target)
	case "diff":
		s.diff(ctx, target)
	case "undo":
		s.undo(ctx, target)
	case "accept-all", "accept-file", "accept-hunk":
		s.accept(ctx, target, name)
	case "discard":
		s.discard(ctx, target)
	case "snapshot-restore":
		s.snapshotRestore(ctx, target)
	case "fork-checkpoint":
		s.forkCheckpoint(ctx, target)
	case "hibernate":
		s.hibernate(ctx, target)
	case "wake":
		s.wake(ctx, target)
	case "rm":
		s.remove(ctx, target)
	case "kill-engine":
		return s.killEngine(ctx)
	case "reboot":
		return s.reboot(ctx)
	case "kill-cli":
		s.killCLI(ctx, target)
	case "concurrent-clients":
		s.concurrent(ctx, target)
	}
	return nil
}

func idOf(t *session) string {
	if t == nil {
		return ""
	}
	return t.id
}

// logf adds a line to the operation log.
func (s *soaker) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%8.1fs ", time.Since(s.started).Seconds())+fmt.Sprintf(format, args...))
}

// violation records a failed invariant.
func (s *soaker) violation(format string, args ...any) {
	v := fmt.Sprintf("step %d: ", s.step) + fmt.Sprintf(format, args...)
	s.fig.Violations = append(s.fig.Violations, v)
	s.logf("VIOLATION %s", v)
	fmt.Fprintf(s.o.Progress, "VIOLATION %s\n", v)
}

// cli runs the airlock CLI against the soak's engine, and logs it.
func (s *soaker) cli(ctx context.Context, args ...string) (int, string, string) {
	code, out, errs := s.cliQuiet(ctx, args...)
	s.logf("  airlock %s -> %d %s", quoteArgs(args), code, names.Quote(trim(firstLine(errs), 200)))
	return code, out, errs
}

// cliQuiet runs the CLI (from any goroutine: it logs nothing).
func (s *soaker) cliQuiet(ctx context.Context, args ...string) (int, string, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.eng.cli, args...)
	cmd.Env = s.eng.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	return code, out.String(), errb.String()
}

// must runs the CLI and records a violation when it fails: every
// operation of the mix is one a user expects to work.
func (s *soaker) must(ctx context.Context, args ...string) (string, bool) {
	code, out, errs := s.cli(ctx, args...)
	if code != 0 {
		s.violation("airlock %s exited %d: %s", quoteArgs(args), code, names.Quote(trim(strings.TrimSpace(errs), 600)))
		return out, false
	}
	return out, true
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = names.Quote(a)
	}
	return strings.Join(q, " ")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (s *soaker) sessionDir(id string) string { return filepath.Join(s.eng.state, "sessions", id) }
func (s *soaker) upper(id string) string      { return filepath.Join(s.sessionDir(id), "ws", "upper") }
func (s *soaker) merged(id string) string     { return filepath.Join(s.sessionDir(id), "merged") }

// list is `airlock ls --json` by id.
func (s *soaker) list(ctx context.Context) (map[string]api.Session, bool) {
	out, ok := s.must(ctx, "ls", "--json")
	if !ok {
		return nil, false
	}
	var l []api.Session
	if err := decodeJSON([]byte(out), &l); err != nil {
		s.violation("ls --json: %v", err)
		return nil, false
	}
	m := map[string]api.Session{}
	for _, x := range l {
		m[x.ID] = x
	}
	return m, true
}

// newestCheckpoint is the newest of the session's checkpoints (0: none).
func (s *soaker) newestCheckpoint(ctx context.Context, t *session) (int64, bool) {
	out, ok := s.must(ctx, "turns", t.id, "--json")
	if !ok {
		return 0, false
	}
	var cps []api.Checkpoint
	if err := decodeJSON([]byte(out), &cps); err != nil {
		s.violation("turns --json of %s: %v", t.id, err)
		return 0, false
	}
	var n int64
	for _, c := range cps {
		n = max(n, c.ID)
	}
	return n, true
}

// noteCheckpoint records the upper layer's digest as the newest
// checkpoint's, once a command that made one is done.
func (s *soaker) noteCheckpoint(ctx context.Context, t *session) {
	n, ok := s.newestCheckpoint(ctx, t)
	if !ok || n == 0 {
		return
	}
	up, err := readTree(s.upper(t.id))
	if err != nil {
		s.violation("read the upper layer of %s: %v", t.id, err)
		return
	}
	t.cps[n] = up.digest()
	s.logf("  checkpoint %d of %s: upper %s", n, t.id, t.cps[n])
}

var sessionLine = regexp.MustCompile(`session ([0-9a-f]{12})`)

// newProject makes a git repository with a few files, a text file of
// twenty lines for hunks among them.
func (s *soaker) newProject(ctx context.Context) (string, error) {
	s.nproj++
	dir := filepath.Join(s.o.Dir, "projects", fmt.Sprintf("p%d", s.nproj))
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		return "", err
	}
	var lines strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	files := map[string]string{"README.md": "# soak\n", "src/app.py": "print('hi')\n", "lines.txt": lines.String()}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			return "", err
		}
	}
	git := exec.CommandContext(ctx, "sh", "-c", "git init -q && git add -A && git -c user.email=soak@airlock -c user.name=soak commit -qm init")
	git.Dir, git.Env = dir, s.eng.env
	if out, err := git.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git in %s: %v: %s", dir, err, out)
	}
	return dir, s.snapModel(dir)
}

// copyProject copies a project as it is now, for a session made from
// another (each session has a project of its own, so the model of what
// accepts write stays exact).
func (s *soaker) copyProject(ctx context.Context, src string) (string, error) {
	s.nproj++
	dir := filepath.Join(s.o.Dir, "projects", fmt.Sprintf("p%d", s.nproj))
	if out, err := exec.CommandContext(ctx, "cp", "-a", src, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cp: %v: %s", err, out)
	}
	return dir, s.snapModel(dir)
}

func (s *soaker) snapModel(dir string) error {
	t, err := readTree(dir, ".git")
	if err != nil {
		return err
	}
	s.model[dir] = t
	return nil
}

// checkProject compares a project with the model.
func (s *soaker) checkProject(t *session, why string) {
	s.fig.Checks++
	got, err := readTree(t.project, ".git")
	if err != nil {
		s.violation("read project %s: %v", names.Quote(t.project), err)
		return
	}
	if d := got.differences(s.model[t.project]); len(d) > 0 {
		s.violation("%s: the project of %s changed without an accept: %s", why, t.id, strings.Join(d, "; "))
		s.model[t.project] = got
	}
}

// checkAll checks every session: listed, never failed, its diff
// readable, its project as the model says.
func (s *soaker) checkAll(ctx context.Context, why string) map[string]api.Session {
	l, ok := s.list(ctx)
	if !ok {
		return nil
	}
	for _, t := range s.live {
		s.fig.Checks++
		x, ok := l[t.id]
		switch {
		case !ok:
			s.violation("%s: session %s is not listed", why, t.id)
			continue
		case x.State == api.StateFailed:
			s.violation("%s: session %s is failed: %s", why, t.id, names.Quote(x.Error))
			continue
		}
		s.fig.Checks++
		s.must(ctx, "diff", t.id, "--stat")
		s.checkProject(t, why)
	}
	return l
}

// checkGone checks that nothing of a removed session is left: its
// container, mounts, the engine's descriptors into its directory, its
// networks.
func (s *soaker) checkGone(ctx context.Context, id string) {
	s.fig.Checks++
	dir := s.sessionDir(id)
	if ms, _ := mounts(dir); len(ms) > 0 {
		s.violation("rm %s left mounts: %s", id, strings.Join(names.Quotes(ms), ", "))
	}
	if fds := fdsUnder(s.eng.pid(), dir); len(fds) > 0 {
		s.violation("rm %s left the engine's descriptors: %s", id, strings.Join(names.Quotes(fds), ", "))
	}
	out, _ := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", "name=^airlock-"+id+"$").Output()
	if len(bytes.TrimSpace(out)) > 0 {
		s.violation("rm %s left its container %s", id, bytes.TrimSpace(out))
	}
	if n := networksOf(ctx, id); len(n) > 0 {
		s.violation("rm %s left networks %v", id, n)
	}
}

// checkEmpty: after rm of everything the engine holds nothing of the
// removed sessions, and after its graceful stop nothing of it is left
// (its warm pool's workspaces are under sessions/ until then).
func (s *soaker) checkEmpty(ctx context.Context) {
	s.fig.Checks++
	for _, id := range s.gone {
		if fds := fdsUnder(s.eng.pid(), s.sessionDir(id)); len(fds) > 0 {
			s.violation("after rm of everything the engine holds %s", strings.Join(names.Quotes(fds), ", "))
		}
	}
	if err := s.eng.stop(); err != nil {
		s.violation("stop the engine: %v", err)
	}
	s.logf("engine stopped")
	if cs, err := s.eng.containers(ctx); err != nil || len(cs) > 0 {
		s.violation("after the engine stopped its containers are left: %v (%v)", cs, err)
	}
	if ms, _ := mounts(s.eng.state); len(ms) > 0 {
		s.violation("after the engine stopped mounts are left: %s", strings.Join(names.Quotes(ms), ", "))
	}
}

// hostile are names a session writes that a terminal or a careless
// parser would take for something else.
var hostile = []string{"a b.txt", "ünï-çødé.txt", "tab\there.txt", "-dash.txt", "new\nline.txt", "quote'd.txt", "$(echo no).txt", "\x1b[31mred.txt", "dir/sub/deep.txt", "x.txt"}

func sq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (s *soaker) addSession(id, project, image string) *session {
	t := &session{id: id, project: project, image: image, cps: map[int64]string{}}
	s.live = append(s.live, t)
	sort.Slice(s.live, func(i, j int) bool { return s.live[i].id < s.live[j].id })
	return t
}

func (s *soaker) drop(t *session) {
	for i, x := range s.live {
		if x == t {
			s.live = append(s.live[:i], s.live[i+1:]...)
			return
		}
	}
}

// killGroup kills a started command with SIGKILL.
func killGroup(cmd *exec.Cmd) { cmd.Process.Signal(syscall.SIGKILL) }
