package main_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/chromedp/chromedp"
)

// viteApp is a Vite project whose page shows msg.js's message and takes
// a new one by hot module replacement (the page is not reloaded).
var viteApp = map[string]string{
	"package.json": `{"name": "preview", "private": true, "type": "module"}`,
	"index.html":   `<!doctype html><html><body><p id="msg"></p><script type="module" src="/main.js"></script></body></html>`,
	"msg.js":       `export const msg = "first message";` + "\n",
	"main.js": `import { msg } from "./msg.js";
const show = (m) => { document.getElementById("msg").textContent = m; };
show(msg);
if (import.meta.hot) import.meta.hot.accept("./msg.js", (mod) => mod && show(mod.msg));
`,
}

// copyVite copies the frontend's Vite with the packages it needs
// (dependencies and the optional ones installed, e.g. esbuild's binary
// for this platform) into dst/node_modules; the session has no registry.
func copyVite(t *testing.T, dst string) {
	t.Helper()
	src, err := filepath.Abs("../../frontend/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "vite", "package.json")); err != nil {
		if os.Getenv("AIRLOCK_REQUIRE_INTEGRATION") != "" {
			t.Fatal("no Vite in frontend/node_modules: run `npm ci` in frontend")
		}
		t.Skip("no Vite in frontend/node_modules (`npm ci` in frontend)")
	}
	seen := map[string]bool{}
	todo := []string{"vite"}
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		b, err := os.ReadFile(filepath.Join(src, name, "package.json"))
		if err != nil {
			continue // an optional dependency of another platform
		}
		var pkg struct {
			Dependencies, OptionalDependencies map[string]string
		}
		if err := json.Unmarshal(b, &pkg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for d := range pkg.Dependencies {
			todo = append(todo, d)
		}
		for d := range pkg.OptionalDependencies {
			todo = append(todo, d)
		}
		to := filepath.Join(dst, "node_modules", name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", filepath.Join(src, name), to).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v %s", name, err, out)
		}
	}
}

// The preview test: a real Vite dev server (Node from the agents
// image) in a session, forwarded with bearer auth; the page refused
// without the token, fetched by headless Chromium with it, and an edit
// of a source file in the session reaching the open page through Vite's
// hot reload over the forwarded WebSocket, without a reload.
func TestPortViteHotReload(t *testing.T) {
	c := newCLI(t)
	ctx := browser(t)
	p := filepath.Join(t.TempDir(), "preview")
	for name, text := range viteApp {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyVite(t, p)
	image := enginetest.AgentsImage(t, enginetest.Require(t))

	code, _, errs := c.run("run", "--project", p, "--image", image, "--",
		"sh", "-c", "(nohup node node_modules/vite/bin/vite.js --port 5173 --strictPort >/tmp/vite.log 2>&1 &)")
	m := sessionLine.FindStringSubmatch(errs)
	if code != 0 || m == nil {
		t.Fatalf("run vite: exit %d, stderr %q", code, errs)
	}
	id := m[1]
	defer c.run("rm", "-f", id)
	viteLog := func() string { _, out, _ := c.run("exec", id, "--", "cat", "/tmp/vite.log"); return out }

	out := c.ok("port", id, "5173", "--auth", "bearer")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "token: ") {
		t.Fatalf("port printed %q", out)
	}
	url, token := lines[0], strings.TrimPrefix(lines[1], "token: ")

	// Without the token the forward refuses, whether Vite answers yet or
	// not.
	hc := &http.Client{Timeout: time.Minute} // bounds a hang only
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}

	// Vite starts within a minute on a loaded machine; until then the
	// forward answers 502.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Vite did not answer through the forward: %v %v\nits log:\n%s", resp, err, viteLog())
		}
		time.Sleep(500 * time.Millisecond)
	}

	step(t, ctx, "the page through the forward, with the token",
		chromedp.Navigate(url+"?token="+token),
		chromedp.WaitVisible(`//p[@id="msg" and text()="first message"]`),
		chromedp.Evaluate(`window.notReloaded = true`, nil),
	)
	c.ok("exec", id, "--", "sh", "-c", `echo 'export const msg = "second message";' > msg.js`)
	var kept bool
	defer func() {
		if t.Failed() {
			t.Logf("Vite's log:\n%s", viteLog())
		}
	}()
	step(t, ctx, "the edit, hot reloaded",
		chromedp.WaitVisible(`//p[@id="msg" and text()="second message"]`),
		chromedp.Evaluate(`window.notReloaded === true`, &kept),
	)
	if !kept {
		t.Errorf("the page was reloaded, not hot updated")
	}
}
