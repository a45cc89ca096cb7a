package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// run --publish, port, port ls and port rm with the real binary, engine
// and Docker: the page a session serves reaches the host, listening
// beyond loopback without auth is refused with the way to do it, a
// forward with auth prints its token (or user and password), and port ls
// lists a port the session listens on that is not forwarded.
func TestPortCLI(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)
	c.ok("image", "build", "--tiny")

	code, _, errs := c.run("run", "--project", p, "--image", enginetest.Image, "--publish", "8000", "--",
		"sh", "-c", "mkdir -p /tmp/www && echo page > /tmp/www/index.html && httpd -p 8000 -h /tmp/www")
	if code != 0 {
		t.Fatalf("run: exit %d, stderr %q", code, errs)
	}
	m := regexp.MustCompile(`session (\w+) port 8000: (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("run --publish did not print the URL: %q", errs)
	}
	id, url := m[1], m[2]
	hc := &http.Client{Timeout: time.Minute} // bounds a hang only
	resp, err := hc.Get(url + "index.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "page\n" {
		t.Fatalf("the published page: %d %q", resp.StatusCode, body)
	}

	if code, _, errs := c.run("port", id, "8001", "--listen", "0.0.0.0:0"); code == 0 || !strings.Contains(errs, "--auth bearer") {
		t.Errorf("listening on every interface without auth: exit %d, %q", code, errs)
	}
	if code, _, errs := c.run("port", id, "http"); code == 0 || !strings.Contains(errs, "airlock port ls ID") {
		t.Errorf("a port that is not a number: exit %d, %q", code, errs)
	}
	out := c.ok("port", id, "8001", "--listen", "127.0.0.1:0", "--auth", "bearer")
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\ntoken: [0-9a-f]{48}\n$`).MatchString(out) {
		t.Errorf("port with auth printed %q", out)
	}
	var list []api.Port
	if err := json.Unmarshal([]byte(c.ok("port", "ls", id, "--json")), &list); err != nil || len(list) != 2 || list[0].URL != url || list[1].Auth != "bearer" {
		t.Fatalf("port ls: %+v %v", list, err)
	}
	c.ok("port", "rm", id, "8000")
	if _, err := hc.Get(url); err == nil {
		t.Errorf("the forward answers after port rm")
	}
	if code, _, errs := c.run("port", "rm", id, "8000"); code == 0 || !strings.Contains(errs, "not forwarded") {
		t.Errorf("port rm twice: exit %d, %q", code, errs)
	}
	// httpd still listens on 8000: port ls lists it, marked.
	if ls := c.ok("port", "ls", id); !regexp.MustCompile(`(?m)^8000 +not forwarded \(listening on [0-9a-f.:]+\)`).MatchString(ls) {
		t.Errorf("port ls does not list the port the session listens on: %q", ls)
	}
	out = c.ok("port", id, "8000", "--auth", "basic", "--user", "me")
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\nuser: me\npassword: [0-9a-f]{48}\n$`).MatchString(out) {
		t.Errorf("port with basic auth printed %q", out)
	}
	c.ok("rm", "-f", id)
}
