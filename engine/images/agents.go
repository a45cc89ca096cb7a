package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"
)

// AgentsName is the image with agent CLIs that agent sessions use.
const AgentsName = api.DefaultAgentsImage

// AgentsLabel lists an image's agent CLIs as name@version, comma
// separated.
const AgentsLabel = "dev.airlock.agents"

// agentsCache names the layer images: one per agent on top of the ones
// before it, so a build that adds an agent reuses the earlier layers.
const agentsCache = "airlock/agents-layer"

// agentPrefix is where agent CLIs live in the image.
const agentPrefix = "/opt/airlock"

// agents builds the default image plus the named agents' CLIs, each at
// its pinned version, installed by its package manager in a container
// and committed as a layer. Package downloads are cached on the host
// across builds.
func (b *Builder) agents(ctx context.Context, req api.ImageBuildRequest, report Progress) (*api.Image, error) {
	var list []*harness.Agent
	seen := map[string]bool{}
	for _, n := range req.Agents {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		a, err := harness.Lookup(n)
		if err != nil {
			return nil, errdefs.Invalidf("%v", err)
		}
		if a.Install.Manager == "" {
			return nil, errdefs.Invalidf("%s has nothing to install: it runs the command you give with --cmd", a.Name)
		}
		list = append(list, a)
	}
	if len(list) == 0 {
		return nil, errdefs.Invalidf("no agents named: give --agents with some of %s", strings.Join(harness.Installable(), ","))
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	name := req.Name
	if name == "" {
		name = AgentsName
	}
	baseReq := req
	baseReq.Name, baseReq.Agents, baseReq.Force = BaseName, nil, false
	if _, err := b.Docker.ImageInspect(ctx, BaseName); err != nil {
		if _, err := b.base(ctx, baseReq, func(p api.Progress) {
			p.Done, p.Image = false, nil
			report(p)
		}); err != nil {
			return nil, err
		}
	}
	baseIns, err := b.Docker.ImageInspect(ctx, BaseName)
	if err != nil {
		return nil, errdefs.NotFoundf("image %s is missing: build it with `airlock image build`", BaseName)
	}
	parts := []string{"agents", "1", baseIns.ID}
	var specs []string
	for _, a := range list {
		parts = append(parts, a.Install.Manager+":"+a.Install.Spec())
		specs = append(specs, a.Name+"@"+a.Install.Version)
	}
	full := recipe(parts...)
	if img, ok := b.cached(ctx, name, full); ok && !req.Force {
		report(api.Progress{Stage: "cached", Message: name + " is up to date (use --force to rebuild)", Done: true, Image: img})
		return img, nil
	}
	cacheDir := filepath.Join(b.Scratch, "package-cache")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	ca, err := b.buildCA()
	if err != nil {
		return nil, err
	}
	parent := baseIns.ID
	for i, a := range list {
		rec := recipe(parts[:4+i]...)
		tag := agentsCache + ":" + rec
		if img, ok := b.cached(ctx, tag, rec); ok && !req.Force {
			report(api.Progress{Stage: a.Name, Message: a.Install.Spec() + " (cached)"})
			parent = img.ID
			continue
		}
		report(api.Progress{Stage: a.Name, Message: "installing " + a.Install.Spec()})
		id, err := b.installLayer(ctx, report, parent, a, cacheDir, ca, tag, rec, strings.Join(specs[:i+1], ","))
		if err != nil {
			return nil, err
		}
		parent = id
	}
	if err := b.Docker.ImageTag(ctx, parent, name); err != nil {
		return nil, fmt.Errorf("tag %s: %w", name, err)
	}
	ins, err := b.Docker.ImageInspect(ctx, name)
	if err != nil {
		return nil, err
	}
	img := inspected(name, ins)
	report(api.Progress{Stage: "done", Message: fmt.Sprintf("built %s with %s (%d MB)", name, strings.Join(specs, ", "), img.Size>>20), Done: true, Image: img})
	return img, nil
}

// installLayer runs the agent's install in a container from parent and
// commits the result as tag.
func (b *Builder) installLayer(ctx context.Context, report Progress, parent string, a *harness.Agent, cacheDir, ca, tag, rec, agents string) (string, error) {
	var script string
	switch a.Install.Manager {
	case "npm":
		// Install scripts run: some fetch the CLI's native binary.
		script = "npm install -g --no-fund --no-audit --prefix " + agentPrefix + " " + shellQuote(a.Install.Spec())
	case "pip":
		venv := agentPrefix + "/venv/" + a.Name
		script = "python3 -m venv " + venv + " && " + venv + "/bin/pip install --no-input " + shellQuote(a.Install.Spec()) +
			" && mkdir -p " + agentPrefix + "/bin && ln -sf " + venv + "/bin/" + a.Bin + " " + agentPrefix + "/bin/" + a.Bin
	default:
		return "", errdefs.Invalidf("%s: unknown package manager %q", a.Name, a.Install.Manager)
	}
	// The build's settings live in the script, not the container's
	// environment, so that the commit does not keep them.
	env := "export NODE_EXTRA_CA_CERTS=/etc/airlock/build-ca.pem npm_config_cafile=/etc/airlock/build-ca.pem " +
		"npm_config_cache=/var/cache/airlock/npm PIP_CERT=/etc/airlock/build-ca.pem PIP_CACHE_DIR=/var/cache/airlock/pip " +
		"npm_config_update_notifier=false; "
	created, err := b.Docker.ContainerCreate(ctx, &container.Config{
		Image: parent, User: "0:0", Cmd: []string{"/bin/sh", "-c", env + "set -e; " + script + " 2>&1"},
		Labels: map[string]string{"dev.airlock.build": a.Name},
	}, &container.HostConfig{Mounts: []mount.Mount{
		{Type: mount.TypeBind, Source: cacheDir, Target: "/var/cache/airlock"},
		{Type: mount.TypeBind, Source: ca, Target: "/etc/airlock/build-ca.pem", ReadOnly: true},
	}}, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("create the %s install container: %w", a.Name, err)
	}
	defer b.Docker.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	hj, err := b.Docker.ContainerAttach(ctx, created.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return "", err
	}
	defer hj.Close()
	if err := b.Docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return "", fmt.Errorf("start the %s install: %w", a.Name, err)
	}
	tail := &lineReporter{report: report, stage: a.Name}
	stdcopy.StdCopy(tail, tail, hj.Reader)
	waitC, errC := b.Docker.ContainerWait(ctx, created.ID, container.WaitConditionNotRunning)
	var code int64
	select {
	case w := <-waitC:
		code = w.StatusCode
	case err := <-errC:
		return "", err
	}
	if code != 0 {
		hint := "check that the machine reaches the " + a.Install.Manager + " package index (and set ca_bundle if a proxy intercepts TLS)"
		return "", errdefs.Unavailablef("installing %s failed (exit %d): %s: %s", a.Install.Spec(), code, hint, tail.last())
	}
	res, err := b.Docker.ContainerCommit(ctx, created.ID, container.CommitOptions{
		Reference: tag,
		Comment:   "airlock: " + a.Install.Spec(),
		Config: &container.Config{
			User:       "",
			Cmd:        []string{"/bin/bash"},
			WorkingDir: "/workspace",
			Env:        []string{"PATH=" + agentPrefix + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
			Labels:     map[string]string{RecipeLabel: rec, AgentsLabel: agents, "dev.airlock.build": ""},
		},
	})
	if err != nil {
		return "", fmt.Errorf("commit the %s layer: %w", a.Name, err)
	}
	return res.ID, nil
}

// buildCA writes the CA bundle build containers trust: the host's system
// bundle plus the configured extra one (intercepting proxies).
func (b *Builder) buildCA() (string, error) {
	var all []byte
	for _, p := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"} {
		if data, err := os.ReadFile(p); err == nil {
			all = append(data, '\n')
			break
		}
	}
	if b.CABundle != "" {
		extra, err := os.ReadFile(b.CABundle)
		if err != nil {
			return "", errdefs.Invalidf("CA bundle %s: %v", b.CABundle, err)
		}
		all = append(all, extra...)
	}
	p := filepath.Join(b.Scratch, "build-ca.pem")
	return p, os.WriteFile(p, all, 0o644)
}

// lineReporter reports each output line and keeps the last few.
type lineReporter struct {
	report Progress
	stage  string
	buf    []byte
	lines  []string
}

func (l *lineReporter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSpace(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
		if line == "" {
			continue
		}
		l.report(api.Progress{Stage: l.stage, Message: line})
		l.lines = append(l.lines, line)
		if len(l.lines) > 5 {
			l.lines = l.lines[1:]
		}
	}
}

func (l *lineReporter) last() string { return strings.Join(l.lines, " | ") }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var _ io.Writer = (*lineReporter)(nil)
