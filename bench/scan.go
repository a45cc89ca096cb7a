package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/secretscan/gitleaks"
	"github.com/airlock/airlock/secretscan/nodetree"
	"github.com/zricethezav/gitleaks/v8/detect"
)

// secretScan is benchmark 20: `airlock diff --json` of a session that
// added size bytes of text shaped like node_modules (thousands of small
// files, minified bundles with lines of 100 KB to 1 MB, secrets planted),
// which no ignore rule covers: the first call (every file scanned) and a
// cached one (the scanner's answers kept by digest), against gitleaks'
// own detector over the same files. The review's line limit is raised to
// 2 MiB for it, so that the bundles are diffed and scanned too.
func (b *bench) secretScan(size int64, runs int) {
	project := filepath.Join(b.work, "p20")
	src := filepath.Join(project, "fixture")
	fmt.Printf("generating a %d MB node_modules tree...\n", size>>20)
	planted, err := nodetree.Write(src, size, 20)
	check(err)
	var texts []string
	var paths []string
	check(filepath.WalkDir(filepath.Join(src, "node_modules"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(src, p)
		texts, paths = append(texts, string(data)), append(paths, filepath.ToSlash(rel))
		return err
	}))
	total := 0
	for _, t := range texts {
		total += len(t)
	}

	b.must("ls")
	cl := client.New(b.socket)
	ctx := context.Background()
	_, err = cl.SetSettings(ctx, api.Settings{Review: api.ReviewLimits{MaxLine: 2 << 20}})
	check(err)
	defer cl.SetSettings(ctx, api.Settings{Review: api.ReviewLimits{MaxLine: 64 << 10}})
	id := b.newSession(project, "airlock/tiny", "cp -a fixture/node_modules node_modules")
	defer b.must("rm", id)

	var out string
	first := timeIt(func() { out = b.must("diff", id, "--json") })
	fmt.Printf("first diff --json: %s (%d bytes)\n", ms(first), len(out))
	var d api.Diff
	check(json.Unmarshal([]byte(out), &d))
	found := map[string][]api.Finding{}
	files, secrets := 0, 0
	for _, f := range d.Files {
		if strings.HasPrefix(f.Path, "node_modules/") {
			files++
		}
		for _, x := range f.Findings {
			if x.Scanner == "secrets" {
				found[f.Path] = append(found[f.Path], x)
				secrets++
			}
		}
	}
	missed := 0
	for _, p := range planted {
		if !slices.ContainsFunc(found[p.Path], func(x api.Finding) bool { return x.Rule == p.Rule && x.Line == p.Line }) {
			missed++
			fmt.Printf("planted %s at %s:%d not found: %+v\n", p.Rule, p.Path, p.Line, found[p.Path])
		}
	}
	var cached, direct []time.Duration
	for range runs {
		cached = append(cached, timeIt(func() { b.must("diff", id, "--json") }))
		direct = append(direct, timeIt(func() { _, err := cl.Diff(ctx, id, nil); check(err) }))
		fmt.Printf("cached diff --json: %s, through the API: %s\n", ms(cached[len(cached)-1]), ms(direct[len(direct)-1]))
	}

	det, err := detect.NewDetectorDefaultConfig()
	check(err)
	theirs := timeIt(func() {
		for _, t := range texts {
			det.DetectString(t)
		}
	})
	fmt.Printf("gitleaks' detector: %s\n", ms(theirs))
	ours := timeIt(func() {
		_, err := gitleaks.New().Find(ctx, texts)
		check(err)
	})
	fmt.Printf("airlock's detector: %s\n", ms(ours))

	b.log("### 20. Secret scan of %d MB of added text shaped like node_modules (%d files; minified bundles with 100 KB-1 MB lines)", total>>20, len(texts))
	b.log("")
	b.log("A session copies the generated tree into `node_modules/` (no ignore rule covers it; the review's line limit is 2 MiB for this benchmark, so the bundles are diffed and scanned too). %d secrets of gitleaks' common kinds are planted in it (AWS key, GitHub token, private key, Slack token, generic API key).", len(planted))
	b.log("")
	b.log("| | time |")
	b.log("|---|---|")
	b.log("| `airlock diff ID --json`, first call (every file scanned) | %s |", ms(first))
	b.log("| `airlock diff ID --json`, again (answers kept by digest; median of %d) | %s |", runs, ms(pct(cached, .5)))
	b.log("| the same diff through the API, decoded into structs by the bench (median of %d) | %s |", runs, ms(pct(direct, .5)))
	b.log("| gitleaks' own detector over the same files, in process, one file at a time | %s |", ms(theirs))
	b.log("| airlock's detector (`secretscan/gitleaks`) over the same files, in process | %s |", ms(ours))
	b.log("")
	load, _ := os.ReadFile("/proc/loadavg")
	b.log("Load average at the end: %s (this machine's 2 cores are shared).", strings.Join(strings.Fields(string(load))[:3], " "))
	b.log("")
	b.log("The review listed %d files under node_modules/ with %d secret findings; planted secrets missed: **%d** of %d. First call: **%.1f s** (target ≤ 5 s); ratio to gitleaks' detector alone: %.2f.", files, secrets, missed, len(planted), first.Seconds(), float64(first)/float64(theirs))
	b.log("")
}
