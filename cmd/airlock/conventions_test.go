package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/creack/pty"
)

// waitFor waits until b holds want; the deadline only bounds a hang.
func waitFor(t *testing.T, b *safeBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(b.String(), want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("never saw %q in:\n%s", want, b.String())
}

// TestCLIConventions: version, --json and --format on listings,
// completion of session ids, logs -f and rm with and without -f, with the
// real binary, engine and Docker.
func TestCLIConventions(t *testing.T) {
	c := newCLI(t)
	p := sampleProject(t)

	// With no engine, version prints the client's part and fails as
	// `docker version` does; it starts no engine.
	code, out, errs := c.run("version")
	if code != 69 || !strings.Contains(out, "Client:") || strings.Contains(out, "Engine:") || !strings.Contains(errs, "does not answer") {
		t.Errorf("version without an engine: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(c.socket); err == nil {
		t.Fatalf("version started an engine")
	}

	c.ok("image", "build", "--tiny") // starts the engine
	var v struct {
		Client struct {
			Version string
			Level   int
		}
		Engine *api.VersionInfo
	}
	if err := json.Unmarshal([]byte(c.ok("version", "--json")), &v); err != nil || v.Engine == nil ||
		v.Engine.Level != api.Level || v.Client.Level != api.Level || v.Engine.API != api.Version || v.Engine.PID <= 0 || v.Engine.DockerVersion == "" {
		t.Errorf("version --json: %+v %+v, %v", v, v.Engine, err)
	}
	if got := c.ok("version", "--format", "{{.Engine.API}} level {{.Engine.Level}}"); got != fmt.Sprintf("v1 level %d\n", api.Level) {
		t.Errorf("version --format: %q", got)
	}
	if human := c.ok("version"); !strings.Contains(human, "Engine:") || !strings.Contains(human, fmt.Sprintf("(level %d)", api.Level)) {
		t.Errorf("version:\n%s", human)
	}

	code, _, errs = c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", "echo hi > new.txt; echo first")
	m := sessionLine.FindStringSubmatch(errs)
	if code != 0 || m == nil {
		t.Fatalf("run: exit %d, %s", code, errs)
	}
	id := m[1]

	// Listings.
	var list []api.Session
	if err := json.Unmarshal([]byte(c.ok("ls", "--json")), &list); err != nil || len(list) != 1 || list[0].ID != id || list[0].Changed != 1 {
		t.Errorf("ls --json: %+v %v", list, err)
	}
	if got := c.ok("ls", "--format", "{{.ID}} {{.State}} {{.Changed}}"); got != id+" running 1\n" {
		t.Errorf("ls --format: %q", got)
	}
	table := strings.Split(strings.TrimSpace(c.ok("ls", "--format", `table {{.ID}}\t{{.State}}`)), "\n")
	if len(table) != 2 || strings.Join(strings.Fields(table[0]), " ") != "ID STATE" || strings.Join(strings.Fields(table[1]), " ") != id+" running" {
		t.Errorf("ls --format table: %q", table)
	}
	var one api.Session
	if err := json.Unmarshal([]byte(c.ok("ls", "--format", "{{json .}}")), &one); err != nil || one.ID != id {
		t.Errorf("ls --format '{{json .}}': %+v %v", one, err)
	}
	if got := c.ok("image", "ls", "--format", "{{.Name}}"); !strings.Contains(got, enginetest.Image) {
		t.Errorf("image ls --format: %q", got)
	}
	var cmds []api.Command
	if err := json.Unmarshal([]byte(c.ok("logs", id, "--json")), &cmds); err != nil || len(cmds) != 1 || cmds[0].Output != "first\n" {
		t.Errorf("logs --json: %+v %v", cmds, err)
	}
	if code, _, errs := c.run("ls", "--format", "{{.Nope}}"); code != 64 || !strings.Contains(errs, ".State") {
		t.Errorf("ls with an unknown field: exit %d, %s", code, errs)
	}

	// Completion of session ids, as a shell asks for it.
	if got := c.ok("__complete", "exec", id[:4]); !strings.Contains(got, id+"\trunning "+p) {
		t.Errorf("completion of %s...: %q", id[:4], got)
	}

	// logs -f: the history, then a command's output while it runs, then
	// the session's end.
	follow := exec.Command(c.bin, "logs", "-f", id)
	follow.Env = c.env
	var followed safeBuffer
	follow.Stdout, follow.Stderr = &followed, &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followDone := make(chan error, 1)
	go func() { followDone <- follow.Wait() }()
	waitFor(t, &followed, "first\n")
	slow := exec.Command(c.bin, "exec", id, "--", "sh", "-c", "echo second; while [ ! -e go ]; do sleep 0.1; done; echo third")
	slow.Env = c.env
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &followed, "second\n") // printed while the command still waits
	if strings.Contains(followed.String(), "\nthird\n") {
		t.Fatalf("the command ended early:\n%s", followed.String())
	}
	c.ok("exec", id, "--", "touch", "go")
	if err := slow.Wait(); err != nil {
		t.Fatalf("exec: %v", err)
	}
	waitFor(t, &followed, "\nthird\n")
	waitFor(t, &followed, "ended (exit 0")

	// rm without -f, not on a terminal, says what it dropped.
	_, _, errs = c.run("run", "--project", p, "--image", enginetest.Image, "--", "sh", "-c", "echo x > a.txt")
	other := sessionLine.FindStringSubmatch(errs)[1]
	code, out, errs = c.run("rm", other)
	if code != 0 || out != "removed "+other+"\n" || !strings.Contains(errs, "dropped 1 unaccepted change") {
		t.Errorf("rm: exit %d, %q, %q", code, out, errs)
	}

	// On a terminal, rm asks before dropping changes; no keeps the session.
	rm := exec.Command(c.bin, "rm", id)
	rm.Env = c.env
	f, err := pty.Start(rm)
	if err != nil {
		t.Fatal(err)
	}
	var screen safeBuffer
	go io.Copy(&screen, f)
	waitFor(t, &screen, "[y/N]")
	f.Write([]byte("n\r"))
	if err := rm.Wait(); err != nil {
		t.Errorf("rm answered no: %v\n%s", err, screen.String())
	}
	waitFor(t, &screen, "kept "+id) // read from the terminal before it closes
	f.Close()
	if !strings.Contains(c.ok("ls", "-q"), id) {
		t.Errorf("rm answered no did not keep the session:\n%s", screen.String())
	}

	// rm -f removes a running session with unaccepted changes without a
	// word, and logs -f ends with it.
	code, out, errs = c.run("rm", "-f", id)
	if code != 0 || out != "removed "+id+"\n" || errs != "" {
		t.Errorf("rm -f: exit %d, %q, %q", code, out, errs)
	}
	if err := <-followDone; err != nil {
		t.Errorf("logs -f: %v\n%s", err, followed.String())
	}
	if got := followed.String(); !strings.Contains(got, "session "+id+" was removed") {
		t.Errorf("logs -f did not end with the session:\n%s", got)
	}
	if got := c.ok("ls", "--json"); strings.TrimSpace(got) != "[]" {
		t.Errorf("ls --json after rm: %q", got)
	}
}
