package images_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
	"github.com/airlock/airlock/engine/images"
	"github.com/airlock/airlock/errdefs"
)

// TestBaseImage builds the default image as `airlock image build` does
// (a no-op when it is up to date) and checks that the tools the README
// promises are in it and work.
func TestBaseImage(t *testing.T) {
	d := enginetest.Require(t)
	ctx := context.Background()
	b := &images.Builder{Docker: d, Scratch: t.TempDir()}
	var stages []string
	img, err := b.Build(ctx, api.ImageBuildRequest{}, func(p api.Progress) {
		if len(stages) == 0 || stages[len(stages)-1] != p.Stage {
			stages = append(stages, p.Stage)
		}
	})
	if err != nil {
		t.Fatalf("build: %v (stages %v)", err, stages)
	}
	if img.Name != images.BaseName || img.Recipe == "" {
		t.Errorf("image %+v", img)
	}
	if last := stages[len(stages)-1]; last != "done" && last != "cached" {
		t.Errorf("progress ended with %q: %v", last, stages)
	}
	// A second build is a cache hit.
	again, err := b.Build(ctx, api.ImageBuildRequest{}, nil)
	if err != nil || again.ID != img.ID {
		t.Errorf("rebuild without --force: %v, id %s vs %s", err, again.ID, img.ID)
	}

	e := enginetest.Start(t)
	p := t.TempDir()
	os.WriteFile(p+"/hello.c", []byte("#include <stdio.h>\nint main(void){puts(\"compiled\");return 0;}\n"), 0o644)
	s, err := e.Create(ctx, api.CreateRequest{Project: p, Image: images.BaseName})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code, err := e.Exec(ctx, s.ID, api.ExecRequest{Argv: []string{"bash", "-c",
		"set -e; git --version; python3 -c 'print(6*7)'; node -e 'console.log(\"node ok\")'; npm --version; " +
			"gcc -o /tmp/hello hello.c && /tmp/hello; curl --version | head -1; test -s /etc/ssl/certs/ca-certificates.crt; echo HOME=$HOME"}},
		engine.ExecIO{Stdout: &out, Stderr: &out})
	if err != nil || code != 0 {
		t.Fatalf("tools in %s: exit %d, %v\n%s", images.BaseName, code, err, out.String())
	}
	for _, want := range []string{"git version", "42", "node ok", "compiled", "curl", "HOME=/home/airlock"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
}

func TestTinyImageRejectsUnknownKind(t *testing.T) {
	b := &images.Builder{}
	if _, err := b.Build(context.Background(), api.ImageBuildRequest{Kind: "huge"}, nil); err == nil || !strings.Contains(err.Error(), "base, tiny or agents") {
		t.Errorf("unknown kind: %v", err)
	}
}

// Agents to install are checked before anything is built.
func TestAgentsImageRejectsBadNames(t *testing.T) {
	b := &images.Builder{}
	for agents, want := range map[string]string{
		"":              "no agents named",
		"claude,nosuch": "unknown agent \"nosuch\"",
		"custom":        "nothing to install",
	} {
		_, err := b.Build(context.Background(), api.ImageBuildRequest{Kind: "agents", Agents: strings.Split(agents, ",")}, nil)
		if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("--agents %q: %v, want an invalid-input error saying %q", agents, err, want)
		}
	}
}
