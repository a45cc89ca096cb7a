package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/engine/egress"
)

// egressOverhead measures the engine's proxy (the same code a session
// uses, on loopback) against a direct connection: HTTPS requests on a
// kept-alive connection, and the throughput of a 1 GB download.
func (b *bench) egressOverhead(requests int) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(1<<30))
			buf := make([]byte, 256<<10)
			for n := 0; n < 1<<30; n += len(buf) {
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	up.StartTLS()
	defer up.Close()
	pol, err := egress.Compile(egress.Spec{Mode: egress.Custom, Allow: []string{"127.0.0.1"}, Private: true})
	check(err)
	x := egress.NewProxy(pol)
	ps := httptest.NewServer(x)
	defer ps.Close()
	pu, _ := url.Parse(ps.URL)
	newClient := func(proxy bool) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: 1, DisableCompression: true}
		if proxy {
			tr.Proxy = http.ProxyURL(pu)
		}
		return &http.Client{Transport: tr}
	}
	lat := func(c *http.Client) []time.Duration {
		var out []time.Duration
		for i := 0; i < requests+50; i++ {
			t := time.Now()
			resp, err := c.Get(up.URL + "/small")
			check(err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if i >= 50 {
				out = append(out, time.Since(t))
			}
		}
		return out
	}
	direct, proxied := lat(newClient(false)), lat(newClient(true))
	through := func(c *http.Client) float64 {
		t := time.Now()
		resp, err := c.Get(up.URL + "/big")
		check(err)
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return float64(n) / time.Since(t).Seconds() / (1 << 20)
	}
	var dT, pT []float64
	for i := 0; i < 3; i++ {
		dT, pT = append(dT, through(newClient(false))), append(pT, through(newClient(true)))
	}
	med := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				if s[j] < s[i] {
					s[i], s[j] = s[j], s[i]
				}
			}
		}
		return s[len(s)/2]
	}
	b.log("### 9. Egress proxy overhead on loopback (%d HTTPS requests on a kept-alive connection; 1 GiB download, median of 3)", requests)
	b.log("")
	b.log("| | request p50 | request p95 | download |")
	b.log("|---|---|---|---|")
	us := func(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }
	b.log("| direct | %s | %s | %.0f MiB/s |", us(pct(direct, .5)), us(pct(direct, .95)), med(dT))
	b.log("| through the session proxy (CONNECT, policy checked) | %s | %s | %.0f MiB/s |", us(pct(proxied, .5)), us(pct(proxied, .95)), med(pT))
	b.log("")
	b.log("Added latency p50: **%s** (target ≤ 1 ms); throughput **%.0f%%** of direct (target ≥ 80%%).",
		us(pct(proxied, .5)-pct(direct, .5)), 100*med(pT)/med(dT))
	b.log("")
}

// policyLatency measures how soon a policy change applies: from the
// start of the API call that allows an address to the first request
// through the session's proxy that gets through, polling every 5 ms.
func (b *bench) policyLatency(runs int) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go srv.Serve(l)
	defer srv.Close()
	target := "http://" + l.Addr().String() + "/"
	project := filepath.Join(b.work, "p9")
	check(os.MkdirAll(project, 0o755))
	id := b.newSession(project, "airlock/tiny", "true")
	c := client.New(b.socket)
	ctx := context.Background()
	gwOut, err := runOut(b, "exec", id, "--", "sh", "-c", "ip route | awk '/default/{print $3}'")
	check(err)
	proxy, _ := url.Parse("http://" + strings.TrimSpace(gwOut) + ":3128")
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true}, Timeout: 2 * time.Second}
	get := func() bool {
		resp, err := hc.Get(target)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	var lat []time.Duration
	for i := 0; i < runs; i++ {
		_, err := c.Policy(ctx, id, api.PolicyChange{Set: &api.EgressPolicy{Mode: "custom"}})
		check(err)
		if get() {
			check(fmt.Errorf("the request went through before the policy allowed it"))
		}
		t := time.Now()
		_, err = c.Policy(ctx, id, api.PolicyChange{Set: &api.EgressPolicy{Mode: "custom", Allow: []string{l.Addr().String()}, Private: true}})
		check(err)
		for !get() {
			if time.Since(t) > 5*time.Second {
				check(fmt.Errorf("the policy change did not apply within 5 s"))
			}
			time.Sleep(5 * time.Millisecond)
		}
		lat = append(lat, time.Since(t))
	}
	b.log("### 10. Policy change to enforcement (%d runs)", runs)
	b.log("")
	b.log("From the start of `POST /v1/sessions/ID/policy` allowing an address to the first request through the session's proxy that gets through: p50 **%s**, max %s (target ≤ 1 s). The proxy swaps the policy atomically, so the next connection follows it.", ms(pct(lat, .5)), ms(pct(lat, 1)))
	b.log("")
}

func runOut(b *bench, args ...string) (string, error) {
	out, err := b.cmd(b.bin, args...).Output()
	return string(out), err
}

// pauseResume measures pausing and resuming a session against Docker's
// own pause and unpause of a plain container, in the same run.
func (b *bench) pauseResume(runs int) {
	project := filepath.Join(b.work, "p11")
	check(os.MkdirAll(project, 0o755))
	id := b.newSession(project, "airlock/tiny", "true")
	plain := "airlock-bench-pause"
	runOutCmd("docker", "rm", "-f", plain)
	if _, err := runOutCmd("docker", "run", "-d", "--name", plain, "airlock/tiny", "sleep", "3600"); err != nil {
		check(err)
	}
	defer runOutCmd("docker", "rm", "-f", plain)
	c := client.New(b.socket)
	ctx := context.Background()
	var ap, ar, dp, du []time.Duration
	for i := 0; i < runs+2; i++ {
		t := time.Now()
		_, err := c.Pause(ctx, id)
		check(err)
		p := time.Since(t)
		t = time.Now()
		_, err = c.Resume(ctx, id)
		check(err)
		r := time.Since(t)
		t = time.Now()
		_, err = runOutCmd("docker", "pause", plain)
		check(err)
		q := time.Since(t)
		t = time.Now()
		_, err = runOutCmd("docker", "unpause", plain)
		check(err)
		u := time.Since(t)
		if i >= 2 {
			ap, ar, dp, du = append(ap, p), append(ar, r), append(dp, q), append(du, u)
		}
	}
	b.log("### 11. Pause and resume (%d runs)", runs)
	b.log("")
	b.log("| | pause p50 | resume p50 | resume p95 |")
	b.log("|---|---|---|---|")
	b.log("| `POST /v1/sessions/ID/pause` / `resume` (API call, state recorded) | %s | %s | %s |", ms(pct(ap, .5)), ms(pct(ar, .5)), ms(pct(ar, .95)))
	b.log("| `docker pause` / `docker unpause` (CLI) | %s | %s | %s |", ms(pct(dp, .5)), ms(pct(du, .5)), ms(pct(du, .95)))
	b.log("")
	b.log("Resume p50: **%s** (target ≤ 20 ms).", ms(pct(ar, .5)))
	b.log("")
}

func runOutCmd(name string, args ...string) (string, error) {
	out, err := osexec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out), nil
}

// meterCost measures what watching sessions costs the engine: its CPU
// time (utime+stime of the daemon) over a minute with no session and
// with n idle sessions, which the watcher meters every 10 s (CPU from
// the cgroup, budgets, idleness).
func (b *bench) meterCost(n int, window time.Duration) {
	v, err := client.New(b.socket).Ping(context.Background())
	check(err)
	cpu := func() time.Duration {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", v.PID))
		check(err)
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		var ticks int64
		for _, i := range []int{11, 12} { // utime, stime
			var x int64
			fmt.Sscan(f[i], &x)
			ticks += x
		}
		return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
	}
	measure := func() time.Duration {
		c0 := cpu()
		time.Sleep(window)
		return cpu() - c0
	}
	for _, id := range strings.Fields(b.must("ls", "-q")) {
		b.must("rm", id)
	}
	none := measure()
	project := filepath.Join(b.work, "p12")
	check(os.MkdirAll(project, 0o755))
	for i := 0; i < n; i++ {
		b.must("run", "--project", project, "--image", "airlock/tiny", "--idle-timeout", "24h", "--", "true")
	}
	time.Sleep(20 * time.Second) // the creates' background work settles
	loaded := measure()
	share := func(d time.Duration) float64 { return 100 * d.Seconds() / window.Seconds() }
	b.log("### 12. Cost of watching sessions (metering, budgets, idleness; engine CPU over %s)", window)
	b.log("")
	b.log("| | engine CPU | share of one core |")
	b.log("|---|---|---|")
	b.log("| no session | %s | %.2f%% |", none, share(none))
	b.log("| %d idle sessions | %s | %.2f%% |", n, loaded, share(loaded))
	b.log("")
	b.log("Added by %d sessions: **%.2f%%** of one core (target < 0.5%%). CPU ticks are 10 ms: the figures are that coarse.", n, share(loaded-none))
	b.log("")
	for _, id := range strings.Fields(b.must("ls", "-q")) {
		b.must("rm", id)
	}
}
