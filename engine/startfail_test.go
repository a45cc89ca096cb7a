package engine_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// brokenShellImage builds, from the host's static busybox like the tiny
// image, an image whose /bin/sh is a symlink loop: every tool is there
// but no shell starts.
func brokenShellImage(t *testing.T, d *client.Client) string {
	t.Helper()
	return busyboxImage(t, d, "airlock/test-broken-sh", []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "tmp", "workspace", "home", "home/airlock"}, true)
}

// busyboxImage imports, as `docker import` would, a root file system of
// the host's static busybox, /etc/passwd and the directories dirs (each
// 1777) — nothing else: users' own imported and distroless images look
// like this. With loopShell its /bin/sh is a symlink loop.
func busyboxImage(t *testing.T, d *client.Client, name string, dirs []string, loopShell bool) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	must(t, err)
	data, err := os.ReadFile(bb)
	must(t, err)
	applets, err := exec.Command(bb, "--list-full").Output()
	must(t, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range dirs {
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o1777}))
	}
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(data))}))
	tw.Write(data)
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\n")
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd))}))
	tw.Write(passwd)
	for _, a := range strings.Fields(string(applets)) {
		if a == "bin/busybox" || (loopShell && a == "bin/sh") {
			continue
		}
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox"}))
	}
	if loopShell {
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/sh", Linkname: "/bin/sh.loop"}))
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/sh.loop", Linkname: "/bin/sh"}))
	}
	must(t, tw.Close())
	resp, err := d.ImageImport(context.Background(), image.ImportSource{Source: &buf, SourceName: "-"}, name,
		image.ImportOptions{Changes: []string{"ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin", "WORKDIR /workspace"}})
	must(t, err)
	defer resp.Close()
	dec := json.NewDecoder(resp)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil || m.Error != "" {
			t.Fatalf("import %s: %v %s", name, err, m.Error)
		}
	}
	return name
}

// TestBrokenImageSaysWhy: a session whose image cannot start its shell
// fails with what the container itself said, and with what to do; nothing
// of it is left behind.
func TestBrokenImageSaysWhy(t *testing.T) {
	e := enginetest.Start(t)
	img := brokenShellImage(t, e.Docker)
	ctx := context.Background()
	p := project(t)
	for _, tc := range []struct {
		name string
		make func() error
	}{
		{"new", func() error {
			_, err := e.Create(ctx, api.CreateRequest{Project: p, Image: img})
			return err
		}},
		{"run", func() error {
			var out bytes.Buffer
			_, err := e.Run(ctx, api.CreateRequest{Project: p, Image: img}, api.ExecRequest{Argv: []string{"true"}},
				engine.ExecIO{Stdout: &out, Stderr: &out}, nil)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make()
			if err == nil {
				t.Fatal("a session started on an image with no working shell")
			}
			t.Logf("%s: %v", tc.name, err)
			for _, want := range []string{"Too many levels of symbolic links", img, "airlock image ls"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
			if list, _ := e.List(ctx); len(list) != 0 {
				t.Errorf("the failed session was left behind: %+v", list)
			}
		})
	}
}
