//go:build !desktop

package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
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
		// names is a leaf: anything that shows a path may import it.
		{"names", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "ci", "harness", "errdefs", "confined", "atomicfile", "github.com/"}},
		// testenv is test support any package's tests import: a leaf.
		{"testenv", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "ci", "harness", "errdefs", "confined", "atomicfile", "names", "github.com/"}},
		{"ci", []string{"app", "cmd", "github.com/wailsapp"}},
		{"daemon", []string{"app", "cmd", "ci", "github.com/wailsapp"}},
		{"snapshot", []string{"engine", "app", "cmd", "overlay", "review", "github.com/docker", "github.com/wailsapp"}},
		{"checkpoint", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "ci", "harness", "github.com/docker", "github.com/wailsapp"}},
		{"engine", []string{"app", "cmd", "github.com/wailsapp"}},
		{"engine/api", []string{"engine/", "github.com/docker", "github.com/mattn"}},
		{"engine/meter", []string{"engine", "app", "cmd", "overlay", "review", "github.com/mattn", "github.com/wailsapp"}},
		// The capability packages import nothing of the engine: the
		// session core reaches them, and they reach it only through
		// interfaces they declare (engine/network's Gateway, egress's
		// Secrets, engine/secrets's Table).
		{"engine/network", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "harness", "github.com/docker", "github.com/mattn", "github.com/wailsapp"}},
		// The session init links this package: the standard library and
		// x/sys only (the engine it cannot import: the engine imports it).
		{"engine/fastexec", []string{"engine/api", "engine/store", "engine/client", "app", "cmd", "overlay", "review", "snapshot", "harness", "errdefs", "confined", "github.com/"}},
		{"engine/criu", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "harness", "github.com/mattn", "github.com/wailsapp"}},
		// The warm pool decides how many of which kind; what an entry is,
		// the engine's Maker says: the standard library only.
		// git's ignore and attribute rules as data: the standard library
		// only (review reads the project's rules through it).
		{"gitrules", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "harness", "errdefs", "confined", "github.com/"}},
		{"engine/warm", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "harness", "errdefs", "confined", "github.com/"}},
		{"engine/secrets", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "harness", "github.com/docker", "github.com/mattn", "github.com/wailsapp"}},
		{"engine/egress", []string{"engine", "app", "cmd", "overlay", "review", "snapshot", "harness", "github.com/docker", "github.com/mattn", "github.com/wailsapp", "github.com/vishvananda"}},
		{"engine/client", []string{"engine/store", "engine/server", "github.com/docker", "github.com/mattn"}},
		{"cmd", []string{"app", "github.com/wailsapp", "github.com/docker", "github.com/mattn"}},
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
	// error classes, review (for the diff's types) and names (to quote them).
	mcpMay := []string{"engine/api", "engine/client", "errdefs", "review", "names"}
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

// TestCLIIsAClient: cmd/ reaches the engine through its API (engine/api,
// engine/client) and runs it through daemon/ and ci/, never by importing
// the engine's internals.
func TestCLIIsAClient(t *testing.T) {
	allowed := map[string]bool{"engine/api": true, "engine/client": true}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		if rel != "cmd" && !strings.HasPrefix(rel, "cmd/") {
			continue
		}
		for _, imp := range p.Imports {
			irel, ok := strings.CutPrefix(imp, mod+"/")
			if ok && (irel == "engine" || strings.HasPrefix(irel, "engine/")) && !allowed[irel] {
				t.Errorf("%s imports %s: the CLI uses engine/api and engine/client, and daemon/ to run the engine", p.ImportPath, imp)
			}
		}
	}
}

// TestOnlyDaemonBuildsAnEngine: an engine is assembled in one place,
// daemon.Assemble, which `airlock serve` and `airlock ci` both use. Test
// setup (engine/enginetest) and the benchmarks may build their own.
func TestOnlyDaemonBuildsAnEngine(t *testing.T) {
	allowed := map[string]bool{"daemon": true, "engine/enginetest": true, "bench": true}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		if allowed[rel] || !slices.Contains(p.Imports, mod+"/engine") {
			continue
		}
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			local := ""
			for _, imp := range f.Imports {
				if imp.Path.Value == strconv.Quote(mod+"/engine") {
					local = "engine"
					if imp.Name != nil {
						local = imp.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "New" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
					t.Errorf("%s calls engine.New: assemble an engine with daemon.Assemble", path)
				}
				return true
			})
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

// TestWireIsALeaf keeps the API's clients light: engine/api imports
// nothing of the project, and engine/client links, even indirectly,
// neither the engine nor the review, the agents, Docker, the secret
// scanner or git (the engine converts its types to the wire's).
func TestWireIsALeaf(t *testing.T) {
	for _, p := range listPackages(t) {
		if p.ImportPath != mod+"/engine/api" {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, mod) {
				t.Errorf("engine/api imports %s: the wire contract imports nothing of the project", imp)
			}
		}
	}
	out, err := exec.Command("go", "list", "-deps", "./engine/client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{mod + "/engine", mod + "/review", mod + "/harness",
		"github.com/docker", "github.com/moby", "github.com/zricethezav/gitleaks", "github.com/gitleaks", "github.com/go-git", "github.com/bluekeyes/go-gitdiff"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if (dep == f || strings.HasPrefix(dep, f+"/")) && !strings.HasPrefix(dep, mod+"/engine/api") && !strings.HasPrefix(dep, mod+"/engine/client") {
				t.Errorf("engine/client depends on %s: a client links only the wire contract (engine/api) and errdefs", dep)
			}
		}
	}
}

// TestCapabilitiesStayOutOfTheCore keeps the engine's capability packages
// behind their own small interfaces to the session core: they never
// import package engine (nor its store, server or client, nor Docker),
// so they are tested with fakes and the core does not leak into them.
func TestCapabilitiesStayOutOfTheCore(t *testing.T) {
	capabilities := []string{"engine/agent", "engine/ports", "engine/schedule", "engine/timeline"}
	forbidden := []string{mod + "/engine", mod + "/engine/store", mod + "/engine/server", mod + "/engine/client"}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		for _, c := range capabilities {
			if rel != c && !strings.HasPrefix(rel, c+"/") {
				continue
			}
			for _, imp := range p.Imports {
				if slices.Contains(forbidden, imp) || strings.HasPrefix(imp, "github.com/docker/") {
					t.Errorf("%s imports %s: a capability reaches the session core only through the interfaces it declares (see docs/ARCHITECTURE.md)", p.ImportPath, imp)
				}
			}
		}
	}
}

// TestEngineLinksNoDetector keeps the secret detector out of the engine's
// binary: gitleaks (its rules, its archive readers, viper) runs in
// cmd/airlock-scan, a child the engine starts while reviews need it, so
// an idle engine maps none of it (docs/ARCHITECTURE.md, "Secret
// scanning"). secretscan, the wire between them, is the standard library
// only.
func TestEngineLinksNoDetector(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./cmd/airlock-engine").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/zricethezav/gitleaks") || dep == mod+"/secretscan/gitleaks" {
			t.Errorf("cmd/airlock-engine links %s: the engine runs its secret detector as a child (airlock-scan)", dep)
		}
	}
	for _, p := range listPackages(t) {
		if p.ImportPath != mod+"/secretscan" {
			continue
		}
		for _, imp := range p.Imports {
			if strings.Contains(strings.Split(imp, "/")[0], ".") {
				t.Errorf("secretscan imports %s: the scanner's wire is the standard library only", imp)
			}
		}
	}
}

// maxEngineMethods is how many methods *engine.Engine has: the count may
// only fall (the session core's target is 50). A capability that needs
// more lands in a package of its own behind a small interface, as
// engine/agent and engine/schedule do.
const maxEngineMethods = 180

func TestEngineMethodsOnlyFall(t *testing.T) {
	files, err := filepath.Glob("engine/*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Engine" {
					n++
				}
			}
		}
	}
	switch {
	case n > maxEngineMethods:
		t.Errorf("*engine.Engine has %d methods, more than %d: put the new capability in a package of its own behind a small interface (engine/agent, engine/schedule)", n, maxEngineMethods)
	case n < maxEngineMethods:
		t.Errorf("*engine.Engine has %d methods: lower maxEngineMethods to %d so the count cannot grow back", n, n)
	}
}
