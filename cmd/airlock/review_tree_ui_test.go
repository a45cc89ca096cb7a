package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// watchPage records in the page, from its start, the main thread's long
// tasks (over 50 ms: PerformanceObserver longtask) and when the review's
// first file row appears.
const watchPage = `
window.__long = [];
new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push([e.startTime, e.duration]); })
  .observe({ type: "longtask", buffered: true });
window.__firstRow = 0;
new MutationObserver((_, o) => {
  if (document.querySelector(".filetree li[data-path]")) { window.__firstRow = performance.now(); o.disconnect(); }
}).observe(document, { childList: true, subtree: true });
`

// TestBrowserReviewTree: a session that changed 10,000 files in 100
// folders (and installed 600 files under node_modules/, which the
// project's .gitignore ignores), reviewed in headless Chromium: the first
// rows appear while the diff still streams in, every row scrolls into
// view, the folders count their files and fold, the filter narrows the
// list; the ignored paths are a folded summary, listed on demand, those
// only a rule the session wrote ignores flagged apart; the lockfile is
// folded; Accept all says what it leaves and leaves it. It logs how long the
// first row took and the longest main-thread task while the review loaded
// and while every row was scrolled through (what issue 25 asks under
// 100 ms); it asserts none of these times.
func TestBrowserReviewTree(t *testing.T) {
	c := newCLI(t)
	d := enginetest.Require(t)
	enginetest.TinyImage(t, d)
	ctx := browser(t)
	p := sampleProject(t)
	os.WriteFile(filepath.Join(p, ".gitignore"), []byte("node_modules/\ndist/\n"), 0o644)
	os.WriteFile(filepath.Join(p, "package-lock.json"), []byte("{\n  \"lockfileVersion\": 3\n}\n"), 0o644)

	make10k := `d=0; while [ $d -lt 100 ]; do mkdir -p pkg$d; f=0; while [ $f -lt 100 ]; do echo "export const v = $d$f;" > pkg$d/f$f.js; f=$((f+1)); done; d=$((d+1)); done; sed -i s/hello/hi/ src/app.py; ` +
		`n=0; while [ $n -lt 20 ]; do mkdir -p node_modules/dep$n/lib; f=0; while [ $f -lt 30 ]; do echo "module.exports = $f;" > node_modules/dep$n/lib/m$f.js; f=$((f+1)); done; n=$((n+1)); done; ` +
		`mkdir -p dist web/build; echo bundle > dist/app.js; echo map > dist/app.js.map; printf 'build/\n' > web/.gitignore; for f in a b c; do echo $f > web/build/$f.js; done; ` +
		`printf '{\n  "lockfileVersion": 3,\n  "packages": {}\n}\n' > package-lock.json`
	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", make10k)
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("run did not print the session id: %q", errs)
	}
	id := m[1]
	u := strings.TrimSpace(c.ok("ui", "--no-open"))

	// Open the session on another tab, then the review: from the click
	// to the first row is what a user waits.
	var t0, first float64
	var net struct {
		FirstByte float64 `json:"first_byte"`
		End       float64 `json:"end"`
		Bytes     float64 `json:"bytes"`
	}
	var loadLong [][2]float64
	var summary string
	step(t, ctx, "open the review",
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(watchPage).Do(ctx)
			return err
		}),
		chromedp.Navigate(u+"#/s/"+id+"/usage"),
		chromedp.WaitVisible(`.tabs`),
		chromedp.Evaluate(`window.__firstRow = 0; window.__t0 = performance.now(); [...document.querySelectorAll(".tabs button")].find((b) => b.textContent.startsWith("Review")).click(); window.__t0`, &t0),
		chromedp.WaitVisible(`.filetree li[data-path]`),
		chromedp.Poll(`document.querySelector("[data-summary]").textContent.startsWith("10,003 changed")`, nil),
		chromedp.Evaluate(`window.__firstRow`, &first),
		chromedp.Evaluate(`window.__long.filter(([s]) => s >= window.__t0)`, &loadLong),
		chromedp.Text(`[data-summary]`, &summary),
		chromedp.Evaluate(`(() => { const e = performance.getEntriesByType("resource").find((e) => /\/diff$/.test(e.name));
			return e ? { first_byte: e.responseStart - window.__t0, end: e.responseEnd - window.__t0, bytes: e.encodedBodySize } : {}; })()`, &net),
	)

	// Scroll through every row, a screen a frame, noting each row shown.
	var scrolled struct {
		Files int     `json:"files"`
		Dirs  int     `json:"dirs"`
		Steps int     `json:"steps"`
		Start float64 `json:"start"`
	}
	step(t, ctx, "scroll every row",
		chromedp.Evaluate(`(async () => {
			const list = document.querySelector(".filetree > .tree-rows");
			const files = new Set(), dirs = new Set();
			const start = performance.now();
			let steps = 0;
			for (;;) {
				for (const li of list.querySelectorAll("li[data-path]")) files.add(li.dataset.path);
				for (const li of list.querySelectorAll("li[data-dir]")) dirs.add(li.dataset.dir + " " + li.querySelector(".count").textContent);
				if (list.scrollTop + list.clientHeight >= list.scrollHeight) break;
				list.scrollTop += list.clientHeight;
				steps++;
				await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
			}
			return { files: files.size, dirs: [...dirs].filter((d) => d.endsWith(" 100")).length, steps, start };
		})()`, &scrolled, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	)
	var scrollLong [][2]float64
	step(t, ctx, "the tasks while scrolling",
		chromedp.Evaluate(fmt.Sprintf(`window.__long.filter(([s]) => s >= %f)`, scrolled.Start), &scrollLong))

	if scrolled.Files != 10_003 || scrolled.Dirs != 100 {
		t.Errorf("scrolled through %d files and %d folders of 100, want 10,003 and 100", scrolled.Files, scrolled.Dirs)
	}
	if !strings.HasPrefix(summary, "10,003 changed") {
		t.Errorf("the summary says %q", summary)
	}
	longest := func(ts [][2]float64) (ms float64) {
		for _, x := range ts {
			ms = max(ms, x[1])
		}
		return ms
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("the diff: %.1f MB, its first byte %.0f ms after opening, its last %.0f ms", net.Bytes/1e6, net.FirstByte, net.End)
	t.Logf("review of 10,003 files: first row %.0f ms after opening; longest main-thread task %.0f ms while loading (%d over 50 ms), %.0f ms while scrolling %d screens (%d over 50 ms); load average %s",
		first-t0, longest(loadLong), len(loadLong), longest(scrollLong), scrolled.Steps, len(scrollLong), strings.Join(strings.Fields(string(load))[:3], " "))

	// Folders fold (their count stays), the filter narrows, the keyboard
	// walks across folders.
	var rows, foldedCount, shown int
	var header string
	step(t, ctx, "fold, filter and walk",
		chromedp.Evaluate(`document.querySelector(".filetree > .tree-rows").scrollTop = 0`, nil),
		chromedp.WaitVisible(`li[data-dir="pkg0"]`),
		chromedp.Click(`li[data-dir="pkg0"]`),
		chromedp.Poll(`document.querySelector('li[data-dir="pkg0"]').getAttribute("aria-expanded") === "false"`, nil),
		chromedp.Evaluate(`document.querySelectorAll('.filetree li[data-path^="pkg0/"]').length`, &rows),
		chromedp.Evaluate(`+document.querySelector('li[data-dir="pkg0"] .count').textContent`, &foldedCount),
		chromedp.Click(`li[data-dir="pkg1"]`),
		shoot("review-tree"),
		chromedp.Click(`li[data-dir="pkg1"]`),
		setField(`.tree-filter`, "pkg42/"),
		chromedp.Poll(`document.querySelector("[data-summary]").textContent.includes("100 shown")`, nil),
		chromedp.Evaluate(`+document.querySelector(".filetree > .tree-rows ul").dataset.rows`, &shown),
		chromedp.Focus(`.filetree > .tree-rows`),
		chromedp.KeyEvent(kb.End),
		chromedp.Poll(`document.querySelector(".file-header h3").textContent === "pkg42/f99.js"`, nil),
		chromedp.Text(`.file-header h3`, &header),
		setField(`.tree-filter`, ""),
	)
	if rows != 0 || foldedCount != 100 {
		t.Errorf("folded pkg0/ shows %d of its files and counts %d, want 0 and 100", rows, foldedCount)
	}
	if shown != 101 {
		t.Errorf("the filter pkg42/ shows %d rows, want its folder and 100 files", shown)
	}

	// The lockfile: listed with a badge, its changes folded behind a click.
	var lock string
	var hunks int
	step(t, ctx, "the lockfile folded",
		setField(`.tree-filter`, "lock"),
		chromedp.Click(`li[data-path="package-lock.json"]`),
		chromedp.WaitVisible(`.generated`),
		chromedp.Text(`.generated`, &lock),
		chromedp.Evaluate(`document.querySelectorAll(".filediff .hunk").length`, &hunks),
		clickText(".generated", "Show the changes"),
		chromedp.WaitVisible(`.filediff .hunk .d2h-wrapper`),
		setField(`.tree-filter`, ""),
	)
	if !strings.Contains(lock, "Generated (lockfile)") || hunks != 0 {
		t.Errorf("the lockfile shows %q with %d hunks open, want it folded", lock, hunks)
	}

	// The ignored paths: a folded summary of where and by which rule,
	// listed on demand; the session's own rule's apart.
	var project, session string
	var listed int
	step(t, ctx, "the ignored sections",
		chromedp.WaitVisible(`details[data-ignored="project"] summary`),
		chromedp.Text(`details[data-ignored="session"] summary`, &session),
		chromedp.Click(`details[data-ignored="project"] summary`),
		chromedp.WaitVisible(`details[data-ignored="project"] .ignored-dirs`),
		clickText(`details[data-ignored="project"]`, "List them"),
		chromedp.WaitVisible(`details[data-ignored="project"] li[data-dir]`),
		chromedp.Click(`details[data-ignored="project"] li[data-dir="node_modules"]`),
		chromedp.WaitVisible(`details[data-ignored="project"] li[data-dir="node_modules/dep0/lib"]`),
		chromedp.Evaluate(`+document.querySelector('details[data-ignored="project"] .tree-rows ul').dataset.rows`, &listed),
		chromedp.Click(`details[data-ignored="project"] li[data-dir="node_modules/dep0/lib"]`),
		chromedp.Click(`details[data-ignored="project"] li[data-path="node_modules/dep0/lib/m0.js"]`),
		chromedp.WaitVisible(`.filediff .callout.info`),
		chromedp.Text(`details[data-ignored="project"]`, &project),
		shoot("review-ignored"),
	)
	if !strings.Contains(project, "602 paths") || !strings.Contains(project, "node_modules/") || !strings.Contains(project, ".gitignore:1") {
		t.Errorf("the ignored section says:\n%s", project)
	}
	if !strings.Contains(session, "Ignored by a rule this session added") || !strings.Contains(session, "3 paths") {
		t.Errorf("the session's ignored section says %q", session)
	}
	if listed != 22 {
		t.Errorf("the ignored list shows %d rows, want dist/, node_modules/ and its 20 packages (folded)", listed)
	}

	// Accept all says what it leaves, and leaves it.
	var leaves string
	step(t, ctx, "accept all",
		clickText(".tree-actions", "Accept all"),
		chromedp.WaitVisible(`.dialog.accept-all`),
		chromedp.Text(`.dialog.accept-all`, &leaves),
		clickText(".dialog.accept-all", "Accept all shown"),
		chromedp.WaitVisible(`.callout.left`),
	)
	if !strings.Contains(leaves, "602 paths") || !strings.Contains(leaves, "ignored only by a rule this session added") {
		t.Errorf("Accept all says it leaves:\n%s", leaves)
	}
	waitFile(t, filepath.Join(p, "pkg99/f99.js"), "export const v = 9999;\n")
	for _, gone := range []string{"node_modules", "dist", "web/build"} {
		if _, err := os.Stat(filepath.Join(p, gone)); err == nil {
			t.Errorf("Accept all wrote the ignored %s/ into the project", gone)
		}
	}
}
