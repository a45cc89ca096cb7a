// Package images builds the local images sessions run in, with no
// container registry: the default image from a Debian minimal rootfs made
// by debootstrap, and a tiny busybox image for tests. Both are imported
// through the Docker Engine API.
package images

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
)

// Docker is the part of the Docker API image builds use.
type Docker interface {
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
	ImageTag(ctx context.Context, source, target string) error
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerAttach(ctx context.Context, containerID string, options container.AttachOptions) (types.HijackedResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerCommit(ctx context.Context, containerID string, options container.CommitOptions) (container.CommitResponse, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
}

// Names of the images Airlock builds.
const (
	BaseName = "airlock/base"
	TinyName = "airlock/tiny"
)

// RecipeLabel holds a hash of what an image was built from; an image with
// the current recipe is not built again unless forced.
const RecipeLabel = "dev.airlock.recipe"

// BasePackages are installed into the default image.
var BasePackages = []string{
	"bash", "ca-certificates", "curl", "git", "build-essential", "python3", "python3-venv",
	"nodejs", "npm", "procps", "less", "openssh-client", "patch", "xz-utils", "unzip", "jq",
}

// Progress receives a build's progress.
type Progress func(api.Progress)

// Builder builds images. Scratch is a directory for root filesystems and
// package caches; CABundle, if set, is an extra CA bundle builds trust.
type Builder struct {
	Docker   Docker
	Scratch  string
	CABundle string
}

func recipe(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}

// cached returns the image if it exists with the given recipe.
func (b *Builder) cached(ctx context.Context, name, rec string) (*api.Image, bool) {
	ins, err := b.Docker.ImageInspect(ctx, name)
	if err != nil || ins.Config == nil || ins.Config.Labels[RecipeLabel] != rec {
		return nil, false
	}
	return inspected(name, ins), true
}

func inspected(name string, ins image.InspectResponse) *api.Image {
	img := &api.Image{Name: name, ID: ins.ID, Size: ins.Size}
	if t, err := time.Parse(time.RFC3339Nano, ins.Created); err == nil {
		img.Created = t
	}
	if ins.Config != nil {
		img.Recipe = ins.Config.Labels[RecipeLabel]
	}
	return img
}

// Build builds the image req asks for, or returns the cached one.
func (b *Builder) Build(ctx context.Context, req api.ImageBuildRequest, progress Progress) (*api.Image, error) {
	if progress == nil {
		progress = func(api.Progress) {}
	}
	start := time.Now()
	report := func(p api.Progress) {
		p.Elapsed = time.Since(start)
		progress(p)
	}
	switch req.Kind {
	case "", "base":
		return b.base(ctx, req, report)
	case "tiny":
		return b.tiny(ctx, req, report)
	case "agents":
		return b.agents(ctx, req, report)
	}
	return nil, errdefs.Invalidf("unknown image kind %q: use base, tiny or agents", req.Kind)
}

// tiny builds a busybox image from the host's static busybox, in memory.
func (b *Builder) tiny(ctx context.Context, req api.ImageBuildRequest, report Progress) (*api.Image, error) {
	name := req.Name
	if name == "" {
		name = TinyName
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return nil, errdefs.Unavailablef("busybox is not installed: `apt-get install busybox-static`, then build again")
	}
	if f, err := elf.Open(bb); err == nil {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				f.Close()
				return nil, errdefs.Unavailablef("%s is dynamically linked: install the static build with `apt-get install busybox-static`", bb)
			}
		}
		f.Close()
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return nil, err
	}
	rec := recipe("tiny", "1", fmt.Sprintf("%x", sha256.Sum256(data)))
	if img, ok := b.cached(ctx, name, rec); ok && !req.Force {
		report(api.Progress{Stage: "cached", Message: name + " is up to date", Done: true, Image: img})
		return img, nil
	}
	out, err := exec.CommandContext(ctx, bb, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	report(api.Progress{Stage: "rootfs", Message: "busybox rootfs"})
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		now := time.Now()
		dir := func(n string, mode int64) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n + "/", Mode: mode, ModTime: now})
		}
		file := func(n string, mode int64, body []byte) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: mode, Size: int64(len(body)), ModTime: now})
			tw.Write(body)
		}
		for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "workspace", "home"} {
			dir(d, 0o755)
		}
		dir("tmp", 0o1777)
		dir("home/airlock", 0o1777)
		file("bin/busybox", 0o755, data)
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
		file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
		for _, applet := range strings.Fields(string(out)) {
			if applet == "bin/busybox" || applet == "busybox" {
				continue
			}
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: applet, Linkname: "/bin/busybox", ModTime: now})
		}
		pw.CloseWithError(tw.Close())
	}()
	img, err := b.importTar(ctx, pr, name, rec, []string{"ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin", "WORKDIR /workspace", `CMD ["/bin/sh"]`})
	if err != nil {
		return nil, err
	}
	report(api.Progress{Stage: "done", Message: "built " + name, Done: true, Image: img})
	return img, nil
}

func (b *Builder) importTar(ctx context.Context, r io.Reader, name, rec string, changes []string) (*api.Image, error) {
	changes = append(changes, "LABEL "+RecipeLabel+"="+rec)
	resp, err := b.Docker.ImageImport(ctx, image.ImportSource{Source: r, SourceName: "-"}, name, image.ImportOptions{Changes: changes})
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			return nil, errdefs.Unavailablef("Docker is not running: start it with `sudo systemctl start docker` (or `sudo dockerd &`), then build again")
		}
		return nil, fmt.Errorf("import image: %w", err)
	}
	defer resp.Close()
	// The import answers with JSON messages; an error arrives as one.
	dec := json.NewDecoder(resp)
	for {
		var m struct {
			Error  string `json:"error"`
			Status string `json:"status"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("import image: %w", err)
		}
		if m.Error != "" {
			return nil, fmt.Errorf("import image: %s", m.Error)
		}
	}
	ins, err := b.Docker.ImageInspect(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("inspect imported image: %w", err)
	}
	return inspected(name, ins), nil
}

// hostSuite is the Debian suite of the host, or stable.
func hostSuite() string {
	data, err := os.ReadFile("/etc/os-release")
	if err == nil {
		isDebian := false
		code := ""
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "VERSION_CODENAME="); ok {
				code = strings.Trim(v, `"`)
			}
			if l == "ID=debian" {
				isDebian = true
			}
		}
		if isDebian && code != "" {
			return code
		}
	}
	return "stable"
}

// base builds the default image: debootstrap a minimal Debian, install the
// packages in a chroot, import the tree.
func (b *Builder) base(ctx context.Context, req api.ImageBuildRequest, report Progress) (*api.Image, error) {
	name := req.Name
	if name == "" {
		name = BaseName
	}
	suite := req.Suite
	if suite == "" {
		suite = hostSuite()
	}
	rec := recipe("base", "1", suite, req.Mirror, strings.Join(BasePackages, ","))
	if img, ok := b.cached(ctx, name, rec); ok && !req.Force {
		report(api.Progress{Stage: "cached", Message: name + " is up to date (use --force to rebuild)", Done: true, Image: img})
		return img, nil
	}
	if os.Geteuid() != 0 {
		return nil, errdefs.Forbiddenf("building the base image runs debootstrap, which needs root: run the engine as root")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return nil, errdefs.Unavailablef("debootstrap is not installed: `apt-get install debootstrap`, then build again")
	}
	if err := os.MkdirAll(b.Scratch, 0o700); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(b.Scratch, "rootfs-")
	if err != nil {
		return nil, err
	}
	root := filepath.Join(work, "root")
	defer cleanupRoot(work, root)

	args := []string{"--variant=minbase", suite, root}
	if req.Mirror != "" {
		args = append(args, req.Mirror)
	}
	report(api.Progress{Stage: "debootstrap", Message: "minimal Debian " + suite})
	if err := run(ctx, report, "debootstrap", exec.CommandContext(ctx, "debootstrap", args...)); err != nil {
		return nil, err
	}
	if err := chrootMounts(root); err != nil {
		return nil, err
	}
	copyFile("/etc/resolv.conf", filepath.Join(root, "etc/resolv.conf"))
	install := exec.CommandContext(ctx, "chroot", append([]string{root, "apt-get", "install", "-y", "--no-install-recommends", "-o", "Dpkg::Use-Pty=0"}, BasePackages...)...)
	install.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
	report(api.Progress{Stage: "packages", Message: strings.Join(BasePackages, " ")})
	update := exec.CommandContext(ctx, "chroot", root, "apt-get", "update")
	update.Env = install.Env
	if err := run(ctx, report, "packages", update); err != nil {
		return nil, err
	}
	if err := run(ctx, report, "packages", install); err != nil {
		return nil, err
	}
	clean := exec.CommandContext(ctx, "chroot", root, "apt-get", "clean")
	clean.Env = install.Env
	run(ctx, report, "packages", clean)
	unmountUnder(root)
	for _, p := range []string{"var/lib/apt/lists", "var/cache/apt/archives", "var/log/apt", "tmp"} {
		os.RemoveAll(filepath.Join(root, p))
	}
	os.WriteFile(filepath.Join(root, "etc/resolv.conf"), nil, 0o644)
	for _, d := range []struct {
		p    string
		mode os.FileMode
	}{{"tmp", 0o1777}, {"workspace", 0o755}, {"home/airlock", 0o1777}, {"var/lib/apt/lists/partial", 0o700}} {
		os.MkdirAll(filepath.Join(root, d.p), 0o755)
		os.Chmod(filepath.Join(root, d.p), d.mode)
	}
	report(api.Progress{Stage: "import", Message: "importing the root filesystem into Docker"})
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarTree(pw, root)) }()
	img, err := b.importTar(ctx, pr, name, rec, []string{
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"ENV LANG=C.UTF-8",
		"WORKDIR /workspace",
		`CMD ["/bin/bash"]`,
	})
	if err != nil {
		return nil, err
	}
	report(api.Progress{Stage: "done", Message: fmt.Sprintf("built %s (%d MB)", name, img.Size>>20), Done: true, Image: img})
	return img, nil
}

// run runs cmd, reporting each output line under stage; the last lines
// are kept for the error message.
func run(ctx context.Context, report Progress, stage string, cmd *exec.Cmd) error {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	var last []string
	done := make(chan struct{})
	n := 0
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			last = append(last, line)
			if len(last) > 15 {
				last = last[1:]
			}
			if strings.HasPrefix(line, "I: Retrieving ") || strings.HasPrefix(line, "Get:") || strings.HasPrefix(line, "Unpacking ") {
				n++
			}
			report(api.Progress{Stage: stage, Message: line, Current: n})
		}
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errdefs.Unavailablef("%s failed (%v); last output:\n%s\ncheck that this machine reaches the Debian package mirror", stage, err, strings.Join(last, "\n"))
	}
	return nil
}

func chrootMounts(root string) error {
	if err := unix.Mount("proc", filepath.Join(root, "proc"), "proc", 0, ""); err != nil {
		return fmt.Errorf("mount proc in the build root: %w", err)
	}
	return nil
}

// unmountUnder lazily unmounts everything mounted below root.
func unmountUnder(root string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], root+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		unix.Unmount(points[i], unix.MNT_DETACH)
	}
}

// cleanupRoot removes a build root, but only once nothing is mounted in it.
func cleanupRoot(work, root string) {
	unmountUnder(root)
	data, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(data), " "+root+"/") {
		return // never recurse into a live /proc or /dev
	}
	os.RemoveAll(work)
}

func copyFile(src, dst string) {
	if b, err := os.ReadFile(src); err == nil {
		os.Remove(dst)
		os.WriteFile(dst, b, 0o644)
	}
}

// tarTree writes the tree at root as a tar stream, keeping owners, modes,
// hard links and file capabilities. Device nodes are left out: Docker
// provides /dev.
func tarTree(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		var link string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if fi.Mode()&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			return nil
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = tar.FormatPAX
		if fi.Mode().IsRegular() && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(hdr)
			}
			links[key] = rel
		}
		if fi.Mode().IsRegular() {
			buf := make([]byte, 256)
			if n, err := unix.Lgetxattr(p, "security.capability", buf); err == nil && n > 0 {
				hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(buf[:n])}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
