package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// engineProc is the soak's own engine: `airlock serve` with its own state
// directory, socket and config, so that killing it touches nothing else.
type engineProc struct {
	cli    string // the airlock binary
	dir    string // the soak's directory
	state  string
	socket string
	config string
	env    []string
	cmd    *exec.Cmd
	logf   *os.File
	exited chan struct{}
}

func newEngine(cli, dir string) (*engineProc, error) {
	e := &engineProc{cli: cli, dir: dir, state: filepath.Join(dir, "state"), socket: filepath.Join(dir, "engine.sock"), config: filepath.Join(dir, "config.yaml")}
	conf := "image: airlock/tiny\nworkspace_size: 64m\nmemory: 256m\nidle_timeout: 30m\n"
	if err := os.WriteFile(e.config, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return strings.HasPrefix(k, "AIRLOCK_") || k == "HOME" || strings.HasPrefix(k, "GIT_")
	})
	e.env = append(env, "AIRLOCK_ENGINE="+e.socket, "AIRLOCK_STATE_DIR="+e.state, "AIRLOCK_CONFIG="+e.config,
		"HOME="+home, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "NO_COLOR=1")
	return e, nil
}

// start starts `airlock serve` and waits (up to two minutes: a loaded
// machine) for it to answer.
func (e *engineProc) start(ctx context.Context) error {
	if e.logf == nil {
		f, err := os.OpenFile(filepath.Join(e.dir, "engine.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		e.logf = f
	}
	fmt.Fprintf(e.logf, "=== soak: serve started %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	e.cmd = exec.Command(e.cli, "serve", "--engine", e.socket, "--state-dir", e.state, "--config", e.config, "--warm-pool", "1")
	e.cmd.Env = e.env
	e.cmd.Stdout, e.cmd.Stderr = e.logf, e.logf
	if err := e.cmd.Start(); err != nil {
		return err
	}
	e.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(e.cmd, e.exited)
	for start := time.Now(); ; {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v := exec.CommandContext(cctx, e.cli, "version", "--json")
		v.Env = e.env
		out, err := v.Output()
		cancel()
		if err == nil && bytes.Contains(out, []byte(`"engine"`)) {
			if _, err := os.Stat(e.socket); err == nil {
				return nil
			}
		}
		select {
		case <-e.exited:
			return fmt.Errorf("the engine exited at start: %s", e.logTail())
		case <-ctx.Done():
			e.stop()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(start) > 2*time.Minute {
			e.stop()
			return fmt.Errorf("the engine did not answer in two minutes: %s", e.logTail())
		}
	}
}

// pid is the engine process's id (serve execs the engine in place).
func (e *engineProc) pid() int { return e.cmd.Process.Pid }

// kill9 kills the engine with SIGKILL and waits for it to be gone.
func (e *engineProc) kill9() error {
	if err := e.cmd.Process.Kill(); err != nil {
		return err
	}
	select {
	case <-e.exited:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("the engine (pid %d) outlived SIGKILL for a minute", e.pid())
	}
}

// stop stops the engine gracefully (SIGTERM: it removes its warm
// containers) and waits up to two minutes.
func (e *engineProc) stop() error {
	if e.cmd == nil {
		return nil
	}
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
		return nil
	case <-time.After(2 * time.Minute):
		e.cmd.Process.Kill()
		<-e.exited
		return fmt.Errorf("the engine did not stop in two minutes of SIGTERM")
	}
}

func (e *engineProc) logTail() string {
	b, _ := os.ReadFile(filepath.Join(e.dir, "engine.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// containers lists the ids and names of the containers labelled for this
// engine (sessions' and the warm pool's).
func (e *engineProc) containers(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label=dev.airlock.engine="+e.state, "--format", "{{.ID}} {{.Names}}").Output()
	if err != nil {
		return nil, fmt.Errorf("docker ps: %w", err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", " ")), nil
}

// removeContainers removes every container labelled for this engine, as
// a reboot loses them.
func (e *engineProc) removeContainers(ctx context.Context) (int, error) {
	out, err := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", "label=dev.airlock.engine="+e.state).Output()
	if err != nil {
		return 0, fmt.Errorf("docker ps: %w", err)
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return 0, nil
	}
	if b, err := exec.CommandContext(ctx, "docker", append([]string{"rm", "-f"}, ids...)...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("docker rm: %v: %s", err, b)
	}
	return len(ids), nil
}

// mounts lists the mount points beneath dir, outermost first.
func mounts(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.HasPrefix(unescapeMount(fs[4]), dir+"/") {
			out = append(out, unescapeMount(fs[4]))
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll unmounts every mount beneath dir, innermost first, as a
// reboot loses them.
func unmountAll(dir string) (int, error) {
	ms, err := mounts(dir)
	if err != nil {
		return 0, err
	}
	for _, m := range slices.Backward(ms) {
		if err := unix.Unmount(m, 0); err != nil {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				return 0, fmt.Errorf("unmount %s: %w", m, err)
			}
		}
	}
	return len(ms), nil
}

// fdsUnder lists the engine's open descriptors whose target is beneath
// dir.
func fdsUnder(pid int, dir string) []string {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(fdDir)
	var out []string
	for _, ent := range ents {
		t, err := os.Readlink(filepath.Join(fdDir, ent.Name()))
		if err == nil && (t == dir || strings.HasPrefix(t, dir+"/")) {
			out = append(out, t)
		}
	}
	return out
}

// networks lists Docker networks whose name holds the session id.
func networksOf(ctx context.Context, id string) []string {
	out, _ := exec.CommandContext(ctx, "docker", "network", "ls", "--format", "{{.Name}}").Output()
	var got []string
	for _, n := range strings.Fields(string(out)) {
		if strings.Contains(n, id) {
			got = append(got, n)
		}
	}
	return got
}

// decodeJSON decodes the CLI's JSON output, quoting it when it is not.
func decodeJSON(out []byte, v any) error {
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%w in %q", err, trim(string(out), 300))
	}
	return nil
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
