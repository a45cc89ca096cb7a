package main_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/enginetest"
	"github.com/chromedp/chromedp"
)

// TestBrowserAsk: a session under --net ask makes a request no rule
// decides; the request waits while the session's Network tab shows the
// question; Allow once in headless Chromium lets it through, and the log
// shows the request by its method and path.
func TestBrowserAsk(t *testing.T) {
	c := newCLI(t)
	d := enginetest.Require(t)
	enginetest.TinyImage(t, d)
	out := enginetest.NewOutside(t)
	ctx := browser(t)
	p := sampleProject(t)

	_, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--net", "ask", "--ask-timeout", "2m", "--", "true")
	m := sessionLine.FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("run did not print the session id: %q", errs)
	}
	id := m[1]
	u := strings.TrimSpace(c.ok("ui", "--no-open"))

	// The request, held until someone answers.
	get := "printf 'GET http://" + out.IPv4 + "/held HTTP/1.0\\r\\n\\r\\n' | nc -w 150 $(ip route | awk '/default/{print $3}') 3128"
	held := exec.Command(c.bin, "exec", id, "--", "sh", "-c", get)
	held.Env = c.env
	var answer bytes.Buffer
	held.Stdout = &answer
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- held.Wait() }()

	var prompt string
	step(t, ctx, "the session's Network tab asks",
		chromedp.Navigate(u+"#/s/"+id+"/network"),
		chromedp.WaitVisible(`.ask .ask-question`),
		chromedp.Text(`.ask`, &prompt),
	)
	if !strings.Contains(prompt, "GET "+out.IPv4+"/held") {
		t.Errorf("the prompt says %q, want the request's method, host and path", prompt)
	}
	select {
	case err := <-done:
		t.Fatalf("the request was not held while asked: %v, %q", err, answer.String())
	default:
	}
	step(t, ctx, "allow it once", clickText(".ask", "Allow once"))
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the request still waits after Allow once")
	}
	if !strings.Contains(answer.String(), "the outside answers") {
		t.Errorf("the allowed request got %q", answer.String())
	}
	var logText string
	for i := 0; i < 50 && !strings.Contains(logText, "GET "+out.IPv4+"/held"); i++ {
		time.Sleep(200 * time.Millisecond)
		step(t, ctx, "read the log", chromedp.Text(`.network table`, &logText, chromedp.NodeVisible))
	}
	if !strings.Contains(logText, "GET "+out.IPv4+"/held") || !strings.Contains(logText, "asked: allow-once") {
		t.Errorf("the network log:\n%s", logText)
	}
}
