// Command soak runs Airlock's fault-injection soak (`make soak SEED=…
// DURATION=…`): it prints the seed first, and at the end the faults
// injected by kind, the operations run, the invariant checks and the
// violations; on a violation it saves the operation log that led to it
// and exits 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/airlock/airlock/soak"
)

func main() {
	seed := flag.Uint64("seed", 0, "the schedule's seed (0: a new one, printed)")
	duration := flag.Duration("duration", 5*time.Minute, "how long the soak starts new steps")
	cli := flag.String("airlock", "bin/airlock", "the airlock binary to serve and drive")
	dir := flag.String("dir", "", "the soak's directory, kept afterwards (default: a new one under /tmp)")
	sessions := flag.Int("sessions", 4, "sessions alive at most at once")
	quiet := flag.Bool("q", false, "no line per step")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	fmt.Printf("soak seed %d (again: make soak SEED=%d)\n", *seed, *seed)
	bin, err := filepath.Abs(*cli)
	if err != nil {
		fatal(err)
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "airlock-soak-"); err != nil {
			fatal(err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := soak.Options{Seed: *seed, Duration: *duration, CLI: bin, Dir: *dir, Sessions: *sessions, Progress: os.Stdout}
	if *quiet {
		o.Progress = nil
	}
	fig, err := soak.Run(ctx, o)
	if fig != nil {
		fmt.Printf("seed %d, %d steps in %v (dir %s)\n", fig.Seed, fig.Steps, fig.Took.Round(time.Second), *dir)
		fmt.Printf("faults: %s\n", counts(fig.Faults))
		fmt.Printf("operations: %s\n", counts(fig.Ops))
		fmt.Printf("invariant checks: %d (workspace digests with no checkpoint known to compare: %d)\n", fig.Checks, fig.Unverified)
		fmt.Printf("violations: %d\n", len(fig.Violations))
		for _, v := range fig.Violations {
			fmt.Printf("  %s\n", v)
		}
		fmt.Printf("operation log: %s\n", fig.OpLog)
	}
	if err != nil {
		if errors.Is(err, soak.ErrViolation) {
			os.Exit(1)
		}
		fatal(err)
	}
}

func counts(m map[string]int) string {
	s, total := "", 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s += fmt.Sprintf(" %s %d", k, m[k])
		total += m[k]
	}
	return fmt.Sprintf("%d:%s", total, s)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "soak:", err)
	os.Exit(2)
}
