package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"golang.org/x/sys/unix"
)

// rebootRecovery measures issue 14's reboot: n sessions, each with a
// checkpoint of a file it wrote; then what a host restart leaves — the
// engine killed, every container of the engine removed, every session
// mount gone — and an engine started again: the time until all n are
// listed (hibernated, from their checkpoints), and until a command has
// run in each (the first exec wakes it).
func (b *bench) rebootRecovery(n int) {
	project := filepath.Join(b.work, "p19")
	check(os.MkdirAll(project, 0o755))
	state := filepath.Join(b.work, "state")
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := 0; i < n; i++ {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			o, err := b.cmd(b.bin, "run", "--project", project, "--image", "airlock/tiny", "--", "sh", "-c", fmt.Sprintf("echo %d > f.txt", i)).CombinedOutput()
			check(errorf(err, o))
		})
	}
	wg.Wait()
	c := client.New(b.socket)
	list, err := c.Sessions(context.Background())
	check(err)
	var ids []string
	for _, s := range list {
		if s.Project == project {
			ids = append(ids, s.ID)
			cps, err := c.Checkpoints(context.Background(), s.ID) // waits for the command's checkpoint
			check(err)
			if len(cps) == 0 {
				check(fmt.Errorf("session %s has no checkpoint", s.ID))
			}
		}
	}
	v, err := c.Ping(context.Background())
	check(err)
	syscall.Kill(v.PID, syscall.SIGKILL)
	for i := 0; i < 200 && syscall.Kill(v.PID, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	out, _ := runOutCmd("docker", "ps", "-aq", "--filter", "label=dev.airlock.engine="+state)
	if f := strings.Fields(out); len(f) > 0 {
		o, err := b.cmd("docker", append([]string{"rm", "-f"}, f...)...).CombinedOutput()
		check(errorf(err, o))
	}
	for _, m := range mountsUnder(filepath.Join(state, "sessions")) {
		check(unix.Unmount(m, 0))
	}
	t := time.Now()
	serve := b.cmd(b.bin, "serve", "--engine", b.socket)
	logf, err := os.Create(filepath.Join(b.work, "serve19.log"))
	check(err)
	defer logf.Close()
	serve.Stdout, serve.Stderr = logf, logf
	serve.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	check(serve.Start())
	go serve.Wait()
	for {
		list, err := c.Sessions(context.Background())
		hib := 0
		for _, s := range list {
			if s.Project == project && s.State == api.StateHibernated {
				hib++
			}
		}
		if err == nil && hib == n {
			break
		}
		if time.Since(t) > 2*time.Minute {
			check(fmt.Errorf("after the restart %d of %d sessions are hibernated (%v)", hib, n, err))
		}
		time.Sleep(5 * time.Millisecond)
	}
	listed := time.Since(t)
	var first time.Duration
	for i, id := range ids {
		got := strings.TrimSpace(b.must("exec", id, "--", "cat", "f.txt"))
		if got == "" {
			check(fmt.Errorf("session %s woke without its file", id))
		}
		if i == 0 {
			first = time.Since(t)
		}
	}
	all := time.Since(t)
	for _, id := range ids {
		b.must("rm", "-f", id)
	}
	b.log("### 19. Reboot recovery of %d sessions", n)
	b.log("")
	b.log("Each session wrote a file in a command (a checkpoint). Then what a host restart leaves: the engine killed (-9), every container of the engine removed, every session mount unmounted; then `airlock serve` started again. Times from its start.")
	b.log("")
	b.log("| | time |")
	b.log("|---|---|")
	b.log("| all %d listed, hibernated from their checkpoints | %s |", n, ms(listed))
	b.log("| the first `airlock exec` done (it wakes its session) | %s |", ms(first))
	b.log("| an `airlock exec` done in each of the %d, one after another | %s |", n, ms(all))
	b.log("")
	b.log("All listed and usable: **%s** (target ≤ 5 s; a hibernated session is usable: new work wakes it).", ms(listed))
	b.log("")
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	check(err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
