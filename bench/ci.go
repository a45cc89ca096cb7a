package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/client"
)

// ciOverhead measures `airlock ci` (an engine of its own, a session, the
// command, the review, the verdict, the cleanup) around `true` against
// `docker run --rm` of the same image.
func (b *bench) ciOverhead(runs int) {
	project := filepath.Join(b.work, "p14")
	check(os.MkdirAll(project, 0o755))
	check(os.WriteFile(filepath.Join(project, "README.md"), []byte("ci\n"), 0o644))
	out := filepath.Join(b.work, "out14")
	var ours, theirs []time.Duration
	for i := 0; i < runs+1; i++ {
		t := time.Now()
		o, err := b.cmd(b.bin, "ci", "--project", project, "--image", b.image, "--out", out, "--", "true").CombinedOutput()
		check(errorf(err, o))
		a := time.Since(t)
		t = time.Now()
		_, err = runOutCmd("docker", "run", "--rm", b.image, "true")
		check(err)
		d := time.Since(t)
		if i > 0 {
			ours, theirs = append(ours, a), append(theirs, d)
		}
	}
	b.compare(fmt.Sprintf("### 14. `airlock ci` around `true` (%d runs, image %s)", runs, b.image),
		"`airlock ci --out out -- true` (engine, session, command, review, verdict, cleanup)", ours,
		"`docker run --rm IMAGE true`", theirs, "docker", 2)
}

var adoptRE = regexp.MustCompile(`engine ready"? sessions=(\d+) adopt=(\S+)`)

// restartAdopt measures an engine restart with n sessions: from the start
// of `airlock serve` to its answering with all of them, after kill -9.
func (b *bench) restartAdopt(n int) {
	project := filepath.Join(b.work, "p15")
	check(os.MkdirAll(project, 0o755))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			o, err := b.cmd(b.bin, "run", "--project", project, "--image", "airlock/tiny", "--", "true").CombinedOutput()
			check(errorf(err, o))
		}()
	}
	wg.Wait()
	var total []time.Duration
	var adopt []string
	for r := 0; r < 3; r++ {
		v, err := client.New(b.socket).Ping(context.Background())
		check(err)
		syscall.Kill(v.PID, syscall.SIGKILL)
		for i := 0; i < 200 && syscall.Kill(v.PID, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		logPath := filepath.Join(b.work, fmt.Sprintf("serve15-%d.log", r))
		logf, err := os.Create(logPath)
		check(err)
		t := time.Now()
		serve := b.cmd(b.bin, "serve", "--engine", b.socket)
		serve.Stdout, serve.Stderr = logf, logf
		serve.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		check(serve.Start())
		go serve.Wait()
		c := client.New(b.socket)
		for {
			list, err := c.Sessions(context.Background())
			if err == nil && len(list) >= n {
				running := 0
				for _, s := range list {
					if s.State == "running" {
						running++
					}
				}
				if running < n {
					check(fmt.Errorf("%d of %d sessions running after the restart", running, n))
				}
				break
			}
			if time.Since(t) > time.Minute {
				check(fmt.Errorf("the engine did not come back with %d sessions", n))
			}
			time.Sleep(5 * time.Millisecond)
		}
		total = append(total, time.Since(t))
		logf.Close()
		lb, _ := os.ReadFile(logPath)
		if m := adoptRE.FindStringSubmatch(string(lb)); m != nil {
			adopt = append(adopt, m[2])
		}
	}
	b.log("### 15. Engine restart with %d sessions (after kill -9; 3 runs)", n)
	b.log("")
	b.log("| | median |")
	b.log("|---|---|")
	b.log("| `airlock serve` started → answers with all %d sessions running | %s |", n, ms(pct(total, .5)))
	b.log("| re-adoption in each run (the engine's own log) | %s |", strings.Join(adopt, ", "))
	b.log("")
	b.log("Restart with %d sessions p50: **%s** (target < 2 s).", n, ms(pct(total, .5)))
	b.log("")
}
