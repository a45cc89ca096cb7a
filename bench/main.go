// Command bench measures Airlock against the obvious alternative in the
// same run and writes the results to docs/BENCHMARKS.md:
//
//  1. session create to first command running vs `docker run --rm`
//  2. diff of 100 changed files in a 100,000-file project vs `git status --porcelain`
//  3. accept of 10,000 small files vs `cp -a`
//  4. engine memory (RSS) idle and with 20 live sessions
//     5-7. base capture, large diffs, three-way merges
//  8. agent turn overhead vs the same CLI by `docker exec`
//  9. egress proxy overhead vs a direct connection on loopback
//  10. network policy change to enforcement
//  11. pause and resume vs docker pause and unpause
//  12. engine CPU spent watching 50 idle sessions
//  13. snapshots vs `docker commit`; restore and fork (warm pool) vs `docker run -d`
//  14. `airlock ci` around `true` vs `docker run --rm`
//  15. engine restart with 50 sessions after kill -9
//  16. engine memory on hostile workspaces; diff of 200,000 added files vs git status
//  17. `airlock exec ID -- true` vs `docker exec C true`
//  18. checkpoint after 10 changed files in 1 GB vs `airlock snapshot`;
//     wake of a hibernated 500 MB session vs `docker start`; what 20
//     hibernated sessions hold
//  19. reboot recovery: 20 sessions back after their containers and
//     mounts are gone
//  20. `airlock diff --json` of 40 MB of added node_modules-shaped text,
//     first and cached, vs gitleaks' own detector on the same files
//  21. a session of 200,000 files in one directory: what the engine holds
//     for it, each operation's peak, accept vs `cp -a` + `sync`
//  22. the same for a node_modules-shaped tree of 200,000 files
//  23. `diff --stat` beside 6,400 ignored files vs `git status`
//
// It starts an engine of its own (own socket and state directory) and
// drives it through the real CLI, as a user would. Run it with `make bench`.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"golang.org/x/sys/unix"
)

type bench struct {
	bin    string
	env    []string
	socket string
	work   string
	image  string
	report []string
}

func main() {
	bin := flag.String("airlock", "bin/airlock", "airlock binary")
	out := flag.String("out", "docs/BENCHMARKS.md", "report file")
	image := flag.String("image", "airlock/base", "image for benchmark 1")
	files := flag.Int("files", 100000, "project size for benchmark 2")
	accept := flag.Int("accept", 10000, "files for benchmark 3")
	runs := flag.Int("runs", 20, "runs for benchmark 1")
	scaleFiles := flag.Int("scale", 200000, "files for benchmarks 20 and 21")
	only := flag.String("only", "", "comma-separated benchmark numbers to run (default all); the report is then printed, not written")
	flag.Parse()
	want := func(n string) bool { return *only == "" || strings.Contains(","+*only+",", ","+n+",") }
	abs, err := filepath.Abs(*bin)
	check(err)
	work, err := os.MkdirTemp("/var/tmp", "airlock-bench-")
	check(err)
	b := &bench{bin: abs, work: work, image: *image, socket: filepath.Join(work, "engine.sock")}
	b.env = append(os.Environ(), "AIRLOCK_ENGINE="+b.socket, "AIRLOCK_STATE_DIR="+filepath.Join(work, "state"), "NO_COLOR=1")
	atExit = b.cleanup
	defer b.cleanup()

	b.must("image", "build")
	b.must("image", "build", "--tiny")
	if want("1") {
		b.sessionCreate(*runs)
	}
	if want("2") {
		b.diffVsGit(*files, 100)
	}
	if want("3") {
		b.acceptVsCp(*accept)
	}
	if want("4") {
		b.memory(20)
	}
	if want("5") || want("6") {
		b.baseCapture(*files)
	}
	if want("6") {
		b.diffVsGitDiff(*files, 1000)
	}
	if want("7") {
		b.mergeVsGitMergeFile(100)
	}
	if want("8") {
		b.agentTurn(10)
	}
	if want("9") {
		b.egressOverhead(1000)
	}
	if want("10") {
		b.policyLatency(10)
	}
	if want("11") {
		b.pauseResume(20)
	}
	if want("12") {
		b.meterCost(50, time.Minute)
	}
	if want("13") {
		b.snapshots([]int{10, 100, 1000}, 3)
	}
	if want("14") {
		b.ciOverhead(10)
	}
	if want("15") {
		b.restartAdopt(50)
	}
	if want("16") {
		b.hostile(200000)
	}
	if want("17") {
		b.execVsDockerExec(50)
	}
	if want("18") {
		b.checkpoints(3)
	}
	if want("19") {
		b.rebootRecovery(20)
	}
	if want("20") {
		b.secretScan(40<<20, 5)
	}
	if want("21") {
		b.scale(21, oneDirectory(*scaleFiles))
	}
	if want("22") {
		b.scale(22, nodeModules(*scaleFiles))
	}
	if want("23") {
		b.ignoredVsGitStatus(6400, 10)
	}
	if *only != "" {
		return
	}
	check(b.write(*out))
	fmt.Println("wrote", *out)
}

// atExit undoes the run's sessions, engine and files when check fails.
var atExit = func() {}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		atExit()
		os.Exit(1)
	}
}

func (b *bench) cmd(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Env = b.env
	return c
}

func (b *bench) must(args ...string) string {
	var out, errb bytes.Buffer
	c := b.cmd(b.bin, args...)
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		check(fmt.Errorf("airlock %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String()))
	}
	return out.String() + errb.String()
}

var sessionRE = regexp.MustCompile(`session ([0-9a-f]{12})`)

func (b *bench) newSession(project, image string, script string) string {
	out := b.must("run", "--project", project, "--image", image, "--", "sh", "-c", script)
	m := sessionRE.FindStringSubmatch(out)
	if m == nil {
		check(fmt.Errorf("no session id in %q", out))
	}
	return m[1]
}

func (b *bench) log(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	fmt.Println(line)
	b.report = append(b.report, line)
}

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(float64(len(s)-1)*p + 0.5)
	return s[idx]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func timeIt(f func()) time.Duration {
	t := time.Now()
	f()
	return time.Since(t)
}

// startLatency runs cmd, whose first action prints the container's clock
// (ns); the latency is that time minus the launch time.
func startLatency(c *exec.Cmd) (time.Duration, time.Duration) {
	var out bytes.Buffer
	c.Stdout = &out
	t0 := time.Now()
	if err := c.Run(); err != nil {
		check(fmt.Errorf("%v: %v (%s)", c.Args, err, out.String()))
	}
	total := time.Since(t0)
	ns, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(out.String(), "\n", 2)[0]), 10, 64)
	check(err)
	return time.Unix(0, ns).Sub(t0), total
}

// warmPoolBench is the warm pool size benchmarks 1 and 13 set (the
// engine's setting, as a user would): enough for a fork of 10.
const warmPoolBench = 10

// setWarmPool sets the engine's warm pool size (starting the engine if
// it is not running).
func (b *bench) setWarmPool(n int) {
	b.must("ls")
	_, err := client.New(b.socket).SetSettings(context.Background(), api.Settings{WarmPool: n})
	check(err)
}

// waitWarm waits (at most 60 s) until the engine holds n frozen warm
// containers: the pool is refilled between runs, as it is between a
// user's requests.
func (b *bench) waitWarm(n int) {
	state := filepath.Join(b.work, "state")
	for i := 0; i < 1200; i++ {
		out, _ := runOutCmd("docker", "ps", "-q", "--filter", "label=dev.airlock.engine="+state, "--filter", "status=paused")
		if len(strings.Fields(out)) >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("(the warm pool did not reach %d containers in 60 s)\n", n)
}

func (b *bench) sessionCreate(runs int) {
	project := filepath.Join(b.work, "p1")
	check(os.MkdirAll(project, 0o755))
	os.WriteFile(filepath.Join(project, "README.md"), []byte("x\n"), 0o644)
	b.setWarmPool(2)
	var al, alTotal, dk, dkTotal []time.Duration
	for i := 0; i < runs+2; i++ {
		if i > 0 { // the first run is cold: the pool learns its kind
			b.waitWarm(2)
		}
		a, at := startLatency(b.cmd(b.bin, "run", "--project", project, "--image", b.image, "--", "date", "+%s%N"))
		d, dt := startLatency(b.cmd("docker", "run", "--rm", b.image, "date", "+%s%N"))
		if i >= 2 { // the first runs warm caches
			al, alTotal, dk, dkTotal = append(al, a), append(alTotal, at), append(dk, d), append(dkTotal, dt)
		}
		for _, id := range strings.Fields(b.must("ls", "-q")) {
			b.must("rm", id)
		}
	}
	b.log("### 1. Session create to first command running (%s, %d runs)", b.image, runs)
	b.log("")
	b.log("The engine's warm pool is on at 2 (the default, set through the settings): each run claims a frozen container the pool refilled in the background while the previous runs' `docker run` went (the bench waits for it: a pool kept full, as between a user's requests). The first two runs warm caches, the first is cold.")
	b.log("")
	b.log("| | p50 | p95 | whole command p50 |")
	b.log("|---|---|---|---|")
	b.log("| `airlock run --project P -- CMD` | %s | %s | %s |", ms(pct(al, .5)), ms(pct(al, .95)), ms(pct(alTotal, .5)))
	b.log("| `docker run --rm IMAGE CMD` | %s | %s | %s |", ms(pct(dk, .5)), ms(pct(dk, .95)), ms(pct(dkTotal, .5)))
	b.log("")
	b.log("Ratio airlock/docker to first command, p50: **%.2f** (target ≤ 0.3, < 100 ms); p95: %.2f.", float64(pct(al, .5))/float64(pct(dk, .5)), float64(pct(al, .95))/float64(pct(dk, .95)))
	b.log("")
}

func (b *bench) diffVsGit(files, changed int) {
	project := filepath.Join(b.work, "p2")
	fmt.Printf("generating a %d-file project...\n", files)
	for i := 0; i < files; i++ {
		dir := filepath.Join(project, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			check(os.MkdirAll(dir, 0o755))
		}
		check(os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", i%100)), []byte(fmt.Sprintf("file %d\nline two\n", i)), 0o644))
	}
	git := func(dir string, args ...string) *exec.Cmd {
		c := exec.Command("git", append([]string{"-c", "user.name=b", "-c", "user.email=b@example.com", "-c", "gc.auto=0"}, args...)...)
		c.Dir = dir
		return c
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "gen"}} {
		out, err := git(project, args...).CombinedOutput()
		check(errorf(err, out))
	}
	// The same change for git: a native copy with the same 100 edits.
	copyDir := filepath.Join(b.work, "p2-git")
	out, err := exec.Command("cp", "-a", project, copyDir).CombinedOutput()
	check(errorf(err, out))
	script := fmt.Sprintf("for i in $(seq 0 %d); do d=$(printf d%%03d $((i*%d/100))); echo changed >> $d/f000.txt; done", changed-1, files/changed)
	id := b.newSession(project, "airlock/tiny", script)
	sh := exec.Command("sh", "-c", script)
	sh.Dir = copyDir
	out, err = sh.CombinedOutput()
	check(errorf(err, out))
	stat := b.must("diff", id, "--stat")
	if n := strings.Count(stat, "modified"); n != changed {
		check(fmt.Errorf("diff --stat lists %d modified files, want %d", n, changed))
	}
	var al, gs []time.Duration
	for i := 0; i < 12; i++ {
		al = append(al, timeIt(func() { b.must("diff", id, "--stat") }))
		gs = append(gs, timeIt(func() {
			out, err := git(copyDir, "status", "--porcelain").CombinedOutput()
			check(errorf(err, out))
		}))
	}
	b.compare(fmt.Sprintf("### 2. Diff of %d changed files in a %d-file project (median of 10, warm cache)", changed, files),
		"`airlock diff ID --stat`", al[2:], "`git status --porcelain` (same tree, native disk)", gs[2:], "git", 0.1)
	b.must("rm", id)
}

// compare logs a two-row table of medians and their ratio against target.
func (b *bench) compare(title, ours string, a []time.Duration, theirs string, t []time.Duration, other string, target float64) {
	b.log("%s", title)
	b.log("")
	b.log("| | median |")
	b.log("|---|---|")
	b.log("| %s | %s |", ours, ms(pct(a, .5)))
	b.log("| %s | %s |", theirs, ms(pct(t, .5)))
	b.log("")
	b.log("Ratio airlock/%s: **%.3f** (target ≤ %g).", other, float64(pct(a, .5))/float64(pct(t, .5)), target)
	b.log("")
}

func errorf(err error, out []byte) error {
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func (b *bench) acceptVsCp(n int) {
	script := fmt.Sprintf("for d in $(seq 1 %d); do mkdir -p dir$d; for f in $(seq 1 100); do echo content $d $f > dir$d/file$f.txt; done; done", n/100)
	var al, cp, cpSync []time.Duration
	var ratios []float64
	var cleanup []string
	quiesce := func() {
		// This machine's disk is mounted with online discard: deleting
		// files stalls later writes. Let each timed step start quiet.
		exec.Command("sync").Run()
		time.Sleep(time.Second)
	}
	for rep := 0; rep < 5; rep++ {
		project := filepath.Join(b.work, fmt.Sprintf("p3-%d", rep))
		check(os.MkdirAll(project, 0o755))
		id := b.newSession(project, "airlock/tiny", script)
		upper := filepath.Join(b.work, "state", "sessions", id, "ws", "upper")
		target := filepath.Join(b.work, fmt.Sprintf("cp-%d", rep))
		var c, cs, a time.Duration
		copyOnce := func() {
			quiesce()
			cs = timeIt(func() {
				c = timeIt(func() {
					out, err := exec.Command("cp", "-a", upper, target).CombinedOutput()
					check(errorf(err, out))
				})
				exec.Command("sync").Run()
			})
		}
		acceptOnce := func() {
			quiesce()
			a = timeIt(func() { b.must("accept", id) })
		}
		// Alternate which goes first: each leaves the disk busier for the
		// other (writeback, and on this machine's ext4 without a journal
		// the next creates skip recently deleted inodes one by one).
		if rep%2 == 0 {
			copyOnce()
			acceptOnce()
		} else {
			acceptOnce()
			copyOnce()
		}
		cp, cpSync, al = append(cp, c), append(cpSync, cs), append(al, a)
		ratios = append(ratios, float64(a)/float64(cs))
		entries, _ := filepath.Glob(filepath.Join(project, "dir*", "*.txt"))
		if len(entries) != n {
			check(fmt.Errorf("accept wrote %d files, want %d", len(entries), n))
		}
		b.must("rm", id)
		cleanup = append(cleanup, project, target)
	}
	for _, p := range cleanup {
		os.RemoveAll(p)
	}
	b.log("### 3. Accept of %d small files (median of 5, alternating which runs first; this machine's disk makes both vary run to run)", n)
	b.log("")
	b.log("| | median |")
	b.log("|---|---|")
	b.log("| `airlock accept ID` (atomic per file, data synced before rename) | %s |", ms(pct(al, .5)))
	b.log("| `cp -a` of the same files (no sync) | %s |", ms(pct(cp, .5)))
	b.log("| `cp -a` then `sync` (durable, like accept) | %s |", ms(pct(cpSync, .5)))
	b.log("")
	slices.Sort(ratios)
	b.log("Ratio airlock/(`cp -a` + `sync`), median of the runs' ratios: **%.2f** (target ≤ 1.2; runs %s). Ratio airlock/`cp -a` without sync: %.2f.",
		ratios[len(ratios)/2], fmtRatios(ratios), float64(pct(al, .5))/float64(pct(cp, .5)))
	b.log("")
}

func fmtRatios(r []float64) string {
	var s []string
	for _, v := range r {
		s = append(s, fmt.Sprintf("%.2f", v))
	}
	return strings.Join(s, ", ")
}

// genProject writes n small files in directories of 100, as a git repo
// when git is true.
func (b *bench) genProject(dir string, n int, git bool) {
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			check(os.MkdirAll(d, 0o755))
		}
		check(os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.txt", i%100)), []byte(fmt.Sprintf("file %d\nline two\nline three\nline four\nline five\nline six\nline seven\nline eight\n", i)), 0o644))
	}
	if git {
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "gen"}} {
			c := exec.Command("git", append([]string{"-c", "user.name=b", "-c", "user.email=b@example.com", "-c", "gc.auto=0"}, args...)...)
			c.Dir = dir
			out, err := c.CombinedOutput()
			check(errorf(err, out))
		}
	}
}

// baseCapture measures what recording the base adds to session start.
func (b *bench) baseCapture(files int) {
	small := filepath.Join(b.work, "base-small")
	check(os.MkdirAll(small, 0o755))
	os.WriteFile(filepath.Join(small, "a.txt"), []byte("a\n"), 0o644)
	plain := filepath.Join(b.work, "base-plain")
	b.genProject(plain, files, false)
	gitp := filepath.Join(b.work, "base-git")
	b.genProject(gitp, files, true)
	measure := func(project string) time.Duration {
		var ds []time.Duration
		for i := 0; i < 7; i++ {
			b.waitWarm(2) // a pool kept full, as between a user's requests (section 1)
			t := timeIt(func() { b.must("run", "--project", project, "--image", "airlock/tiny", "--", "true") })
			ds = append(ds, t)
			for _, id := range strings.Fields(b.must("ls", "-q")) {
				b.must("rm", id)
			}
		}
		return pct(ds, .5)
	}
	s, pl, g := measure(small), measure(plain), measure(gitp)
	b.log("### 5. Base capture: session start on a %d-file project (median of 7, `airlock run -- true`)", files)
	b.log("")
	b.log("| project | session start + `true` | growth over a 1-file project |")
	b.log("|---|---|---|")
	b.log("| 1 file | %s | |", ms(s))
	b.log("| %d files, not git | %s | %s |", files, ms(pl), ms(pl-s))
	b.log("| %d files, clean git checkout | %s | %s |", files, ms(g), ms(g-s))
	b.log("")
	b.log("Target: growth at most 300 ms. The stat walk runs while Docker creates and starts the container, or, for a session claimed from the warm pool (as here: the bench waits for the pool to refill between runs), while the claim thaws it; the first command waits for it.")
	b.log("")
	os.RemoveAll(plain)
}

// diffVsGitDiff: 1,000 changed files, airlock diff --stat vs git diff --stat.
func (b *bench) diffVsGitDiff(files, changed int) {
	project := filepath.Join(b.work, "base-git")
	copyDir := filepath.Join(b.work, "p5-git")
	out, err := exec.Command("cp", "-a", project, copyDir).CombinedOutput()
	check(errorf(err, out))
	script := fmt.Sprintf("for i in $(seq 0 %d); do d=$(printf d%%03d $((i*%d/%d/100))); f=$(printf f%%03d $((i %% 100))); echo changed >> $d/$f.txt; done", changed-1, files, changed)
	id := b.newSession(project, "airlock/tiny", script)
	sh := exec.Command("sh", "-c", script)
	sh.Dir = copyDir
	out, err = sh.CombinedOutput()
	check(errorf(err, out))
	if n := strings.Count(b.must("diff", id, "--stat"), "modified"); n != changed {
		check(fmt.Errorf("diff --stat lists %d files, want %d", n, changed))
	}
	var al, gd []time.Duration
	for i := 0; i < 12; i++ {
		al = append(al, timeIt(func() { b.must("diff", id, "--stat") }))
		gd = append(gd, timeIt(func() {
			c := exec.Command("git", "diff", "--stat")
			c.Dir = copyDir
			out, err := c.CombinedOutput()
			check(errorf(err, out))
		}))
	}
	b.compare(fmt.Sprintf("### 6. Diff of %d changed files in a %d-file project (median of 10)", changed, files),
		"`airlock diff ID --stat`", al[2:], "`git diff --stat` (same change, git checkout)", gd[2:], "git", 0.2)
	b.must("rm", id)
	os.RemoveAll(copyDir)
}

// mergeVsGitMergeFile: 100 files changed on both sides since the session
// started; airlock diff merges them three-way; git merge-file per file.
func (b *bench) mergeVsGitMergeFile(n int) {
	project := filepath.Join(b.work, "p6")
	lines := func(edit map[int]string) string {
		var sb strings.Builder
		for i := 1; i <= 200; i++ {
			if s, ok := edit[i]; ok {
				sb.WriteString(s)
				continue
			}
			fmt.Fprintf(&sb, "line %d of a moderately long source file\n", i)
		}
		return sb.String()
	}
	check(os.MkdirAll(project, 0o755))
	for i := 0; i < n; i++ {
		check(os.WriteFile(filepath.Join(project, fmt.Sprintf("f%03d.txt", i)), []byte(lines(nil)), 0o644))
	}
	id := b.newSession(project, "airlock/tiny", "for f in f*.txt; do sed -i -e 's/^line 20 of/agent 20 of/' -e 's/^line 100 of/agent 100 of/' $f; done")
	time.Sleep(500 * time.Millisecond) // let the background base capture finish
	three := filepath.Join(b.work, "p6-merge")
	check(os.MkdirAll(three, 0o755))
	for i := 0; i < n; i++ {
		host := lines(map[int]string{100: "host 100\n", 150: "host 150\n"})
		check(os.WriteFile(filepath.Join(project, fmt.Sprintf("f%03d.txt", i)), []byte(host), 0o644))
		check(os.WriteFile(filepath.Join(three, fmt.Sprintf("base%03d", i)), []byte(lines(nil)), 0o644))
		check(os.WriteFile(filepath.Join(three, fmt.Sprintf("host%03d", i)), []byte(host), 0o644))
		check(os.WriteFile(filepath.Join(three, fmt.Sprintf("agent%03d", i)), []byte(lines(map[int]string{20: "agent 20 of a moderately long source file\n", 100: "agent 100 of a moderately long source file\n"})), 0o644))
	}
	stat := b.must("diff", id, "--stat")
	if c := strings.Count(stat, "CONFLICT"); c != n {
		check(fmt.Errorf("want %d conflicting files, diff --stat shows %d:\n%s", n, c, stat))
	}
	var al, gm []time.Duration
	for rep := 0; rep < 7; rep++ {
		al = append(al, timeIt(func() { b.must("diff", id, "--json") }))
		gm = append(gm, timeIt(func() {
			for i := 0; i < n; i++ {
				c := exec.Command("git", "merge-file", "-p", filepath.Join(three, fmt.Sprintf("host%03d", i)), filepath.Join(three, fmt.Sprintf("base%03d", i)), filepath.Join(three, fmt.Sprintf("agent%03d", i)))
				c.Run() // exits with the number of conflicts
			}
		}))
	}
	b.compare(fmt.Sprintf("### 7. Three-way merge of %d conflicting files (200 lines each; one clean and one conflicting change per file; median of 7)", n),
		fmt.Sprintf("`airlock diff ID --json` (merges all %d, with hunks and conflicts)", n), al, "`git merge-file -p` on each file", gm, "git", 1)
	b.must("rm", id)
}

func rss(pid int) int64 { return status(pid, "VmRSS") }

// status is a size field of /proc/PID/status in bytes: VmRSS, and its
// parts RssAnon (heap, stacks) and RssFile (mapped files: the binary).
func status(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// idleWait is how long after its last request the engine's memory is
// read: past the second after which it returns its free heap.
const idleWait = 2 * time.Second

func (b *bench) memory(n int) {
	// A fresh engine, so earlier benchmarks' work does not count; first
	// with its binary as the linker left it in the page cache, then read
	// back from disk, as a service started after a reboot finds it (the
	// kernel maps a page cache's larger folios whole: the same binary
	// maps some megabytes more fresh from the linker).
	b.stopEngine()
	b.must("ls")
	v, err := client.New(b.socket).Ping(context.Background())
	check(err)
	time.Sleep(idleWait)
	linked, linkedAnon, linkedFile := rss(v.PID), status(v.PID, "RssAnon"), status(v.PID, "RssFile")
	binary, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", v.PID))
	check(err)
	b.stopEngine()
	check(dropPageCache(binary))
	b.must("ls")
	v, err = client.New(b.socket).Ping(context.Background())
	check(err)
	time.Sleep(idleWait)
	idle, idleAnon, idleFile := rss(v.PID), status(v.PID, "RssAnon"), status(v.PID, "RssFile")
	project := filepath.Join(b.work, "p4")
	check(os.MkdirAll(project, 0o755))
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("a\n"), 0o644)
	for i := 0; i < n; i++ {
		b.newSession(project, "airlock/tiny", "echo $RANDOM > a.txt; echo new > b.txt")
	}
	b.must("ls")
	b.must("ls")
	time.Sleep(idleWait)
	loaded, loadedAnon, loadedFile := rss(v.PID), status(v.PID, "RssAnon"), status(v.PID, "RssFile")
	b.log("### 4. Engine memory")
	b.log("")
	b.log("| | RSS | anonymous | file-backed (the binary, libc) |")
	b.log("|---|---|---|---|")
	b.log("| idle, no sessions, binary as `make build` left it in the page cache | %.1f MB | %.1f MB | %.1f MB |", float64(linked)/1e6, float64(linkedAnon)/1e6, float64(linkedFile)/1e6)
	b.log("| idle, no sessions, binary read from disk | %.1f MB | %.1f MB | %.1f MB |", float64(idle)/1e6, float64(idleAnon)/1e6, float64(idleFile)/1e6)
	b.log("| %d live sessions, each after a command, after `airlock ls` | %.1f MB | %.1f MB | %.1f MB |", n, float64(loaded)/1e6, float64(loadedAnon)/1e6, float64(loadedFile)/1e6)
	b.log("")
	b.log("The engine's executable: %s. Each figure is read %v after the last request: the engine gives its free heap back after a second without one (daemon/release.go).", exe(v.PID), idleWait)
	b.log("")
	ids := strings.Fields(b.must("ls", "-q"))
	b.must("diff", ids[0])
	for _, pid := range childrenOf(v.PID) {
		if exe(pid) == "airlock-scan" {
			b.log("A review's secret scanner, `airlock-scan`, a child of the engine from the first review until 30 s after the last: %.1f MB RSS after one `airlock diff` (engine %.1f MB then).", float64(rss(pid))/1e6, float64(rss(v.PID))/1e6)
			b.log("")
		}
	}
	b.log("Target: at most 25 MB idle and 30 MB with %d sessions (issue 17).", n)
	b.log("")
	for _, id := range ids {
		b.must("rm", id)
	}
}

// childrenOf are the pids whose parent is pid.
func childrenOf(pid int) []int {
	var kids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid: comm may hold anything; ppid follows the last ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			k, _ := strconv.Atoi(e.Name())
			kids = append(kids, k)
		}
	}
	return kids
}

// dropPageCache evicts a file's pages from the page cache (they are
// clean: nothing is lost), so that the next process to map it reads it
// from disk.
func dropPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// exe is the file a process runs (airlock-engine when `airlock serve`
// found it beside the CLI).
func exe(pid int) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return "?"
	}
	return filepath.Base(p)
}

func (b *bench) stopEngine() {
	v, err := client.New(b.socket).Ping(context.Background())
	if err != nil {
		return
	}
	syscall.Kill(v.PID, syscall.SIGTERM)
	for i := 0; i < 200 && syscall.Kill(v.PID, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// restartEngine stops the engine and starts it again, as the CLI starts
// it on demand, with env added to the bench's environment (AIRLOCK_CONFIG).
func (b *bench) restartEngine(env ...string) {
	b.stopEngine()
	c := b.cmd(b.bin, "ls")
	c.Env = append(slices.Clip(b.env), env...)
	out, err := c.CombinedOutput()
	check(errorf(err, out))
}

func (b *bench) cleanup() {
	if out, err := b.cmd(b.bin, "ls", "-q").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			b.cmd(b.bin, "rm", id).Run()
		}
	}
	b.stopEngine()
	os.RemoveAll(b.work)
}

func machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	var mem string
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.Fields(strings.Split(string(data), "\n")[0])[1]
		kb, _ := strconv.ParseInt(mem, 10, 64)
		mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
	}
	var uts syscall.Utsname
	syscall.Uname(&uts)
	rel := make([]byte, 0, 65)
	for _, c := range uts.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	dv, _ := exec.Command("docker", "version", "--format", "{{.Server.Version}} (API {{.Server.APIVersion}})").Output()
	fs, _ := exec.Command("stat", "-f", "-c", "%T", "/var/tmp").Output()
	return fmt.Sprintf("%d cores (%s), %s RAM, Linux %s, Docker %s, %s, project disk %s",
		runtime.NumCPU(), cpu, mem, rel, strings.TrimSpace(string(dv)), runtime.Version(), strings.TrimSpace(string(fs)))
}

func (b *bench) write(path string) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Benchmarks\n\nLatest results of `make bench` (source: `bench/main.go`). Each benchmark runs Airlock and the obvious alternative in the same run, through their command lines as a user would.\n\n")
	fmt.Fprintf(&buf, "- Date: %s\n- Machine: %s\n- Command: `make bench` (= `go run ./bench -airlock bin/airlock -out docs/BENCHMARKS.md`)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), machine())
	for _, l := range b.report {
		buf.WriteString(l + "\n")
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
