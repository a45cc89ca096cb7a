package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/client"
)

// hostileKill is where the benchmark kills an engine whose memory runs
// away, so that it cannot take the machine down; the figure is then
// reported as "killed above".
const hostileKill = 4 << 30

// hostileWorkload is a workspace the engine must handle with bounded
// memory.
type hostileWorkload struct {
	name   string
	flags  []string // of `airlock run`
	script string
	paths  []string // what `accept` names
}

// hostileOp is one measured request: its time, and the engine's peak RSS
// above the RSS of a freshly started engine.
type hostileOp struct {
	took  time.Duration
	above int64
	note  string // why it has no result: the engine died, an error, a timeout
}

// hostile measures the engine's memory while it reviews, accepts and
// snapshots hostile workspaces (many files, a large random file, a giant
// sparse file), and `diff --stat` of files added files against `git status
// --porcelain -uall` on the same tree. It runs an engine of its own whose
// state and project live on a size-capped tmpfs: an engine that copies a
// sparse file byte for byte fills that, not the disk.
func (b *bench) hostile(files int) {
	host := filepath.Join(b.work, "hostile")
	check(os.MkdirAll(host, 0o755))
	check(syscall.Mount("tmpfs", host, "tmpfs", 0, "size=6g,mode=0755"))
	h := *b
	h.socket = filepath.Join(host, "engine.sock")
	h.env = append(os.Environ(), "AIRLOCK_ENGINE="+h.socket, "AIRLOCK_STATE_DIR="+filepath.Join(host, "state"), "NO_COLOR=1")
	done := func() {
		if out, err := h.cmd(h.bin, "ls", "-q").Output(); err == nil {
			for _, id := range strings.Fields(string(out)) {
				h.cmd(h.bin, "rm", id).Run()
			}
		}
		h.stopEngine()
		if syscall.Unmount(host, 0) != nil {
			syscall.Unmount(host, syscall.MNT_DETACH)
		}
	}
	outer := atExit
	atExit = func() { done(); outer() }
	defer func() { done(); atExit = outer }()

	project := filepath.Join(host, "project")
	check(os.MkdirAll(filepath.Join(project, "src"), 0o755))
	check(os.WriteFile(filepath.Join(project, "README.md"), []byte("# app\n"), 0o644))
	check(os.WriteFile(filepath.Join(project, "src", "app.txt"), []byte("app\n"), 0o644))

	workloads := []hostileWorkload{
		{name: fmt.Sprintf("%d empty files", files),
			script: fmt.Sprintf(`mkdir many && cd many && for i in $(seq 1 %d); do mkdir d$i && (cd d$i && seq 1 1000 | xargs touch) || exit 1; done`, files/1000),
			paths:  []string{"many"}},
		{name: "1.5 GB random file", flags: []string{"--workspace-size", "2g", "--memory", "3g"},
			script: `head -c 1610612736 /dev/urandom > random.bin`, paths: []string{"random.bin"}},
		{name: "40 GB sparse file", script: `truncate -s 40G sparse.bin`, paths: []string{"sparse.bin"}},
	}
	ops := []struct{ head, verb string }{
		{"`diff --stat`", "stat"}, {"`diff --json`", "json"}, {"`diff --patch`", "patch"}, {"`accept PATH`", "accept"}, {"`snapshot`", "snapshot"},
	}
	var rows []string
	var worst int64
	var worstAt string
	var diffStat, gitStatus []time.Duration
	for _, w := range workloads {
		fmt.Printf("hostile workspace: %s...\n", w.name)
		args := append([]string{"run", "--project", project, "--image", "airlock/tiny"}, w.flags...)
		out := h.must(append(args, "--", "sh", "-c", w.script)...)
		m := sessionRE.FindStringSubmatch(out)
		if m == nil {
			check(fmt.Errorf("no session id in %q", out))
		}
		id := m[1]
		if strings.HasSuffix(w.name, "empty files") {
			diffStat, gitStatus = h.statVsGitStatus(id, project, filepath.Join(host, "git-tree"), files)
		}
		cells := []string{w.name}
		for _, op := range ops {
			var cmd []string
			switch op.verb {
			case "stat", "json", "patch":
				cmd = []string{"diff", id, "--" + op.verb}
			case "accept":
				cmd = append([]string{"accept", id}, w.paths...)
			case "snapshot":
				cmd = []string{"snapshot", id}
			}
			r, snap := h.measure(cmd)
			if snap != "" {
				h.cmd(h.bin, "snapshot", "rm", snap).Run()
			}
			if r.above > worst {
				worst, worstAt = r.above, w.name+", "+op.head
			}
			cells = append(cells, r.String())
		}
		rows = append(rows, "| "+strings.Join(cells, " | ")+" |")
		h.cmd(h.bin, "rm", id).Run()
		for _, p := range w.paths {
			os.RemoveAll(filepath.Join(project, p))
		}
	}

	b.log("### 16. Hostile workspaces: engine memory, and a diff of %d added files", files)
	b.log("")
	b.log("Each request runs against a freshly started engine (its state and the project on a tmpfs); a cell is the engine's peak RSS above that engine's idle RSS, and the request's time. An engine whose RSS passes %.0f MB is killed by the benchmark.", float64(hostileKill)/1e6)
	b.log("")
	b.log("| workspace | %s |", strings.Join([]string{ops[0].head, ops[1].head, ops[2].head, ops[3].head, ops[4].head}, " | "))
	b.log("|---|---|---|---|---|---|")
	for _, r := range rows {
		b.log("%s", r)
	}
	b.log("")
	b.log("Worst: **%.0f MB** above idle (%s); target at most 64 MB above idle.", float64(worst)/1e6, worstAt)
	b.log("")
	if len(diffStat) > 0 {
		b.compare(fmt.Sprintf("Diff of %d added files (median of 5, warm cache):", files),
			"`airlock diff ID --stat`", diffStat, "`git status --porcelain -uall` (the same tree)", gitStatus, "git", 0.5)
	}
}

func (r hostileOp) String() string {
	if r.note != "" {
		return r.note
	}
	return fmt.Sprintf("+%.0f MB, %s", float64(r.above)/1e6, roundTook(r.took))
}

func roundTook(d time.Duration) string {
	if d < time.Second {
		return ms(d)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// measure runs one request against a freshly started engine and returns
// its peak RSS above idle; for a snapshot, also the snapshot's id.
func (b *bench) measure(args []string) (hostileOp, string) {
	b.stopEngine()
	b.must("ls")
	v, err := client.New(b.socket).Ping(context.Background())
	check(err)
	time.Sleep(time.Second)
	idle := rss(v.PID)
	os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", v.PID), []byte("5"), 0)

	var killed atomic.Int64
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if r := rss(v.PID); r > hostileKill {
				syscall.Kill(v.PID, syscall.SIGKILL)
				killed.Store(r)
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, b.bin, args...)
	c.Env = b.env
	var out bytes.Buffer
	var errb bytes.Buffer
	if args[0] == "snapshot" {
		c.Stdout = &out
	} else {
		c.Stdout = io.Discard
	}
	c.Stderr = &errb
	t0 := time.Now()
	err = c.Run()
	took := time.Since(t0)
	peak := hwm(v.PID)
	close(stop)
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
	after, perr := client.New(b.socket).Ping(pctx)
	pcancel()
	died := perr != nil || after.PID != v.PID

	r := hostileOp{took: took, above: peak - idle}
	switch {
	case killed.Load() > 0:
		r.note = fmt.Sprintf("killed above %.0f MB after %s", float64(hostileKill)/1e6, roundTook(took))
		r.above = killed.Load() - idle
	case died:
		r.note = fmt.Sprintf("the engine died after %s: %s", roundTook(took), engineCrash(filepath.Join(envValue(b.env, "AIRLOCK_STATE_DIR"), "engine.log")))
		r.above = 0
	case ctx.Err() != nil:
		r.note = fmt.Sprintf("no answer in 5 min (+%.0f MB)", float64(r.above)/1e6)
	case err != nil:
		msg := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(errb.String(), "\n", 2)[0], "airlock: "))
		if len(msg) > 100 {
			msg = msg[:40] + "…" + msg[len(msg)-50:]
		}
		r.note = fmt.Sprintf("+%.0f MB, failed after %s: %s", float64(r.above)/1e6, roundTook(took), strings.ReplaceAll(msg, "|", "/"))
	}
	return r, strings.TrimSpace(out.String())
}

// hwm is a process's peak RSS (VmHWM) in bytes.
func hwm(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// engineCrash returns the line of an engine's log that says why it died.
func engineCrash(log string) string {
	data, _ := os.ReadFile(log)
	lines := strings.Split(string(data), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "fatal error:") || strings.HasPrefix(lines[i], "panic:") {
			return strings.TrimSpace(lines[i])
		}
	}
	return "see its log"
}

func envValue(env []string, key string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, key+"="); ok {
			return v
		}
	}
	return ""
}

// statVsGitStatus times `airlock diff --stat` of the session's n added
// files against `git status --porcelain -uall` on a git checkout of the
// project holding the same files, untracked.
func (b *bench) statVsGitStatus(id, project, tree string, n int) ([]time.Duration, []time.Duration) {
	out, err := exec.Command("cp", "-a", project, tree).CombinedOutput()
	check(errorf(err, out))
	git := func(args ...string) *exec.Cmd {
		c := exec.Command("git", append([]string{"-c", "user.name=b", "-c", "user.email=b@example.com", "-c", "gc.auto=0"}, args...)...)
		c.Dir = tree
		return c
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "gen"}} {
		out, err := git(args...).CombinedOutput()
		check(errorf(err, out))
	}
	for d := 1; d <= n/1000; d++ {
		dir := filepath.Join(tree, "many", fmt.Sprintf("d%d", d))
		check(os.MkdirAll(dir, 0o755))
		for f := 1; f <= 1000; f++ {
			check(os.WriteFile(filepath.Join(dir, strconv.Itoa(f)), nil, 0o644))
		}
	}
	if got := strings.Count(b.must("diff", id, "--stat"), "added"); got != n {
		check(fmt.Errorf("diff --stat lists %d added files, want %d", got, n))
	}
	gs, err := git("status", "--porcelain", "-uall").Output()
	check(err)
	if got := bytes.Count(gs, []byte("\n")); got != n {
		check(fmt.Errorf("git status lists %d paths, want %d", got, n))
	}
	var al, gt []time.Duration
	for i := 0; i < 6; i++ {
		al = append(al, timeIt(func() { b.must("diff", id, "--stat") }))
		gt = append(gt, timeIt(func() {
			out, err := git("status", "--porcelain", "-uall").CombinedOutput()
			check(errorf(err, out[:min(len(out), 200)]))
		}))
	}
	os.RemoveAll(tree)
	return al[1:], gt[1:]
}
