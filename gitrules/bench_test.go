package gitrules

import (
	"fmt"
	"strings"
	"testing"
)

// nodeTree is 200,000 paths shaped like an npm install: 5,000 packages
// of 40 files in a few folders, plus the project's own few.
func nodeTree() []string {
	var paths []string
	for _, p := range []string{"package.json", "README.md", "src/index.ts", "src/app.ts", "test/app.test.ts", "app.log"} {
		paths = append(paths, p)
	}
	dirs := []string{"", "lib/", "dist/", "test/", "lib/internal/"}
	for i := 0; len(paths) < 200_000; i++ {
		pkg := fmt.Sprintf("node_modules/pkg-%d/", i)
		if i%7 == 0 {
			pkg = fmt.Sprintf("node_modules/@scope%d/pkg-%d/", i%13, i)
		}
		for j := 0; j < 40 && len(paths) < 200_000; j++ {
			ext := []string{".js", ".d.ts", ".json", ".md", ".map"}[j%5]
			paths = append(paths, pkg+dirs[j%len(dirs)]+fmt.Sprintf("f%d%s", j, ext))
		}
	}
	return paths
}

// nodeRules are a Node project's rules; with node_modules/ ignored, or
// not (then every path meets every pattern, and some packages have a
// .gitignore of their own).
func nodeRules(ignoreModules bool) files {
	top := "dist/\ncoverage/\n*.log\n.env\n.DS_Store\n/build\n**/tmp/**\n*.tgz\n!keep.log\n"
	if ignoreModules {
		top = "node_modules/\n" + top
	}
	fs := files{".gitignore": top}
	for i := 0; i < 5000; i += 50 {
		fs[fmt.Sprintf("node_modules/pkg-%d/.gitignore", i)] = "*.map\n!lib/\n"
	}
	return fs
}

// BenchmarkIgnored: every path of a 200,000-path node_modules tree, with
// fresh rules each round (every .gitignore read once); ns/path is the
// figure to read.
func BenchmarkIgnored(b *testing.B) {
	paths := nodeTree()
	for _, ignoreModules := range []bool{true, false} {
		fs := nodeRules(ignoreModules)
		name := "modules-ignored"
		if !ignoreModules {
			name = "modules-matched"
		}
		b.Run(name+"/path", func(b *testing.B) {
			ignored := 0
			for b.Loop() {
				r := New(Options{Read: fs.read})
				ignored = 0
				for _, p := range paths {
					if ok, _ := r.Ignored(p, false); ok {
						ignored++
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(paths)), "ns/path")
			b.ReportMetric(float64(ignored), "ignored")
		})
		b.Run(name+"/walk", func(b *testing.B) {
			tree := treeOf(paths)
			for b.Loop() {
				walkTree(New(Options{Read: fs.read}).Root(), tree)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(paths)), "ns/path")
		})
	}
}

// tree is a directory's files and subdirectories, for a walker.
type tree struct {
	files []string
	dirs  map[string]*tree
}

func treeOf(paths []string) *tree {
	root := &tree{dirs: map[string]*tree{}}
	for _, p := range paths {
		t := root
		elems := strings.Split(p, "/")
		for _, e := range elems[:len(elems)-1] {
			if t.dirs[e] == nil {
				t.dirs[e] = &tree{dirs: map[string]*tree{}}
			}
			t = t.dirs[e]
		}
		t.files = append(t.files, elems[len(elems)-1])
	}
	return root
}

// walkTree asks as a review's walker does: each entry in its directory,
// entering every directory (ignored paths are counted too).
func walkTree(d *Dir, t *tree) {
	for _, f := range t.files {
		d.Ignored(f, false)
	}
	for name, sub := range t.dirs {
		d.Ignored(name, true)
		walkTree(d.Child(name), sub)
	}
}
