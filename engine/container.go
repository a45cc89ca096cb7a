package engine

import (
	"context"
	"fmt"
	"github.com/airlock/airlock/engine/store"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Container labels by which the engine finds its containers again.
const (
	labelSession = "dev.airlock.session"
	labelEngine  = "dev.airlock.engine"
	labelFirst   = "dev.airlock.first" // the main process runs the first command
)

// Where things are inside a session's container.
const (
	workspacePath = "/workspace"
	homePath      = "/home/airlock"
	caPath        = "/etc/airlock/ca-bundle.pem"
	resolvPath    = "/etc/resolv.conf"
	aptProxyPath  = "/etc/apt/apt.conf.d/99airlock-proxy"
	dockerInit    = "/sbin/docker-init" // where Docker binds its init (Init)
	caFile        = "ca-bundle.pem"     // in the session's directory
)

// keepAlive is the container's main process: it idles until stopped, so
// that the container outlives each command. Where the engine bound its
// init (fastexec.go), the script becomes that init, which also runs
// commands; an empty file left there by a snapshot's container layer is
// not one.
var keepAlive = []string{"/bin/sh", "-c", idleScript}

const idleScript = "[ -x /.airlock/init ] && [ -s /.airlock/init ] && exec /.airlock/init; " +
	"trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"

// containerSpec is the container of a session: cmd as its main process,
// the merged workspace at /workspace, hardened and limited. A session's
// container can be made again from its record alone.
//
// A warm container (warmpool.go) is made here too, before its session
// has a project, from a record equal in every field read here; how each
// part is the same as a cold session's:
//   - Image, User, Env (rec.Env), Resources, the tmpfs size: the warm
//     entry's kind holds them (image by id), claimed only by a create
//     that asks for the same.
//   - Hostname, the AIRLOCK_SESSION variable, the labels, the container's
//     name and its cgroup parent (the meter's, by id): the entry's id is
//     the session's.
//   - The proxy variables, resolv.conf and apt's proxy (gw): the entry's
//     network is the session's; the files are written again at the claim.
//   - The trust store (CABundle): in the kind; written again at the claim.
//   - Cmd, Entrypoint, WorkingDir, Init, capabilities, no-new-privileges,
//     sysctls, network mode, the home tmpfs, the init's mounts: fixed.
//   - /workspace: the same bind of D/merged, rslave for every session
//     (its source is a shared mount, see overlay.Prepare), so that the
//     overlay mounted at the claim reaches a warm container. A cold
//     container's overlay is there before it starts.
//   - The mount points Docker makes for these mounts in the container's
//     own layer are the same in every container (mountPlaceholder lists
//     them: keep it in step), so a restore whose snapshot holds nothing
//     else of that layer starts warm.
//   - The first command's label and log settings (firstRun.configure)
//     are never a warm container's: a claimed first command runs as an
//     exec.
func (e *Engine) containerSpec(rec store.Session, cmd []string, merged string, gw netip.Addr) (*container.Config, *container.HostConfig) {
	env := append([]string{"HOME=" + homePath, "AIRLOCK_SESSION=" + rec.ID}, rec.Env...)
	mounts := []mount.Mount{{Type: mount.TypeBind, Source: merged, Target: workspacePath,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRSlave}}}
	netMode := container.NetworkMode("")
	var sysctls map[string]string
	if rec.Network != "" {
		// The session's own network; its tools use the engine's proxy
		// and DNS, and it has no IPv6.
		// Docker gives it no network; the engine plugs it into the
		// session's (see network.Net) once it runs.
		netMode = container.NetworkMode("none")
		env = append(env, proxyEnv(gw)...)
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(rec.Dir, "resolv.conf"), Target: resolvPath, ReadOnly: true},
			// apt reads no environment under sudo: tell it in its config.
			mount.Mount{Type: mount.TypeBind, Source: filepath.Join(rec.Dir, "apt-proxy.conf"), Target: aptProxyPath, ReadOnly: true})
		sysctls = map[string]string{"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
	}
	if rec.CABundle != "" || rec.Network != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(rec.Dir, caFile), Target: caPath, ReadOnly: true})
		env = append(env, caEnv()...)
	}
	mounts = append(mounts, e.fastMounts(rec)...)
	init := true
	pids := rec.Limits.Pids
	return &container.Config{
			Image:      rec.Image,
			Cmd:        cmd,
			Entrypoint: []string{},
			WorkingDir: workspacePath,
			User:       rec.User,
			Env:        env,
			Labels:     map[string]string{labelSession: rec.ID, labelEngine: e.stateDir},
			Hostname:   "airlock-" + rec.ID[:8],
		}, &container.HostConfig{
			NetworkMode: netMode,
			Sysctls:     sysctls,
			Mounts:      mounts,
			Init:        &init,
			CapDrop:     []string{"ALL"},
			CapAdd:      capAdd,
			SecurityOpt: []string{"no-new-privileges"},
			Tmpfs:       map[string]string{homePath: "mode=1777,size=512m"},
			Resources: container.Resources{
				NanoCPUs:   int64(rec.Limits.CPUs * 1e9),
				Memory:     rec.Limits.Memory,
				MemorySwap: rec.Limits.Memory, // no swap: the cap is real
				PidsLimit:  &pids,
			},
		}
}

// capAdd is what sessions keep of Docker's default capabilities: enough to
// install packages and change file owners as root, without raw sockets,
// device nodes, chroot, file capabilities or audit writes.
var capAdd = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP", "NET_BIND_SERVICE"}

// startFailed explains a session's container that did not start, or
// stopped as it started (an image whose /bin/sh is broken: its init says
// "exec /bin/sh failed: ..." and exits): what the container printed last,
// Docker's own error, and what to do. err is what the engine saw; it
// stands when the container runs after all.
func (e *Engine) startFailed(ctx context.Context, rec store.Session, mode createMode, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ins, ierr := e.docker.ContainerInspect(ctx, rec.ContainerID)
	// A container whose init failed may still show as running for a few
	// milliseconds after the step that noticed it (its network namespace
	// already gone): look again for a moment before blaming the step.
	for i := 0; i < 20 && ierr == nil && ins.State != nil && ins.State.Running; i++ {
		time.Sleep(50 * time.Millisecond)
		ins, ierr = e.docker.ContainerInspect(ctx, rec.ContainerID)
	}
	if ierr != nil || ins.State == nil || ins.State.Running {
		return err
	}
	if ins.State.OOMKilled {
		return errdefs.Invalidf("the session's container ran out of memory as it started: give it more with --memory (now %d MiB)", rec.Limits.Memory>>20)
	}
	var said []string
	if out := e.startOutput(ctx, rec.ContainerID, mode); out != "" {
		said = append(said, out)
	}
	if ins.State.Error != "" && !strings.Contains(err.Error(), ins.State.Error) {
		said = append(said, ins.State.Error)
	}
	what := err.Error()
	if ins.State.Status == "exited" {
		what = fmt.Sprintf("the session's container stopped as it started (exit code %d)", ins.State.ExitCode)
	}
	if len(said) > 0 {
		what += ": " + strings.Join(said, "; ")
	}
	return errdefs.Invalidf("%s. The image %s cannot run a session: rebuild or fix it (`airlock image ls` lists the images), or choose another with --image", what, rec.Image)
}

// startOutput is the last of what a stopped container printed: from the
// first command's attach stream (its logs are off), else from its logs.
func (e *Engine) startOutput(ctx context.Context, containerID string, mode createMode) string {
	hj := types.HijackedResponse{}
	if first, ok := mode.(*firstRun); ok && first.attach.Conn != nil {
		hj = first.attach
	} else {
		var err error
		hj, err = e.docker.ContainerAttach(ctx, containerID, container.AttachOptions{Logs: true, Stdout: true, Stderr: true})
		if err != nil {
			return ""
		}
		defer hj.Close()
	}
	// The container has stopped: the stream ends at once, or never.
	hj.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	out := &tailBuffer{max: 2 << 10}
	stdcopy.StdCopy(out, out, hj.Reader)
	lines := strings.Split(strings.TrimSpace(strings.ToValidUTF8(out.String(), "?")), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// writeCABundle writes the session's trust store: the host's system CAs,
// the extra bundle if any, and the engine's CA (for hosts whose TLS the
// proxy terminates to inject secrets), so tools that take one file
// (SSL_CERT_FILE) keep trusting public CAs too.
func writeCABundle(dir, extra string, engineCA []byte) (string, error) {
	var b []byte
	if extra != "" {
		var err error
		if b, err = os.ReadFile(extra); err != nil {
			return "", errdefs.Invalidf("CA bundle %s: %v: give a readable PEM file to --ca-bundle", extra, err)
		}
		if !strings.Contains(string(b), "-----BEGIN CERTIFICATE-----") {
			return "", errdefs.Invalidf("CA bundle %s holds no PEM certificate", extra)
		}
	}
	b = append(append(b, '\n'), engineCA...)
	var all []byte
	for _, sys := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"} {
		if s, err := os.ReadFile(sys); err == nil && sys != extra {
			all = append(s, '\n')
			break
		}
	}
	all = append(all, b...)
	p := filepath.Join(dir, caFile)
	return p, os.WriteFile(p, all, 0o644)
}

// caEnv points the usual tools at the session's trust store.
func caEnv() []string {
	return []string{
		"SSL_CERT_FILE=" + caPath,
		"REQUESTS_CA_BUNDLE=" + caPath,
		"CURL_CA_BUNDLE=" + caPath,
		"NODE_EXTRA_CA_CERTS=" + caPath,
		"GIT_SSL_CAINFO=" + caPath,
		"PIP_CERT=" + caPath,
		"NPM_CONFIG_CAFILE=" + caPath,
	}
}
