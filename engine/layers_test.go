package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// TestUndoAndForkCoverContainerAndHome: an agent-less session whose
// turn 1 installs a tool under /usr/local/bin and writes ~/.config/x and
// whose turn 2 removes them: undo to after turn 1 brings both back with
// the workspace (the container is made again, and still runs commands),
// and a fork from turn 1 has them.
func TestUndoAndForkCoverContainerAndHome(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	customTurn(t, e, s.ID, `mkdir -p /usr/local/bin /home/airlock/.config && printf '#!/bin/sh\necho tool ran\n' > /usr/local/bin/tool && chmod 755 /usr/local/bin/tool && echo x > /home/airlock/.config/x && echo one > one.txt`)
	customTurn(t, e, s.ID, `rm /usr/local/bin/tool /home/airlock/.config/x one.txt`)
	const check = "/usr/local/bin/tool; cat /home/airlock/.config/x one.txt"
	if code, out := run(t, e, s.ID, "sh", "-c", check); code == 0 {
		t.Fatalf("turn 2 removed nothing: %q", out)
	}
	before, err := e.Get(ctx, s.ID)
	must(t, err)

	u, err := e.Undo(ctx, s.ID, api.UndoRequest{})
	must(t, err)
	if !u.Layers {
		t.Errorf("undo did not say it put the container layer and home back: %+v", u)
	}
	if code, out := run(t, e, s.ID, "sh", "-c", check); code != 0 || out != "tool ran\nx\none\n" {
		t.Fatalf("after undo to turn 1: %d %q", code, out)
	}
	after, err := e.Get(ctx, s.ID)
	must(t, err)
	if after.State != api.StateRunning || after.ContainerID == before.ContainerID {
		t.Errorf("after undo the session is %s in container %.12s (was %.12s): the container was to be made again", after.State, after.ContainerID, before.ContainerID)
	}
	// The undo is a checkpoint like any other: undone, the tool is gone.
	_, err = e.Undo(ctx, s.ID, api.UndoRequest{Checkpoint: u.Before})
	must(t, err)
	if code, out := run(t, e, s.ID, "sh", "-c", "test -e /usr/local/bin/tool || test -e /home/airlock/.config/x || echo gone"); code != 0 || out != "gone\n" {
		t.Errorf("after undoing the undo: %d %q", code, out)
	}

	forked, err := e.Fork(ctx, s.ID, api.ForkRequest{Turn: 1})
	must(t, err)
	if len(forked.Sessions) != 1 {
		t.Fatalf("fork: %+v", forked)
	}
	if code, out := run(t, e, forked.Sessions[0].ID, "sh", "-c", check); code != 0 || out != "tool ran\nx\none\n" {
		t.Errorf("a fork from turn 1: %d %q", code, out)
	}
}

// TestUndoContainerLayerHostile: a container layer holding a symlink to a
// host directory, a FIFO, a whiteout of an image file and an opaque
// directory is recorded and undone to without anything on the host
// followed, opened or written, and comes back as it was.
func TestUndoContainerLayerHostile(t *testing.T) {
	e := enginetest.Start(t)
	ctx := context.Background()
	s, err := e.Create(ctx, api.CreateRequest{Project: project(t)})
	must(t, err)
	host := t.TempDir()
	must(t, os.WriteFile(filepath.Join(host, "host.txt"), []byte("host\n"), 0o644))
	code, out := run(t, e, s.ID, "sh", "-c", "set -e; ln -s "+host+" /usr/evil; ln -s "+host+"/host.txt /usr/evil-file; mkfifo /usr/fifo; rm /linuxrc; rm -rf /usr/sbin; mkdir /usr/sbin; echo n > /usr/sbin/new; echo w > w.txt")
	if code != 0 {
		t.Fatalf("command 1: %d %s", code, out)
	}
	list, err := e.Checkpoints(ctx, s.ID)
	must(t, err)
	first := list[len(list)-1].ID
	code, out = run(t, e, s.ID, "sh", "-c", "set -e; rm /usr/evil /usr/evil-file /usr/fifo; ln -s /bin/busybox /linuxrc; rm -r /usr/sbin; mkdir /usr/sbin; rm w.txt")
	if code != 0 {
		t.Fatalf("command 2: %d %s", code, out)
	}
	u, err := e.Undo(ctx, s.ID, api.UndoRequest{Checkpoint: first})
	must(t, err)
	if !u.Layers {
		t.Errorf("undo did not put the container layer back: %+v", u)
	}
	names, _ := os.ReadDir(host)
	if len(names) != 1 {
		t.Errorf("the host directory the session's symlinks name holds %v", names)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "host.txt")); string(b) != "host\n" {
		t.Errorf("the host file the session's symlink names was written: %q", b)
	}
	_, out = run(t, e, s.ID, "sh", "-c", "readlink /usr/evil; readlink /usr/evil-file; test -p /usr/fifo && echo fifo; test -e /linuxrc || echo whiteout; ls /usr/sbin; cat w.txt")
	if want := host + "\n" + host + "/host.txt\nfifo\nwhiteout\nnew\nw\n"; out != want {
		t.Errorf("after undo:\n%s\nwant\n%s", out, want)
	}
}
