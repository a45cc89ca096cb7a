package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/harness/mockmodel"
	"github.com/docker/docker/api/types/network"
	docker "github.com/docker/docker/client"
)

// agentTurn measures what Airlock adds around one agent turn: a prompt
// run with `airlock agent` in a live session against the same CLI run by
// `docker exec` in a plain container of the same image, both answered by
// the same mock model (one reply, no tools, so the CLI's own work is the
// same). Before: from the command's start to the CLI's first request at
// the model. After: the rest of the command (the CLI's exit, events
// stored, the turn's end reported), as the whole time minus the part up
// to the last model answer.
//
// Airlock adds the model's API key in transit only over TLS, so the mock
// model speaks TLS, as a provider does, with a certificate from a CA of
// its own: the engine trusts it upstream (ca_bundle in its config), the
// plain container's CLI through NODE_EXTRA_CA_CERTS. Only this section's
// engine has that bundle: with one, the proxy of every session network
// copies the system's CAs, which later sections would count.
func (b *bench) agentTurn(runs int) {
	b.must("image", "build", "--agents", "claude,codex,opencode")
	ca, err := mockmodel.NewCA()
	check(err)
	bundle := filepath.Join(b.work, "model-ca.pem")
	check(os.WriteFile(bundle, ca.PEM(), 0o644))
	config := filepath.Join(b.work, "model-config.yaml")
	check(os.WriteFile(config, []byte("ca_bundle: "+bundle+"\n"), 0o644))
	b.restartEngine("AIRLOCK_CONFIG=" + config)
	defer b.restartEngine()
	settings, err := client.New(b.socket).Settings(context.Background())
	check(err)
	if settings.CABundle != bundle {
		check(fmt.Errorf("the engine did not take ca_bundle from %s (it has %q)", config, settings.CABundle))
	}
	gw := bridgeGateway()
	l, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	check(err)
	model := mockmodel.New()
	model.Fallback = mockmodel.Reply{Text: "ok"}
	srv, base, err := model.ServeTLS(l, ca)
	check(err)
	defer srv.Close()

	project := filepath.Join(b.work, "p8")
	check(os.MkdirAll(project, 0o755))
	os.WriteFile(filepath.Join(project, "README.md"), []byte("x\n"), 0o644)
	id := b.newSession(project, "airlock/agents", "true")
	plain := "airlock-bench-plain"
	exec.Command("docker", "rm", "-f", plain).Run()
	out, err := exec.Command("docker", "run", "-d", "--name", plain, "-u", "0:0", "-w", "/workspace", "-v", project+":/workspace:ro",
		"--tmpfs", "/home/airlock:mode=1777", "-e", "HOME=/home/airlock", "-v", bundle+":/etc/model-ca.pem:ro", "-e", "NODE_EXTRA_CA_CERTS=/etc/model-ca.pem",
		"airlock/agents", "sleep", "infinity").CombinedOutput()
	if err != nil {
		check(fmt.Errorf("start the plain container: %v: %s", err, out))
	}
	defer exec.Command("docker", "rm", "-f", plain).Run()

	// timeTurn runs cmd and returns the time to the CLI's first model
	// request, and the time from the last model answer to the end.
	timeTurn := func(cmd *exec.Cmd) (time.Duration, time.Duration) {
		n := len(model.Requests())
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			check(fmt.Errorf("%v: %v: %s", cmd.Args, err, out))
		}
		end := time.Now()
		reqs := model.Requests()[n:]
		if len(reqs) == 0 {
			check(fmt.Errorf("%v made no model request", cmd.Args))
		}
		return reqs[0].Time.Sub(t0), end.Sub(reqs[len(reqs)-1].Time)
	}
	var alBefore, alAfter, plBefore, plAfter []time.Duration
	env := append(b.env, "ANTHROPIC_API_KEY=sk-bench", "ANTHROPIC_BASE_URL="+base)
	for i := 0; i < runs+2; i++ {
		c := b.cmd(b.bin, "agent", id, "--agent", "claude", "--new", "say ok")
		c.Env = env
		ab, aa := timeTurn(c)
		pb, pa := timeTurn(exec.Command("docker", "exec", "-e", "ANTHROPIC_API_KEY=sk-bench", "-e", "ANTHROPIC_BASE_URL="+base, "-e", "IS_SANDBOX=1",
			"-e", "DISABLE_AUTOUPDATER=1", "-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", plain,
			"claude", "-p", "say ok", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"))
		if i >= 2 {
			alBefore, alAfter, plBefore, plAfter = append(alBefore, ab), append(alAfter, aa), append(plBefore, pb), append(plAfter, pa)
		}
	}
	added := pct(alBefore, .5) - pct(plBefore, .5) + pct(alAfter, .5) - pct(plAfter, .5)
	b.log("### 8. Agent turn overhead (Claude Code %s against a local mock model, %d runs)", "in airlock/agents", runs)
	b.log("")
	b.log("| | start → first model request, p50 | last answer → command done, p50 |")
	b.log("|---|---|---|")
	b.log("| `airlock agent ID PROMPT` (live session) | %s | %s |", ms(pct(alBefore, .5)), ms(pct(alAfter, .5)))
	b.log("| `docker exec C claude -p PROMPT` (plain container) | %s | %s |", ms(pct(plBefore, .5)), ms(pct(plAfter, .5)))
	b.log("")
	b.log("Added by Airlock, p50: **%s** before + %s after = **%s** (target ≤ 150 ms).",
		ms(pct(alBefore, .5)-pct(plBefore, .5)), ms(pct(alAfter, .5)-pct(plAfter, .5)), ms(added))
	b.log("")
}

// bridgeGateway is the Docker bridge's address on the host, which
// containers reach.
func bridgeGateway() string {
	d, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	check(err)
	nw, err := d.NetworkInspect(context.Background(), "bridge", networkInspectOptions())
	check(err)
	if len(nw.IPAM.Config) == 0 {
		check(fmt.Errorf("the Docker bridge has no address"))
	}
	if gw := strings.TrimSpace(nw.IPAM.Config[0].Gateway); gw != "" {
		return gw
	}
	// Newer Engines, and this one on a fresh machine, leave the gateway
	// out: it is the subnet's first address.
	pfx, err := netip.ParsePrefix(nw.IPAM.Config[0].Subnet)
	check(err)
	return pfx.Masked().Addr().Next().String()
}

func networkInspectOptions() network.InspectOptions { return network.InspectOptions{} }
