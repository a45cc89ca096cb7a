package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"golang.org/x/sys/unix"
)

// recordStats is what a checkpoint's record says its Record did.
type recordStats struct {
	ID    uint64 `json:"id"`
	Label string `json:"label"`
	Stats struct {
		FilesRead    int           `json:"files_read"`
		BytesRead    int64         `json:"bytes_read"`
		BytesWritten int64         `json:"bytes_written"`
		NewObjects   int           `json:"new_objects"`
		Duration     time.Duration `json:"duration_ns"`
	} `json:"stats"`
}

// newestRecord reads the newest checkpoint record of session id's
// workspace from the engine's state directory.
func (b *bench) newestRecord(id string) recordStats {
	dir := filepath.Join(b.work, "state", "checkpoints", id, "checkpoints")
	ents, err := os.ReadDir(dir)
	check(err)
	var newest uint64
	for _, e := range ents {
		if n, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".json"), 10, 64); err == nil && n > newest {
			newest = n
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.json", newest)))
	check(err)
	var r recordStats
	check(json.Unmarshal(data, &r))
	return r
}

// bigSession runs a session whose workspace holds mb MiB of random data
// in files of fileMB MiB, 20 to a directory, and waits for its first
// (full) checkpoint.
func (b *bench) bigSession(ctx context.Context, c *client.Client, project, image string, mb, fileMB int) string {
	fill := fmt.Sprintf("n=0; while [ $n -lt %d ]; do d=d$((n/20)); mkdir -p $d; head -c %d /dev/urandom > $d/f$((n%%20)); n=$((n+1)); done", mb/fileMB, fileMB<<20)
	out, err := b.cmd(b.bin, "run", "--project", project, "--image", image, "--workspace-size", fmt.Sprintf("%dm", mb+mb/4+64),
		"--memory", fmt.Sprintf("%dm", 2*mb+256), "--", "sh", "-c", fill).CombinedOutput()
	check(errorf(err, out))
	m := sessionRE.FindStringSubmatch(string(out))
	if m == nil {
		check(fmt.Errorf("no session id in %q", out))
	}
	_, err = c.Checkpoints(ctx, m[1]) // waits for the command's checkpoint
	check(err)
	return m[1]
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// checkpoints is benchmark 18: checkpoints (issue 14) against the full
// snapshot, hibernation against a stopped container, and what
// hibernated sessions hold.
func (b *bench) checkpoints(runs int) {
	c := client.New(b.socket)
	ctx := context.Background()
	project := filepath.Join(b.work, "p18")
	check(os.MkdirAll(project, 0o755))
	b.log("### 18. Checkpoints and hibernation")
	b.log("")

	// (a) A command that changed 10 files in a 1 GB workspace.
	id := b.bigSession(ctx, c, project, "airlock/tiny", 1024, 1)
	var cpTime []time.Duration
	var cpWritten, cpRead int64
	var cpFiles int
	for i := 0; i < runs; i++ {
		before := b.newestRecord(id).ID
		b.must("exec", id, "--", "sh", "-c", fmt.Sprintf("for d in 0 1 2 3 4 5 6 7 8 9; do head -c 102400 /dev/urandom > d$d/f%d; done", i))
		_, err := c.Checkpoints(ctx, id)
		check(err)
		r := b.newestRecord(id)
		if r.ID == before {
			check(fmt.Errorf("no checkpoint after a command that changed 10 files (newest %d)", r.ID))
		}
		cpTime = append(cpTime, r.Stats.Duration)
		cpWritten, cpRead, cpFiles = r.Stats.BytesWritten, r.Stats.BytesRead, r.Stats.FilesRead
	}
	var snapTime []time.Duration
	var snapBytes int64
	for i := 0; i < min(runs, 2); i++ {
		t := time.Now()
		s, err := c.Snapshot(ctx, id, api.SnapshotRequest{})
		check(err)
		snapTime = append(snapTime, time.Since(t))
		snapBytes = 0
		for _, l := range s.Layers {
			snapBytes += l.Size
		}
		check(c.RemoveSnapshot(ctx, s.ID))
	}
	check(c.Remove(ctx, id))
	b.log("A session's workspace holds 1 GiB of random data (1,024 files of 1 MiB in 52 directories, tmpfs); a command rewrites 10 of them (100 KiB each). The checkpoint recorded as the command ends (its record's own time and bytes; %d runs) against `airlock snapshot` of the same session (%d runs, layer bytes).", runs, min(runs, 2))
	b.log("")
	b.log("| | p50 time | bytes read | bytes written |")
	b.log("|---|---|---|---|")
	b.log("| checkpoint after the command (%d files read) | %s | %s | %s |", cpFiles, ms(pct(cpTime, .5)), megabytes(cpRead), megabytes(cpWritten))
	b.log("| `airlock snapshot ID` | %s | | %s |", ms(pct(snapTime, .5)), megabytes(snapBytes))
	b.log("")

	// (b) Wake of a hibernated 500 MB workspace to its first command
	// (b.image: its date prints nanoseconds).
	id = b.bigSession(ctx, c, project, b.image, 500, 10)
	plain := "airlock-bench-wake"
	fill := "mkdir -p /data && cd /data && if [ ! -e /done ]; then i=0; while [ $i -lt 50 ]; do head -c 10485760 /dev/urandom > f$i; i=$((i+1)); done; touch /done; fi; exec sleep 3600"
	runOutCmd("docker", "rm", "-f", plain)
	_, err := runOutCmd("docker", "run", "-d", "--name", plain, b.image, "sh", "-c", fill)
	check(err)
	defer runOutCmd("docker", "rm", "-f", plain)
	waitFor(func() bool {
		_, err := runOutCmd("docker", "exec", plain, "test", "-e", "/done")
		return err == nil
	})
	var hib, wake, wakeTotal, dstart, dstartTotal, next []time.Duration
	var nextRead int64
	var nextFiles int
	for i := 0; i < runs; i++ {
		hib = append(hib, timeIt(func() { b.must("hibernate", id) }))
		w, wt := startLatency(b.cmd(b.bin, "exec", id, "--", "date", "+%s%N"))
		wake, wakeTotal = append(wake, w), append(wakeTotal, wt)
		// The checkpoint after the wake reads only what changed since.
		b.must("exec", id, "--", "sh", "-c", fmt.Sprintf("head -c 1048576 /dev/urandom > d0/f%d", i))
		_, err := c.Checkpoints(ctx, id)
		check(err)
		r := b.newestRecord(id)
		next, nextRead, nextFiles = append(next, r.Stats.Duration), r.Stats.BytesRead, r.Stats.FilesRead

		_, err = runOutCmd("docker", "stop", "-t", "0", plain)
		check(err)
		d, dt := startLatency(b.cmd("sh", "-c", "docker start "+plain+" >/dev/null && docker exec "+plain+" date +%s%N"))
		dstart, dstartTotal = append(dstart, d), append(dstartTotal, dt)
	}
	check(c.Remove(ctx, id))
	b.log("A session (%s) with 500 MiB of random data in its workspace (50 files of 10 MiB) is hibernated and woken by `airlock exec ID -- date` (%d runs); Docker's counterpart is a stopped container holding the same bytes in its own filesystem, `docker start` then `docker exec C date`. Time to first command is the command's clock minus the launch.", b.image, runs)
	b.log("")
	b.log("| | to first command p50 | whole p50 |")
	b.log("|---|---|---|")
	b.log("| `airlock exec` of a hibernated session (wakes it) | %s | %s |", ms(pct(wake, .5)), ms(pct(wakeTotal, .5)))
	b.log("| `docker start C` + `docker exec C date` | %s | %s |", ms(pct(dstart, .5)), ms(pct(dstartTotal, .5)))
	b.log("")
	b.log("`airlock hibernate ID` p50: %s. The first checkpoint after the wake (1 file of 1 MiB changed): p50 %s, %d file(s) and %s read.", ms(pct(hib, .5)), ms(pct(next, .5)), nextFiles, megabytes(nextRead))
	b.log("")

	// (c) What 20 hibernated sessions hold.
	const n = 20
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, b.newSession(project, "airlock/tiny", "head -c 1048576 /dev/urandom > data.bin; echo new > b.txt"))
	}
	liveTmpfs, liveContainers := b.sessionTmpfs(), b.sessionContainers(ids)
	for _, id := range ids {
		b.must("hibernate", id)
	}
	var disk int64
	for _, id := range ids {
		s, err := c.Session(ctx, id)
		check(err)
		if s.State != api.StateHibernated || s.Hibernation == nil {
			check(fmt.Errorf("session %s is %s after hibernate", id, s.State))
		}
		disk += s.Hibernation.DiskBytes
	}
	hibTmpfs, hibContainers := b.sessionTmpfs(), b.sessionContainers(ids)
	for _, id := range ids {
		b.must("rm", id)
	}
	b.log("%d sessions, each with 1 MiB written in its workspace, live and then hibernated:", n)
	b.log("")
	b.log("| | tmpfs in use | containers | on disk |")
	b.log("|---|---|---|---|")
	b.log("| live | %s | %d | |", megabytes(liveTmpfs), liveContainers)
	b.log("| hibernated | %s | %d | %s |", megabytes(hibTmpfs), hibContainers, megabytes(disk))
	b.log("")
}

// sessionTmpfs is the bytes in use in the tmpfs mounts beneath the
// engine's state directory (the sessions' workspaces), as the engine
// sees its mounts.
func (b *bench) sessionTmpfs() int64 {
	v, err := client.New(b.socket).Ping(context.Background())
	check(err)
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", v.PID))
	check(err)
	defer f.Close()
	state := filepath.Join(b.work, "state") + "/"
	var used int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || fields[sep+1] != "tmpfs" || !strings.HasPrefix(fields[4], state) {
			continue
		}
		var st unix.Statfs_t
		if unix.Statfs(fmt.Sprintf("/proc/%d/root%s", v.PID, fields[4]), &st) == nil {
			used += int64(st.Blocks-st.Bfree) * st.Bsize
		}
	}
	return used
}

// sessionContainers counts the containers, running or not, of the
// sessions ids.
func (b *bench) sessionContainers(ids []string) int {
	out, err := runOutCmd("docker", "ps", "-a", "--format", "{{.Names}}")
	check(err)
	names := map[string]bool{}
	for _, n := range strings.Fields(out) {
		names[n] = true
	}
	count := 0
	for _, id := range ids {
		if names["airlock-"+id] {
			count++
		}
	}
	return count
}
