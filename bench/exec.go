package main

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock/airlock/engine/client"
)

// execVsDockerExec is benchmark 17: `airlock exec ID -- true` (through
// the session's init when the engine has bin/airlock-init beside it)
// against `docker exec C true` on the same container, alternating.
func (b *bench) execVsDockerExec(runs int) {
	project := filepath.Join(b.work, "p17")
	check(os.MkdirAll(project, 0o755))
	id := b.newSession(project, "airlock/tiny", "true")
	s, err := client.New(b.socket).Session(context.Background(), id)
	check(err)
	var al, dk []time.Duration
	for i := 0; i < runs+2; i++ {
		a := timeIt(func() { b.must("exec", id, "--", "true") })
		d := timeIt(func() {
			_, err := runOutCmd("docker", "exec", s.ContainerID, "true")
			check(err)
		})
		if i >= 2 { // the first runs warm caches
			al, dk = append(al, a), append(dk, d)
		}
	}
	b.must("rm", id)
	b.log("### 17. `airlock exec` vs `docker exec` (airlock/tiny, %d runs)", runs)
	b.log("")
	b.log("| | p50 | p95 |")
	b.log("|---|---|---|")
	b.log("| `airlock exec ID -- true` | %s | %s |", ms(pct(al, .5)), ms(pct(al, .95)))
	b.log("| `docker exec C true` | %s | %s |", ms(pct(dk, .5)), ms(pct(dk, .95)))
	b.log("")
	b.log("Ratio airlock/docker, p50: **%.2f** (target ≤ 0.3); p95: %.2f.", float64(pct(al, .5))/float64(pct(dk, .5)), float64(pct(al, .95))/float64(pct(dk, .95)))
	b.log("")
}
