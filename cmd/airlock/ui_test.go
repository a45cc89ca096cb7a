package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// browser starts headless Chromium (the system's) for a test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, p := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if lp, err := exec.LookPath(p); err == nil {
			path = lp
			break
		}
	}
	if path == "" {
		if os.Getenv("AIRLOCK_REQUIRE_INTEGRATION") != "" {
			t.Fatal("no Chromium: install it (`scripts/setup.sh desktop` does)")
		}
		t.Skip("no Chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 900), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.Logf("page exception: %s", e.ExceptionDetails.Error())
			if st := e.ExceptionDetails.StackTrace; st != nil {
				for _, f := range st.CallFrames {
					t.Logf("  at %s (%d:%d)", f.FunctionName, f.LineNumber+1, f.ColumnNumber+1)
				}
			}
		case *runtime.EventConsoleAPICalled:
			for _, a := range e.Args {
				if e.Type == runtime.APITypeError || e.Type == runtime.APITypeWarning {
					t.Logf("console %s: %s", e.Type, a.Value)
				}
			}
		}
	})
	// The browser starts with the first Run, and lives as long as its
	// context: this one, not a step's.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// step runs actions with a deadline; on failure the page's text says why.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Run(sctx, actions...); err != nil {
		shot := filepath.Join(t.TempDir(), "failed.png")
		var buf []byte
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if chromedp.Run(tctx, chromedp.CaptureScreenshot(&buf)) == nil {
			if d := os.Getenv("AIRLOCK_SCREENSHOTS"); d != "" {
				shot = filepath.Join(d, "failed.png")
			}
			os.WriteFile(shot, buf, 0o644)
		}
		t.Fatalf("%s: %v (screenshot %s)\nthe page shows:\n%s", what, err, shot, pageText(ctx))
	}
}

func pageText(ctx context.Context) string {
	var s string
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	chromedp.Run(tctx, chromedp.Evaluate(`location.href + "\n" + document.body.innerText + "\n" + document.documentElement.outerHTML.slice(0, 600)`, &s))
	return s
}

// setField sets an input, textarea or select the way a person's typing
// does, so that React sees it.
func setField(sel, value string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var ok bool
		js := fmt.Sprintf(`(() => {
			const el = document.querySelector(%q);
			if (!el) return false;
			const proto = el.tagName === "SELECT" ? HTMLSelectElement.prototype : el.tagName === "TEXTAREA" ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
			Object.getOwnPropertyDescriptor(proto, "value").set.call(el, %q);
			el.dispatchEvent(new Event(el.tagName === "SELECT" ? "change" : "input", { bubbles: true }));
			return true;
		})()`, sel, value)
		if err := chromedp.Evaluate(js, &ok).Do(ctx); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no field %s", sel)
		}
		return nil
	})
}

// clickText clicks the button under scope whose text is text.
func clickText(scope, text string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var ok bool
		js := fmt.Sprintf(`(() => {
			const b = [...document.querySelectorAll(%q + " button")].find((b) => b.textContent.trim() === %q && !b.disabled);
			if (!b) return false;
			b.click();
			return true;
		})()`, scope, text)
		for i := 0; i < 100; i++ {
			if err := chromedp.Evaluate(js, &ok).Do(ctx); err != nil {
				return err
			}
			if ok {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("no enabled button %q in %s", text, scope)
	})
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	var got []byte
	for i := 0; i < 100; i++ {
		got, _ = os.ReadFile(path)
		if string(got) == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("%s holds %q, want %q", filepath.Base(path), got, want)
}

// TestBrowserReview drives the real interface in headless Chromium against
// a real engine: a session with a scripted agent made from the New session
// form, its file list, one hunk accepted, one file discarded, a conflict
// settled, and the project on disk checked after each.
func TestBrowserReview(t *testing.T) {
	c := newCLI(t)
	d := enginetest.Require(t)
	enginetest.TinyImage(t, d)
	ctx := browser(t)

	p := filepath.Join(t.TempDir(), "web-app")
	os.MkdirAll(p, 0o755)
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	f := strings.Join(lines, "\n") + "\n"
	os.WriteFile(filepath.Join(p, "f.txt"), []byte(f), 0o644)
	os.WriteFile(filepath.Join(p, "config.yaml"), []byte("mode: careful\nlevel: 1\n"), 0o644)

	u := strings.TrimSpace(c.ok("ui", "--no-open"))
	if resp, err := http.Get(u); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "built without its user interface") {
			t.Fatal("this airlock binary has no interface: build the frontend first (`make ui`)")
		}
	}
	if resp, err := http.Get(strings.Split(u, "?")[0] + "v1/sessions"); err == nil {
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("the API answered %d without the token", resp.StatusCode)
		}
		resp.Body.Close()
	}

	agent := `sed -i -e 's/^line 2$/agent two/' -e 's/^line 28$/agent twenty-eight/' f.txt && sed -i 's/careful/fast/' config.yaml && echo scratch > scratch.txt && echo "did: " {prompt}`
	var stream string
	step(t, ctx, "create a session with a scripted agent",
		chromedp.Navigate(u+"#/new"),
		chromedp.WaitVisible(`input[aria-label="project"]`),
		setField(`input[aria-label="project"]`, p),
		setField(`select[aria-label="image"]`, enginetest.Image),
		setField(`select[aria-label="agent"]`, "custom"),
		setField(`input[aria-label="custom command"]`, agent),
		setField(`textarea[aria-label="first task"]`, "edit the files"),
		setField(`select[aria-label="network"]`, "deny-all"),
		clickText(".new-session", "Create session"),
		chromedp.WaitVisible(`.ev.done`),
		chromedp.Text(`.agent-stream`, &stream),
	)
	if !strings.Contains(stream, "did:  edit the files") && !strings.Contains(stream, "did: edit the files") {
		t.Errorf("the agent's stream shows %q", stream)
	}
	if b, _ := os.ReadFile(filepath.Join(p, "f.txt")); string(b) != f {
		t.Fatal("the agent wrote the project")
	}
	// The host changes the line the agent changed: a conflict.
	os.WriteFile(filepath.Join(p, "config.yaml"), []byte("mode: paranoid\nlevel: 1\n"), 0o644)

	var names []string
	step(t, ctx, "the file list",
		chromedp.Click(`.tabs button:nth-child(1)`),
		chromedp.WaitVisible(`li[data-path="f.txt"]`),
		chromedp.Evaluate(`[...document.querySelectorAll(".filetree li.file")].map((l) => l.dataset.path + (l.querySelector(".badge.bad") ? " conflict" : ""))`, &names),
		chromedp.Click(`li[data-path="f.txt"]`),
		chromedp.WaitVisible(`.hunk[data-part="1"] .d2h-wrapper`),
		shoot("review"),
	)
	if strings.Join(names, ",") != "config.yaml conflict,f.txt,scratch.txt" {
		t.Errorf("the file list is %v", names)
	}

	// One hunk of f.txt.
	step(t, ctx, "accept a hunk",
		chromedp.Click(`li[data-path="f.txt"]`),
		chromedp.WaitVisible(`.hunk[data-part="1"]`),
		clickText(`.hunk[data-part="0"]`, "Accept hunk"),
	)
	waitFile(t, filepath.Join(p, "f.txt"), strings.Replace(f, "line 2\n", "agent two\n", 1))

	// Discard a whole file: it never reaches the project and leaves the list.
	step(t, ctx, "discard a file",
		chromedp.Click(`li[data-path="scratch.txt"]`),
		chromedp.WaitVisible(`.file-header`),
		clickText(`.file-header`, "Discard file"),
		chromedp.WaitNotPresent(`li[data-path="scratch.txt"]`),
	)
	if _, err := os.Stat(filepath.Join(p, "scratch.txt")); err == nil {
		t.Error("a discarded file reached the project")
	}

	// The conflict: take the agent's side of its one region.
	var sides string
	step(t, ctx, "settle the conflict",
		chromedp.Click(`li[data-path="config.yaml"]`),
		chromedp.WaitVisible(`.conflict`),
		chromedp.Text(`.conflict .three-way`, &sides),
		shoot("review-conflict"),
		clickText(`.conflict`, "Take agent"),
		chromedp.WaitNotPresent(`li[data-path="config.yaml"]`),
	)
	if !strings.Contains(sides, "mode: careful") || !strings.Contains(sides, "mode: paranoid") || !strings.Contains(sides, "mode: fast") {
		t.Errorf("the conflict view shows %q: want base, host and agent", sides)
	}
	waitFile(t, filepath.Join(p, "config.yaml"), "mode: fast\nlevel: 1\n")

	// What is left: the other hunk of f.txt, shown as one.
	var left []string
	step(t, ctx, "what is left", chromedp.Evaluate(`[...document.querySelectorAll(".filetree li.file")].map((l) => l.dataset.path)`, &left))
	if strings.Join(left, ",") != "f.txt" {
		t.Errorf("left for review: %v", left)
	}

	// The terminal: a shell on the session's PTY, typed into like a person.
	var screen string
	step(t, ctx, "the terminal",
		clickText(".tabs", "Terminal"),
		chromedp.WaitVisible(`.xterm-helper-textarea`),
		chromedp.Focus(`.xterm-helper-textarea`),
		// Typed as text input, as an input method does (key events
		// with text would reach xterm twice).
		input.InsertText("echo term-$((40+2)); head -2 f.txt"),
		chromedp.KeyEvent(kb.Enter),
		// Wait for the file's line, not only the echo: the two arrive in
		// separate writes and the screen may be read between them.
		chromedp.Poll(`document.querySelector(".xterm-rows").innerText.includes("agent two")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text(`.xterm-rows`, &screen),
		shoot("terminal"),
	)
	if !strings.Contains(screen, "agent two") {
		t.Errorf("the terminal shows:\n%s", screen)
	}
}

// shoot saves the page as dir/name.png when AIRLOCK_SCREENSHOTS names a
// directory (`make screenshots`).
func shoot(name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		dir := os.Getenv("AIRLOCK_SCREENSHOTS")
		if dir == "" {
			return nil
		}
		time.Sleep(300 * time.Millisecond) // transitions settle
		var buf []byte
		if err := chromedp.CaptureScreenshot(&buf).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644)
	})
}

// TestBrowserScreens walks the other screens against a real engine: an
// agent's live stream in Airlock's event vocabulary, a blocked connection
// allowed from the network log, a snapshot taken and forked, the usage
// cards and chart, settings with a secret, the dark theme.
func TestBrowserScreens(t *testing.T) {
	c := newCLI(t)
	enginetest.Require(t)
	ctx := browser(t)
	p := sampleProject(t)
	u := strings.TrimSpace(c.ok("ui", "--no-open"))

	agent := `printf '%s\n' '{"type":"tool_call","tool":"Bash","input":"go test ./..."}' '{"type":"command","command":"go test ./...","exit_code":1}' '{"type":"file_edit","path":"f.txt"}' '{"type":"usage","usage":{"input_tokens":1200,"output_tokens":340,"cost_usd":0.0123}}'; ` +
		`echo fixed > fix.txt; curl -s -m 10 -o /dev/null http://blocked.example.org/ ; echo '{"type":"message","text":"Fixed: '"$1"'"}'` + " #{prompt}"
	var stream string
	step(t, ctx, "a session with a JSON-lines agent",
		chromedp.Navigate(u+"#/new"),
		chromedp.WaitVisible(`input[aria-label="project"]`),
		setField(`input[aria-label="project"]`, p),
		setField(`select[aria-label="agent"]`, "custom"),
		setField(`input[aria-label="custom command"]`, agent),
		setField(`select[aria-label="custom events"]`, "jsonl"),
		setField(`textarea[aria-label="first task"]`, "the failing test"),
		setField(`select[aria-label="network"]`, "deny-all"),
		shoot("new-session"),
		clickText(".new-session", "Create session"),
		chromedp.WaitVisible(`.ev.done`),
		chromedp.Text(`.agent-stream`, &stream),
		shoot("agent"),
	)
	for _, want := range []string{"Bash", "go test ./...", "exit 1", "f.txt", "1200 in", "Fixed: the failing test"} {
		if !strings.Contains(stream, want) {
			t.Errorf("the agent stream lacks %q:\n%s", want, stream)
		}
	}

	var blocked string
	step(t, ctx, "the network log",
		clickText(".tabs", "Network"),
		chromedp.WaitVisible(`tr.blocked`),
		chromedp.Text(`tr.blocked`, &blocked),
		shoot("network"),
		clickText(`tr.blocked`, "Allow this request"), // a plain HTTP request: its method and path are known
		chromedp.Poll(`document.querySelector(".policy").innerText.includes("blocked.example.org")`, nil),
	)
	if !strings.Contains(blocked, "blocked.example.org") {
		t.Errorf("the blocked row: %q", blocked)
	}

	var timeline string
	step(t, ctx, "a snapshot and a fork",
		clickText(".tabs", "Snapshots"),
		chromedp.WaitVisible(`input[aria-label="snapshot name"]`),
		setField(`input[aria-label="snapshot name"]`, "after-tests"),
		clickText(".snapshots", "Take snapshot"),
		chromedp.WaitVisible(`.timeline li`),
		setField(`input[aria-label="fork count"]`, "2"),
		clickText(".timeline", "Fork ×2"),
		chromedp.Poll(`document.querySelectorAll(".sidebar .side-item").length === 3`, nil, chromedp.WithPollingTimeout(40*time.Second)),
		chromedp.Text(`.timeline`, &timeline),
		shoot("snapshots"),
	)
	if !strings.Contains(timeline, "after-tests") {
		t.Errorf("the timeline: %q", timeline)
	}

	var cards string
	step(t, ctx, "usage",
		clickText(".tabs", "Usage"),
		chromedp.WaitVisible(`.cards`),
		chromedp.Text(`.cards`, &cards),
		shoot("usage"),
	)
	if lc := strings.ToLower(cards); !strings.Contains(lc, "active cpu") || !strings.Contains(lc, "per core-hour") {
		t.Errorf("usage cards: %q", cards)
	}

	var secrets string
	step(t, ctx, "settings and a secret",
		clickText(".topbar nav", "Settings"),
		chromedp.WaitVisible(`input[aria-label="secret name"]`),
		setField(`input[aria-label="secret name"]`, "EXAMPLE_API_KEY"),
		setField(`input[aria-label="secret value"]`, "sk-never-shown"),
		clickText(".settings", "Set"),
		chromedp.Poll(`document.querySelector(".settings").innerText.includes("EXAMPLE_API_KEY")`, nil),
		chromedp.Text(`.settings`, &secrets),
		shoot("settings"),
	)
	if strings.Contains(secrets, "sk-never-shown") {
		t.Error("the settings show a secret's value")
	}
	if !strings.Contains(c.ok("secret", "ls"), "EXAMPLE_API_KEY") {
		t.Error("the secret set in the interface is not in the engine")
	}

	var sessions int
	step(t, ctx, "the sessions list, dark",
		clickText(".topbar nav", "Sessions"),
		chromedp.Click(`button[aria-label="theme"]`),
		chromedp.WaitVisible(`table.sessions`),
		chromedp.Evaluate(`document.querySelectorAll("table.sessions tbody tr").length`, &sessions),
		shoot("sessions-dark"),
	)
	if sessions != 3 {
		t.Errorf("the list shows %d sessions, want 3 (one and two forks)", sessions)
	}
}

// TestBrowserCrossSite: a page of another server on this host (another
// local user's, say) that the browser holding the interface's cookie
// opens tries to create a session with a form, to set a secret and create
// a session with fetch, to read the sessions, and to open a terminal:
// every one is refused. Leaving the interface for that page tells it
// nothing (no Referer), and the cookie the browser hands it (cookies do
// not keep to ports) is not the engine's token.
func TestBrowserCrossSite(t *testing.T) {
	c := newCLI(t)
	enginetest.Require(t)
	ctx := browser(t)
	c.ok("image", "build", "--tiny")
	code, _, errs := c.run("run", "--project", sampleProject(t), "--image", enginetest.Image, "--", "true")
	m := sessionLine.FindStringSubmatch(errs)
	if code != 0 || m == nil {
		t.Fatalf("run: exit %d %q", code, errs)
	}
	id := m[1]
	u := strings.TrimSpace(c.ok("ui", "--no-open"))
	eu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	token := eu.Query().Get("token")
	engine := "http://" + eu.Host
	target := sampleProject(t)

	var mu sync.Mutex
	var visits []http.Header
	page := `<!doctype html><title>elsewhere</title>
<form id="f" method="POST" action="ENGINE/v1/sessions" enctype="text/plain" target="sink">
<input name='{"project":"PROJECT","image":"IMAGE","x":"' value='"}'></form>
<iframe name="sink"></iframe>
<script>
window.results = {};
(async () => {
  const r = window.results;
  const send = (path, opts) => fetch("ENGINE" + path, {credentials: "include", ...opts}).then(() => "sent", (e) => "error " + e);
  // A simple request goes without asking; a JSON PUT asks first (CORS).
  r.create = await send("/v1/sessions", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
    body: '{"project":"PROJECT","image":"IMAGE"}'});
  r.secret = await send("/v1/secrets/PWNED", {method: "PUT", headers: {"Content-Type": "application/json"}, body: '{"value":"stolen"}'});
  r.read = await fetch("ENGINE/v1/sessions", {credentials: "include"}).then((x) => x.text(), () => "blocked");
  r.terminal = await new Promise((resolve) => {
    const ws = new WebSocket("ENGINE".replace("http:", "ws:") + "/v1/sessions/ID/terminal?cmd=touch&cmd=/workspace/pwned");
    ws.onopen = () => resolve("open");
    ws.onerror = () => resolve("refused");
  });
  document.getElementById("f").submit();
  setTimeout(() => { window.done = true; }, 2000);
})();
</script>`
	page = strings.NewReplacer("ENGINE", engine, "PROJECT", target, "IMAGE", enginetest.Image, "ID", id).Replace(page)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		visits = append(visits, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}))
	defer elsewhere.Close()

	var results map[string]string
	step(t, ctx, "open the interface, then a page elsewhere",
		chromedp.Navigate(u),
		chromedp.WaitVisible(`.topbar`),
		// As a link in the interface would: the interface's own page
		// navigates.
		chromedp.Evaluate(fmt.Sprintf(`setTimeout(() => { location.href = %q }, 50); true`, elsewhere.URL+"/attack"), nil),
		chromedp.WaitReady(`iframe[name="sink"]`),
		chromedp.Poll(`window.done === true`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate(`window.results`, &results),
	)
	t.Logf("what the page elsewhere got: %v", results)
	if results["terminal"] != "refused" {
		t.Errorf("the page elsewhere opened a terminal: %q", results["terminal"])
	}
	if results["read"] != "blocked" {
		t.Errorf("the page elsewhere read the sessions: %q", results["read"])
	}
	if strings.Contains(c.ok("secret", "ls"), "PWNED") {
		t.Error("the page elsewhere set a secret")
	}
	if n := strings.Count(c.ok("ls"), "\n"); n != 2 { // the header and the one session
		t.Errorf("the page elsewhere created sessions:\n%s", c.ok("ls"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(visits) == 0 {
		t.Fatal("the page elsewhere was never opened")
	}
	if ref := visits[0].Get("Referer"); ref != "" {
		t.Errorf("leaving the interface told the page elsewhere where it came from: Referer %q", ref)
	}
	for _, h := range visits {
		if ck := h.Get("Cookie"); strings.Contains(ck, token) {
			t.Errorf("the browser handed the engine's token to another port: %q", ck)
		}
	}
}

// TestBrowserLive: the page follows the engine's events, with no list
// reads of its own while they flow: a session created, given a file,
// paused and resumed, then removed from the CLI shows in the open page.
func TestBrowserLive(t *testing.T) {
	c := newCLI(t)
	enginetest.Require(t)
	ctx := browser(t)
	c.ok("image", "build", "--tiny")
	u := strings.TrimSpace(c.ok("ui", "--no-open"))
	// Every list read the page makes, counted in the page.
	const countReads = `(() => {
		window.listReads = 0;
		const f = window.fetch;
		window.fetch = (input, init) => {
			if (String(input).endsWith("/v1/sessions") && (!init || !init.method || init.method === "GET")) window.listReads++;
			return f(input, init);
		};
	})()`
	step(t, ctx, "the page, following the engine",
		chromedp.Navigate(u),
		chromedp.WaitVisible(`.app[data-live="true"]`),
		chromedp.Evaluate(countReads, nil),
	)

	code, _, errs := c.run("run", "--project", sampleProject(t), "--image", enginetest.Image, "--", "true")
	m := sessionLine.FindStringSubmatch(errs)
	if code != 0 || m == nil {
		t.Fatalf("run: exit %d %q", code, errs)
	}
	id := m[1]
	row := fmt.Sprintf(`tr[data-session^=%q]`, id)
	pill := func(state string) chromedp.Action {
		return chromedp.Poll(fmt.Sprintf(`document.querySelector('%s .pill')?.textContent === %q`, row, state), nil, chromedp.WithPollingTimeout(30*time.Second))
	}
	step(t, ctx, "a session run from the CLI", pill("running"))
	c.ok("exec", id, "--", "sh", "-c", "echo new > new.txt")
	step(t, ctx, "its changes", chromedp.Poll(fmt.Sprintf(`document.querySelector('%s td:nth-child(4)')?.textContent === "1"`, row), nil, chromedp.WithPollingTimeout(30*time.Second)))
	c.ok("pause", id)
	step(t, ctx, "paused from the CLI", pill("paused"), shoot("sessions-live"))
	c.ok("resume", id)
	step(t, ctx, "resumed from the CLI", pill("running"))
	c.ok("rm", id)
	step(t, ctx, "removed from the CLI", chromedp.WaitNotPresent(row))

	var reads int
	var live string
	step(t, ctx, "what the page read", chromedp.Evaluate(`window.listReads`, &reads), chromedp.AttributeValue(`.app`, "data-live", &live, nil))
	if reads != 0 || live != "true" {
		t.Errorf("the page read the list %d times (live %q): it should have followed the events alone", reads, live)
	}
}
