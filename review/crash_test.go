package review_test

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestHelperAcceptStep is the process TestAcceptKilledAtEachStep kills:
// it accepts everything of the layers named in the environment and kills
// itself with SIGKILL right after step AIRLOCK_CRASH_STEP (counted from
// 1; 0 never: it prints how many steps there were).
func TestHelperAcceptStep(t *testing.T) {
	dir := os.Getenv("AIRLOCK_CRASH_DIR")
	if dir == "" || os.Getenv("AIRLOCK_CRASH_STEP") == "" {
		t.Skip("helper process for TestAcceptKilledAtEachStep")
	}
	killAt, err := strconv.Atoi(os.Getenv("AIRLOCK_CRASH_STEP"))
	if err != nil {
		t.Fatal(err)
	}
	l := review.Layers{Upper: filepath.Join(dir, "upper"), Project: filepath.Join(dir, "project")}
	n := 0
	err = review.AcceptStepping(l, filepath.Join(dir, "accept.journal"), func(name string) {
		n++
		if killAt == 0 {
			fmt.Printf("step %d %s\n", n, name)
		}
		if n == killAt {
			fmt.Printf("killed after step %d (%s)\n", n, name)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("steps=%d\n", n)
}

// stepSetup is a project of 30 files the session modified, a file it added
// in an existing directory and a directory it added with a subdirectory
// (both staged whole and placed by one rename).
func stepSetup(t *testing.T) string {
	dir := t.TempDir()
	for i := 0; i < 30; i++ {
		name := fmt.Sprintf("d%d/f%02d.txt", i%3, i)
		write(t, filepath.Join(dir, "project", name), fmt.Sprintf("old %d\n%s", i, strings.Repeat("o", 2000)), 0o644)
		write(t, filepath.Join(dir, "upper", name), fmt.Sprintf("new %d\n%s", i, strings.Repeat("n", 3000)), 0o644)
	}
	for _, name := range []string{"d0/extra.txt", "added/a.txt", "added/b.txt", "added/sub/c.txt", "added/sub/deeper/d.txt", "added.txt"} {
		write(t, filepath.Join(dir, "upper", name), "added\n", 0o644)
	}
	return dir
}

// TestAcceptKilledAtEachStep kills the accepting process right after each
// of its steps that change the disk — staging done, staging synced, the
// journal committed, every operation (the renames of files and the
// placing of new directories), the sync after them, the staging
// directory's removal, the journal's — and checks that Recover then
// leaves the accept all done or not done at all, every file whole.
func TestAcceptKilledAtEachStep(t *testing.T) {
	if testing.Short() {
		t.Skip("kills dozens of processes: skipped with -short")
	}
	run := func(dir string, killAt int) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAcceptStep$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "AIRLOCK_CRASH_DIR="+dir, "AIRLOCK_CRASH_STEP="+strconv.Itoa(killAt))
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	dir := stepSetup(t)
	out := run(dir, 0)
	var steps int
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "steps="); ok {
			steps, _ = strconv.Atoi(v)
		}
	}
	// 32 files renamed in, added/ placed whole (4 files, one rename), and
	// at least 6 other steps.
	if steps < 39 || strings.Count(out, " place\n") != 1 || !strings.Contains(out, " committed\n") {
		t.Fatalf("the accept took %d steps, want at least 39 with one place (added/) and a commit:\n%s", steps, out)
	}
	if old, new, added, left := crashState(t, dir); old != 0 || new != 30 || added != 6 || len(left) > 0 {
		t.Fatalf("uninterrupted accept: old %d new %d added %d leftovers %v", old, new, added, left)
	}
	for k := 1; k <= steps; k++ {
		dir := stepSetup(t)
		out := run(dir, k)
		if !strings.Contains(out, "killed after step") {
			t.Fatalf("step %d: the helper was not killed:\n%s", k, out)
		}
		if err := review.Recover(filepath.Join(dir, "accept.journal")); err != nil {
			t.Fatalf("step %d: recover: %v", k, err)
		}
		old, new, added, left := crashState(t, dir)
		if len(left) > 0 {
			t.Fatalf("%s: left behind %v", strings.TrimSpace(out), left)
		}
		if !(old == 30 && new == 0 && added == 0) && !(old == 0 && new == 30 && added == 6) {
			t.Errorf("%s: half an accept after recovery: %d old, %d new, %d added", firstLine(out), old, new, added)
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
