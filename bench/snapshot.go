package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
)

// snapshots measures snapshot, restore and fork against what Docker
// offers for the same job: `docker commit` of a container holding the
// same bytes, and `docker run` of the committed image.
func (b *bench) snapshots(sizesMB []int, runs int) {
	c := client.New(b.socket)
	ctx := context.Background()
	project := filepath.Join(b.work, "p13")
	check(os.MkdirAll(project, 0o755))
	b.log("### 13. Snapshots, restore and fork")
	b.log("")
	b.log("A session whose workspace holds N MB of random data (10 files) is snapshotted %d times; `docker commit` captures a plain container holding the same bytes in its own filesystem. Restore and fork use the 100 MB snapshot; Docker's counterpart is `docker run -d` of the committed image.", runs)
	b.log("")
	b.log("| workspace | `airlock snapshot` p50 | frozen p50 | `docker commit` p50 |")
	b.log("|---|---|---|---|")
	var snap100, image100, snap10 string
	var snap100Time time.Duration
	for _, mb := range sizesMB {
		fill := fmt.Sprintf("for i in 0 1 2 3 4 5 6 7 8 9; do head -c %d /dev/urandom > data$i.bin; done", mb<<20/10)
		size := fmt.Sprintf("%dm", mb+mb/5+64)
		out, err := b.cmd(b.bin, "run", "--project", project, "--image", "airlock/tiny", "--workspace-size", size, "--memory", fmt.Sprintf("%dm", 2*mb+256), "--", "sh", "-c", fill).CombinedOutput()
		check(errorf(err, out))
		m := sessionRE.FindStringSubmatch(string(out))
		if m == nil {
			check(fmt.Errorf("no session id in %q", out))
		}
		id := m[1]
		var took, frozen, commit []time.Duration
		plain := fmt.Sprintf("airlock-bench-commit-%d", mb)
		runOutCmd("docker", "rm", "-f", plain)
		_, err = runOutCmd("docker", "run", "-d", "--name", plain, "airlock/tiny", "sh", "-c", "mkdir /data && cd /data && "+fill+" && touch /done && sleep 3600")
		check(err)
		waitFor(func() bool {
			_, err := runOutCmd("docker", "exec", plain, "test", "-e", "/done")
			return err == nil
		})
		for i := 0; i < runs; i++ {
			t := time.Now()
			s, err := c.Snapshot(ctx, id, api.SnapshotRequest{})
			check(err)
			took, frozen = append(took, time.Since(t)), append(frozen, s.Frozen)
			ref := fmt.Sprintf("airlock-bench/commit:%d-%d", mb, i)
			t = time.Now()
			_, err = runOutCmd("docker", "commit", plain, ref)
			check(err)
			commit = append(commit, time.Since(t))
			if mb == 100 && i == 0 {
				image100, snap100 = ref, s.ID
			} else {
				runOutCmd("docker", "rmi", ref)
			}
			switch {
			case mb == 10 && i == 0:
				snap10 = s.ID // for the fork of 100
			case mb != 100 || i > 0:
				check(c.RemoveSnapshot(ctx, s.ID))
			}
		}
		runOutCmd("docker", "rm", "-f", plain)
		if mb == 100 {
			snap100Time = pct(took, .5)
		}
		b.log("| %d MB | %s | %s | %s |", mb, ms(pct(took, .5)), ms(pct(frozen, .5)), ms(pct(commit, .5)))
		check(c.Remove(ctx, id))
	}
	b.log("")
	if snap10 != "" {
		defer c.RemoveSnapshot(ctx, snap10)
	}
	if snap100 == "" {
		return
	}
	defer c.RemoveSnapshot(ctx, snap100)
	defer runOutCmd("docker", "rmi", "-f", image100)

	// Restores and forks claim warm containers: the pool is set to 10
	// (enough for a fork of 10) and refilled between runs. It keeps
	// that many for each of the two kinds asked for last (here the
	// restore's, which is the 100 MB session's, and the 1000 MB one's).
	b.setWarmPool(warmPoolBench)
	var restore, drun []time.Duration
	for i := 0; i < runs+1; i++ {
		if i > 0 {
			b.waitWarm(2 * warmPoolBench)
		}
		t := time.Now()
		r, err := c.Restore(ctx, snap100, api.RestoreRequest{})
		check(err)
		// To the first command: `true` run in the restored session.
		code, err := c.Exec(ctx, r.Sessions[0].ID, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{Stdout: io.Discard, Stderr: io.Discard}, nil)
		check(err)
		if code != 0 {
			check(fmt.Errorf("true in a restored session: exit %d", code))
		}
		d := time.Since(t)
		check(c.Remove(ctx, r.Sessions[0].ID))
		name := fmt.Sprintf("airlock-bench-restore-%d", i)
		t = time.Now()
		_, err = runOutCmd("docker", "run", "-d", "--name", name, image100, "sleep", "3600")
		check(err)
		dd := time.Since(t)
		runOutCmd("docker", "rm", "-f", name)
		if i > 0 {
			restore, drun = append(restore, d), append(drun, dd)
		}
	}
	var fork, dfork []time.Duration
	for i := 0; i < runs+1; i++ {
		b.waitWarm(2 * warmPoolBench)
		t := time.Now()
		r, err := c.Restore(ctx, snap100, api.RestoreRequest{N: 10})
		check(err)
		took := time.Since(t)
		if len(r.Sessions) != 10 {
			check(fmt.Errorf("fork made %d sessions: %v", len(r.Sessions), r.Warnings))
		}
		for _, s := range r.Sessions {
			check(c.Remove(ctx, s.ID))
		}
		var wg sync.WaitGroup
		t = time.Now()
		for j := 0; j < 10; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runOutCmd("docker", "run", "-d", "--name", fmt.Sprintf("airlock-bench-fork-%d", j), image100, "sleep", "3600")
			}()
		}
		wg.Wait()
		if i > 0 { // the first fills the layer cache
			fork, dfork = append(fork, took), append(dfork, time.Since(t))
		}
		for j := 0; j < 10; j++ {
			runOutCmd("docker", "rm", "-f", fmt.Sprintf("airlock-bench-fork-%d", j))
		}
	}
	// One call making the most sessions a fork makes, from the 10 MB
	// snapshot (100 tmpfs workspaces of 100 MB would hold 10 GB).
	fork100 := "(no 10 MB snapshot)"
	if snap10 != "" {
		t := time.Now()
		r, err := c.Restore(ctx, snap10, api.RestoreRequest{N: 100})
		check(err)
		fork100 = ms(time.Since(t))
		if len(r.Sessions) != 100 {
			check(fmt.Errorf("fork of 100 made %d sessions: %v", len(r.Sessions), r.Warnings))
		}
		for _, s := range r.Sessions {
			check(c.Remove(ctx, s.ID))
		}
	}
	b.log("| 100 MB snapshot | airlock p50 | p95 | docker p50 | p95 |")
	b.log("|---|---|---|---|---|")
	b.log("| restore to first command: `airlock restore` + `true` / `docker run -d` of the committed image | %s | %s | %s | %s |", ms(pct(restore, .5)), ms(pct(restore, .95)), ms(pct(drun, .5)), ms(pct(drun, .95)))
	b.log("| fork of 10: `airlock fork -n 10` / 10 parallel `docker run -d` | %s | %s | %s | %s |", ms(pct(fork, .5)), ms(pct(fork, .95)), ms(pct(dfork, .5)), ms(pct(dfork, .95)))
	b.log("| fork of 100 in one call, from the 10 MB snapshot (once) | %s | | | |", fork100)
	b.log("")
	b.log("Snapshot of 100 MB p50: **%s** (target < 1 s); restore to first command p50: **%s** (target ≤ 150 ms); fork of 10 p50: **%s** (target ≤ 1 s). The first restore and the first fork apply the snapshot's layers to the layer cache and are not counted. The restores and forks claim warm containers: the bench sets the engine's warm pool to %d (the setting; the default is 2) and waits for it to refill between runs; the fork of 100 claims what the pool holds and makes the rest cold.", ms(snap100Time), ms(pct(restore, .5)), ms(pct(fork, .5)), warmPoolBench)
	b.log("")
}

func waitFor(ok func() bool) {
	for i := 0; i < 600 && !ok(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
}
