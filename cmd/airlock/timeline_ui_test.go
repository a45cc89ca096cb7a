package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/chromedp/chromedp"
)

// TestBrowserTimeline: a real session with two agent turns and a command;
// the Agent tab's timeline lists them newest first, a turn shows its own
// diff (not the other turn's), and Undo to here puts the workspace back
// and says what it did; a fork from a turn links to the new session; the
// review names the turn beside each hunk; the header hibernates and wakes
// the session. AIRLOCK_SCREENSHOTS keeps the screenshots.
func TestBrowserTimeline(t *testing.T) {
	c := newCLI(t)
	d := enginetest.Require(t)
	enginetest.TinyImage(t, d)
	ctx := browser(t)
	p := sampleProject(t)

	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "true")
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("run did not print the session id: %q", errs)
	}
	id := m[1]
	c.ok("agent", id, "--agent", "custom", "--cmd", "echo one > turn.txt; echo {prompt} >/dev/null", "first")
	c.ok("agent", id, "--agent", "custom", "--cmd", "echo two >> turn.txt; sed -i s/hello/hi/ src/app.py; echo {prompt} >/dev/null", "second")
	c.ok("exec", id, "--", "sh", "-c", "echo built > out.txt")
	u := strings.TrimSpace(c.ok("ui", "--no-open"))

	var items []string
	step(t, ctx, "the Agent tab's timeline",
		chromedp.Navigate(u+"#/s/"+id+"/agent"),
		clickText(".agent-views", "Timeline"),
		chromedp.WaitVisible(`.turns .timeline li`),
		chromedp.Evaluate(`[...document.querySelectorAll(".turns .timeline li b")].map((b) => b.textContent)`, &items),
	)
	if len(items) != 3 || items[1] != "Turn 2" || items[2] != "Turn 1" || !strings.HasPrefix(items[0], "Command") {
		t.Errorf("the timeline lists %q, want the command, Turn 2, Turn 1", items)
	}

	var shown string
	step(t, ctx, "turn 2's diff",
		chromedp.Evaluate(`[...document.querySelectorAll(".turns .timeline li")].find((l) => l.querySelector("b").textContent === "Turn 2").click()`, nil),
		chromedp.WaitVisible(`.turn-file[data-path="src/app.py"] .d2h-wrapper`),
		chromedp.Text(`.turn-view`, &shown),
		screenshot(t, "timeline"),
	)
	if !strings.Contains(shown, "two") || !strings.Contains(shown, "return 'hi'") || strings.Contains(shown, "out.txt") {
		t.Errorf("turn 2's diff shows:\n%s", shown)
	}

	var note string
	step(t, ctx, "undo to turn 1",
		chromedp.Evaluate(`[...document.querySelectorAll(".turns .timeline li")].find((l) => l.querySelector("b").textContent === "Turn 1").click()`, nil),
		chromedp.WaitVisible(`.turn-file[data-path="turn.txt"]`),
		chromedp.Evaluate(`window.confirm = () => true`, nil),
		clickText(".turn-view", "Undo to here"),
		chromedp.WaitVisible(`.callout.undone`),
		chromedp.Text(`.callout.undone`, &note),
	)
	if !strings.Contains(note, "Back to the state after Turn 1") {
		t.Errorf("the undo says %q", note)
	}
	if out := c.ok("exec", id, "--", "cat", "turn.txt"); out != "one\n" {
		t.Errorf("after the undo turn.txt is %q, want turn 1's", out)
	}

	// Fork from turn 1: a link to the new session, which opens it.
	var forked string
	step(t, ctx, "fork from turn 1",
		clickText(".turn-view", "Fork from here"),
		chromedp.WaitVisible(`.callout.forked a`),
		chromedp.Text(`.callout.forked a`, &forked),
		chromedp.Click(`.callout.forked a`),
		chromedp.Poll(`location.hash.startsWith("#/s/`+forked+`")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
	)
	if len(forked) != 12 || strings.HasPrefix(id, forked) {
		t.Errorf("the fork links to %q", forked)
	}

	// The review names the turn that last changed each hunk.
	var marks []string
	step(t, ctx, "blame beside the hunks",
		chromedp.Navigate(u+"#/s/"+id+"/review/turn.txt"),
		chromedp.WaitVisible(`.hunk .blame`),
		chromedp.Evaluate(`[...document.querySelectorAll(".hunk .blame")].map((b) => b.textContent)`, &marks),
		screenshot(t, "review-blame"),
	)
	if strings.Join(marks, ",") != "turn 1" {
		t.Errorf("turn.txt's hunks are marked %q, want turn 1", marks)
	}

	// Hibernate and wake from the session's header.
	step(t, ctx, "hibernate and wake",
		chromedp.Evaluate(`window.confirm = () => true`, nil),
		clickText(".session-header", "Hibernate"),
		chromedp.WaitVisible(`.session-header .pill.hibernated`),
		screenshot(t, "hibernated"),
		clickText(".session-header", "Wake"),
		chromedp.WaitVisible(`.session-header .pill.running`),
	)
}

// screenshot saves the page as name.png in AIRLOCK_SCREENSHOTS, or in the
// test's temporary directory, and logs where.
func screenshot(t *testing.T, name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		dir := os.Getenv("AIRLOCK_SCREENSHOTS")
		if dir == "" {
			dir = t.TempDir()
		}
		time.Sleep(300 * time.Millisecond) // the diff's highlighting settles
		var buf []byte
		if err := chromedp.CaptureScreenshot(&buf).Do(ctx); err != nil {
			return err
		}
		path := filepath.Join(dir, name+".png")
		t.Logf("screenshot %s", path)
		return os.WriteFile(path, buf, 0o644)
	})
}
