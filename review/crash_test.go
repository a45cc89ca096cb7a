package review_test

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/review"
)

const crashFiles = 300

// TestHelperAccept is the process the crash test kills: it accepts every
// change of the layers named in the environment.
func TestHelperAccept(t *testing.T) {
	dir := os.Getenv("AIRLOCK_CRASH_DIR")
	if dir == "" {
		t.Skip("helper process for TestAcceptSurvivesKill")
	}
	l := review.Layers{Upper: filepath.Join(dir, "upper"), Project: filepath.Join(dir, "project")}
	diffs, err := review.Review(l)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "started"), nil, 0o644)
	if _, err := review.Accept(l, diffs, review.Selection{}, filepath.Join(dir, "accept.journal")); err != nil {
		t.Fatal(err)
	}
}

func crashSetup(t *testing.T) string {
	dir := t.TempDir()
	for i := 0; i < crashFiles; i++ {
		name := fmt.Sprintf("d%d/f%03d.txt", i%7, i)
		write(t, filepath.Join(dir, "project", name), fmt.Sprintf("old %d\n%s", i, strings.Repeat("o", 2000)), 0o644)
		write(t, filepath.Join(dir, "upper", name), fmt.Sprintf("new %d\n%s", i, strings.Repeat("n", 3000)), 0o644)
	}
	for i := 0; i < 20; i++ {
		write(t, filepath.Join(dir, "upper", fmt.Sprintf("added/a%02d.txt", i)), "added\n", 0o644)
	}
	return dir
}

// state reads the project: how many files are old and how many new, and
// anything an accept may have left behind.
func crashState(t *testing.T, dir string) (old, new, added int, leftovers []string) {
	p := filepath.Join(dir, "project")
	filepath.Walk(p, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		base := filepath.Base(path)
		if strings.HasPrefix(base, ".airlock") {
			leftovers = append(leftovers, path)
		}
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(path)
			switch {
			case strings.HasPrefix(string(b), "old "):
				old++
			case strings.HasPrefix(string(b), "new "):
				new++
			case string(b) == "added\n":
				added++
			default:
				leftovers = append(leftovers, path+" (torn: "+fmt.Sprint(len(b))+" bytes)")
			}
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir, "accept.journal")); err == nil {
		leftovers = append(leftovers, "accept.journal")
	}
	return
}

// TestAcceptSurvivesKill kills the accepting process at random points and
// checks that recovery leaves the accept all done or not done at all, with
// every file whole.
func TestAcceptSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 50 processes: skipped with -short")
	}
	// How long an uninterrupted accept takes, to spread the kills over it.
	dir := crashSetup(t)
	start := time.Now()
	runHelper(t, dir, -1)
	full := time.Since(start)
	if old, new, added, left := crashState(t, dir); old != 0 || new != crashFiles || added != 20 || len(left) > 0 {
		t.Fatalf("uninterrupted accept: old %d new %d added %d leftovers %v", old, new, added, left)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var before, after, midway int
	for trial := 0; trial < 50; trial++ {
		dir := crashSetup(t)
		delay := time.Duration(rng.Int63n(int64(full)))
		runHelper(t, dir, delay)
		if err := review.Recover(filepath.Join(dir, "accept.journal")); err != nil {
			t.Fatalf("trial %d: recover: %v", trial, err)
		}
		old, new, added, left := crashState(t, dir)
		if len(left) > 0 {
			t.Fatalf("trial %d (kill after %v): left behind %v", trial, delay, left)
		}
		switch {
		case old == crashFiles && new == 0 && added == 0:
			before++
		case old == 0 && new == crashFiles && added == 20:
			after++
		default:
			midway++
			t.Errorf("trial %d (kill after %v): half an accept: %d old, %d new, %d added", trial, delay, old, new, added)
		}
	}
	t.Logf("50 kills over %v: %d rolled back, %d finished, %d torn", full, before, after, midway)
}

// runHelper runs the accepting process and kills it after delay (never
// when delay < 0).
func runHelper(t *testing.T, dir string, delay time.Duration) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAccept$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AIRLOCK_CRASH_DIR="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if delay >= 0 {
		// Count from when the helper starts accepting, not from exec.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
	}
	cmd.Wait()
}
