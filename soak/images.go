package soak

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// BareImage is the soak's minimal imported image: the host's static
// busybox as /bin, and /etc/passwd — nothing else (no /workspace, /home
// or /tmp), as users' own imported and distroless images are.
const BareImage = "airlock/soak-bare"

// setupImages builds airlock/tiny through the engine and imports the
// bare image.
func (s *soaker) setupImages(ctx context.Context) error {
	if code, _, errs := s.cli(ctx, "image", "build", "--tiny"); code != 0 {
		return fmt.Errorf("build airlock/tiny: %s", errs)
	}
	if err := importBare(ctx); err != nil {
		return err
	}
	s.images = []string{"airlock/tiny", BareImage}
	return nil
}

func importBare(ctx context.Context) error {
	if exec.CommandContext(ctx, "docker", "image", "inspect", BareImage).Run() == nil {
		return nil // made by an earlier soak (an import each run would leave the last one dangling)
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("the bare image needs the host's busybox: %w", err)
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	applets, err := exec.CommandContext(ctx, bb, "--list-full").Output()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755})
	}
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(data))})
	tw.Write(data)
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\n")
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd))})
	tw.Write(passwd)
	for _, a := range strings.Fields(string(applets)) {
		if a != "bin/busybox" {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox"})
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "docker", "import", "--change", "ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin", "--change", "WORKDIR /workspace", "-", BareImage)
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker import %s: %v: %s", BareImage, err, out)
	}
	return nil
}
