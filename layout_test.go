//go:build !desktop

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Doc        string
	Imports    []string
	Deps       []string
	Name       string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "-deps=false", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p.ImportPath, "/node_modules/") {
			continue // npm packages that ship Go (flatted, under ESLint) are not ours
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

const mod = "github.com/airlock/airlock"

// TestDependencyDirection keeps the layering of docs/ARCHITECTURE.md:
// main/cmd and app -> engine -> overlay, review; nothing imports app or
// cmd; only app and the root main.go import Wails; the libraries below
// the engine never import it.
func TestDependencyDirection(t *testing.T) {
	rules := []struct {
		pkg       string // import path prefix (relative to the module)
		forbidden []string
	}{
		{"overlay", []string{"engine", "app", "cmd", "review", "github.com/docker", "github.com/wailsapp"}},
		{"review", []string{"engine", "app", "cmd", "overlay", "github.com/docker", "github.com/wailsapp"}},
		{"harness", []string{"engine", "app", "cmd", "overlay", "review", "github.com/docker", "github.com/wailsapp"}},
		{"errdefs", []string{"engine", "app", "cmd", "overlay", "review"}},
		{"confined", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "ci", "harness", "errdefs", "atomicfile"}},
		{"atomicfile", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "ci", "harness", "errdefs"}},
		{"ci", []string{"app", "cmd", "github.com/wailsapp"}},
		{"snapshot", []string{"engine", "app", "cmd", "overlay", "review", "github.com/docker", "github.com/wailsapp"}},
		{"engine", []string{"app", "cmd", "github.com/wailsapp"}},
		{"engine/api", []string{"engine/", "github.com/docker", "github.com/mattn"}},
		{"engine/meter", []string{"engine", "app", "cmd", "overlay", "review", "github.com/mattn", "github.com/wailsapp"}},
		{"engine/client", []string{"engine/store", "engine/server", "github.com/docker", "github.com/mattn"}},
		{"cmd", []string{"app", "github.com/wailsapp"}},
	}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		for _, r := range rules {
			if rel != r.pkg && !strings.HasPrefix(rel, r.pkg+"/") {
				continue
			}
			for _, imp := range p.Imports {
				irel := strings.TrimPrefix(strings.TrimPrefix(imp, mod), "/")
				for _, f := range r.forbidden {
					bad := false
					if strings.HasSuffix(f, "/") {
						bad = strings.HasPrefix(irel, f) && strings.HasPrefix(imp, mod)
					} else if strings.HasPrefix(f, "github.com/") {
						bad = strings.HasPrefix(imp, f)
					} else {
						bad = strings.HasPrefix(imp, mod) && (irel == f || strings.HasPrefix(irel, f+"/"))
					}
					if bad && irel != rel {
						t.Errorf("%s imports %s: forbidden by the layering (see docs/ARCHITECTURE.md)", p.ImportPath, imp)
					}
				}
			}
		}
	}
	// The MCP server is a client of the engine's API like any other: of the
	// project's packages it imports only the contract, the client, the
	// error classes and review (for the diff's types).
	mcpMay := []string{"engine/api", "engine/client", "errdefs", "review"}
	for _, p := range listPackages(t) {
		if p.ImportPath != mod+"/mcp" && !strings.HasPrefix(p.ImportPath, mod+"/mcp/") {
			continue
		}
		for _, imp := range p.Imports {
			if irel, ok := strings.CutPrefix(imp, mod+"/"); ok && !slices.Contains(mcpMay, irel) && !strings.HasPrefix(irel, "mcp/") {
				t.Errorf("%s imports %s: the MCP server reaches the engine only through engine/client (it may import %v)", p.ImportPath, imp, mcpMay)
			}
		}
	}
	// Nothing outside app and the root imports app.
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if imp == mod+"/app" && p.ImportPath != mod {
				t.Errorf("%s imports app: only the desktop main.go may", p.ImportPath)
			}
			if strings.HasPrefix(imp, "github.com/wailsapp") && p.ImportPath != mod+"/app" && p.ImportPath != mod {
				t.Errorf("%s imports Wails: only app/ and main.go may", p.ImportPath)
			}
		}
	}
}

// TestEveryPackageHasADocComment keeps `go doc` useful.
func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range listPackages(t) {
		if p.Doc == "" {
			t.Errorf("%s has no package doc comment", p.ImportPath)
		}
	}
}

// TestNoLargeTrackedFiles keeps build outputs out of the repository: no
// tracked file over 2 MB, except the documentation's screenshots.
func TestNoLargeTrackedFiles(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" || strings.HasPrefix(name, "docs/screenshots/") {
			continue
		}
		fi, err := os.Lstat(name)
		if err != nil {
			continue // deleted in the work tree
		}
		if fi.Size() > 2<<20 {
			t.Errorf("%s is tracked and has %d bytes: build outputs go to bin/ (ignored), never into git", name, fi.Size())
		}
	}
}
