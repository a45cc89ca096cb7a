package checkpoint

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be the child that TestKillDuringRecord
// kills.
func TestMain(m *testing.M) {
	if os.Getenv("CHECKPOINT_CRASH_CHILD") != "" {
		crashChild(os.Getenv("CHECKPOINT_STORE"), os.Getenv("CHECKPOINT_DIR"))
		return
	}
	os.Exit(m.Run())
}

// crashChild changes files and records checkpoints until it is killed,
// saying "recorded N" after each.
func crashChild(store, dir string) {
	s, err := Open(store)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		for j := range 8 {
			p := filepath.Join(dir, fmt.Sprintf("d%d/f%d", j, (i+j)%16))
			os.WriteFile(p, []byte(strings.Repeat(fmt.Sprint(i, j), 40000)), 0o644)
		}
		c, err := s.RecordDir(context.Background(), dir, RecordOptions{Label: fmt.Sprint("round ", i)})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("recorded", c.ID)
	}
}

// TestKillDuringRecord: kill -9 at random points of Records: the store
// lists only complete checkpoints (each restores), and the next Record
// is complete.
func TestKillDuringRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir, store := t.TempDir(), t.TempDir()
	for j := range 8 {
		for f := range 16 {
			write(t, filepath.Join(dir, fmt.Sprintf("d%d/f%d", j, f)), strings.Repeat("x", 100000))
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CHECKPOINT_CRASH_CHILD=1", "CHECKPOINT_STORE="+store, "CHECKPOINT_DIR="+dir)
		out, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		lines := bufio.NewScanner(out)
		// Let it record a few, then kill it somewhere inside the next.
		for range 1 + rng.IntN(3) {
			if !lines.Scan() {
				t.Fatalf("the child stopped: %v", lines.Err())
			}
			if l := lines.Text(); !strings.HasPrefix(l, "recorded") {
				t.Fatalf("the child said %q", l)
			}
		}
		time.Sleep(time.Duration(rng.IntN(40000)) * time.Microsecond)
		must(t, cmd.Process.Kill())
		cmd.Wait()

		s, err := Open(store)
		must(t, err)
		list, err := s.List()
		must(t, err)
		if len(list) == 0 {
			t.Fatalf("round %d: nothing listed", round)
		}
		for _, c := range list {
			target := t.TempDir()
			if err := s.RestoreDir(context.Background(), c.ID, target); err != nil {
				t.Fatalf("round %d: checkpoint %v is listed and does not restore: %v", round, c.ID, err)
			}
		}
		if tmp, _ := os.ReadDir(filepath.Join(store, "tmp")); len(tmp) != 0 {
			t.Errorf("round %d: Open left %d temporary files", round, len(tmp))
		}
		n, _, err := s.GC()
		must(t, err)
		t.Logf("round %d: %d checkpoints listed, %d orphan objects collected", round, len(list), n)
		want := describe(t, dir)
		c := record(t, s, dir)
		sameTree(t, fmt.Sprintf("round %d: checkpoint after the kill", round), want, restored(t, s, c.ID))
		if _, err := s.Prune(PruneOptions{Keep: 2}); err != nil {
			t.Fatal(err)
		}
	}
}
