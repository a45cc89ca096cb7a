package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/client"
)

// Targets of issue 25 for a session holding 200,000 files, in the
// engine's default configuration (warm pool, checkpoints, the workspace
// watch, the secret scanner all on).
const (
	scaleHeldTarget = 16 << 20 // what the engine keeps for the session while it lives
	scalePeakTarget = 64 << 20 // above the engine's RSS before each operation
	scaleAcceptRate = 1.5      // accept against `cp -a` + `sync` of the same files
)

// scaleShape is a session's workload: the script that makes its files
// (run in the session) and a word for the report.
type scaleShape struct {
	title  string
	script string
	touch  string // a path in the workspace a command changes (a checkpoint)
}

// oneDirectory is `seq 1 N | xargs touch` in one directory, as the issue
// found it.
func oneDirectory(n int) scaleShape {
	return scaleShape{
		title:  fmt.Sprintf("one directory of %d empty files (`seq 1 %d | xargs touch`)", n, n),
		script: fmt.Sprintf("mkdir many && cd many && seq 1 %d | xargs touch", n),
		touch:  "many/touched",
	}
}

// nodeModules is a node_modules-shaped tree of about n files: packages of
// 100 files each (package.json, README.md, LICENSE, index.js, 50 modules
// in lib/, 20 in lib/util/, 24 tests, and a minified bundle of one 4 KB
// line in dist/), a tenth of them scoped (@scopeN/pkg-M). No ignore rule
// covers it: the project has no .gitignore, so the review reads it all.
func nodeModules(n int) scaleShape {
	packages := n / 100
	script := `perl -e '
my $packages = ` + fmt.Sprint(packages) + `;
sub put { my ($p, $s) = @_; open(my $f, ">", $p) or die "$p: $!"; print $f $s; close($f) or die }
mkdir "node_modules" or die;
for my $i (0 .. $packages - 1) {
  my $name = "pkg-$i";
  if ($i % 10 == 0) { my $scope = "node_modules/\@scope" . ($i % 37); mkdir $scope; $name = "\@scope" . ($i % 37) . "/pkg-$i" }
  my $d = "node_modules/$name";
  mkdir $_ or die "$_: $!" for ($d, "$d/lib", "$d/lib/util", "$d/dist", "$d/test");
  put("$d/package.json", "{\n  \"name\": \"$name\",\n  \"version\": \"1.$i.0\",\n  \"main\": \"index.js\",\n  \"license\": \"MIT\"\n}\n");
  put("$d/README.md", "# $name\n\nA package of the benchmark.\n");
  put("$d/LICENSE", "MIT License\n\nCopyright (c) benchmark\n");
  put("$d/index.js", "module.exports = require(\"./lib/m0\");\n");
  put("$d/lib/m$_.js", "\"use strict\";\nmodule.exports = function m$_(a) { return a + $_ + $i; };\n") for 0 .. 49;
  put("$d/lib/util/u$_.js", "exports.u$_ = (x) => x * $_;\n") for 0 .. 19;
  put("$d/test/t$_.js", "require(\"assert\").equal(require(\"../lib/m$_\")(1), " . ($_ + $i + 1) . ");\n") for 0 .. 23;
  put("$d/dist/bundle.min.js", join(";", map { "var a$_=function(b){return b*$_+$i}" } 0 .. 120) . "\n");
}'`
	return scaleShape{
		title:  fmt.Sprintf("a node_modules-shaped tree of %d files (%d packages of 100 files, a tenth scoped; small text files and a minified bundle each; no ignore rule covers it)", packages*100, packages),
		script: script,
		touch:  "node_modules/pkg-1/touched.js",
	}
}

// scaleOp is one measured operation: its time and the engine's peak RSS
// above its RSS just before.
type scaleOp struct {
	name  string
	took  time.Duration
	above int64
	err   string
}

// scale measures what the engine holds for a session of many files and
// what each operation on it peaks at, in the default configuration, on
// one engine that lives through them all (as a user's does): held memory
// is read 5 s after the last request, peaks with VmHWM reset
// (clear_refs) before each operation, background work the operation
// starts (a command's checkpoint) waited for. Then accept of everything
// against `cp -a` + `sync` of the session's files.
func (b *bench) scale(section int, shape scaleShape) {
	b.stopEngine()
	b.setWarmPool(2) // the default (other sections set it)
	v, err := client.New(b.socket).Ping(context.Background())
	check(err)
	pid := v.PID
	project := filepath.Join(b.work, fmt.Sprintf("scale-%d", section))
	check(os.MkdirAll(project, 0o755))
	check(os.WriteFile(filepath.Join(project, "README.md"), []byte("# app\n"), 0o644))
	time.Sleep(5 * time.Second)
	before := rss(pid)

	fmt.Printf("section %d: making the session...\n", section)
	var id string
	made := timeIt(func() { id = b.newSession(project, b.image, shape.script) })
	b.waitCheckpoints(id, 1)
	time.Sleep(5 * time.Second)
	held := rss(pid) - before

	var ops []scaleOp
	run := func(name string, after func(), args ...string) {
		time.Sleep(2 * time.Second) // past the engine's release of the last request's garbage
		start := rss(pid)
		os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
		c := b.cmd(b.bin, args...)
		c.Stdout = io.Discard
		var errb strings.Builder
		c.Stderr = &errb
		t0 := time.Now()
		err := c.Run()
		if after != nil {
			after()
		}
		took := time.Since(t0)
		op := scaleOp{name: name, took: took, above: hwm(pid) - start}
		if err != nil {
			op.err = strings.TrimSpace(strings.SplitN(errb.String(), "\n", 2)[0])
		}
		fmt.Printf("  %s: +%.0f MB, %s %s\n", name, float64(op.above)/1e6, roundTook(took), op.err)
		ops = append(ops, op)
	}
	run("`diff ID --stat`", nil, "diff", id, "--stat")
	run("`diff ID --json`", nil, "diff", id, "--json")
	run("`diff ID --patch`", nil, "diff", id, "--patch")
	n := b.checkpointCount(id)
	run("checkpoint (`exec ID -- touch F`, until its checkpoint is written)", func() { b.waitCheckpoints(id, n+1) }, "exec", id, "--", "touch", shape.touch)
	run("`hibernate ID`", nil, "hibernate", id)
	run("`wake ID`", nil, "wake", id)
	time.Sleep(5 * time.Second)
	heldAfter := rss(pid) - before

	// accept of everything against cp -a + sync of the session's layer.
	upper := filepath.Join(b.work, "state", "sessions", id, "ws", "upper")
	target := filepath.Join(b.work, fmt.Sprintf("scale-%d-cp", section))
	quiesce := func() {
		exec.Command("sync").Run()
		time.Sleep(time.Second)
	}
	quiesce()
	var cp time.Duration
	cpSync := timeIt(func() {
		cp = timeIt(func() {
			out, err := exec.Command("cp", "-a", upper, target).CombinedOutput()
			check(errorf(err, out))
		})
		exec.Command("sync").Run()
	})
	quiesce()
	run("`accept ID` (everything)", nil, "accept", id)
	accept := ops[len(ops)-1]
	b.must("rm", id)
	os.RemoveAll(target)
	os.RemoveAll(project)

	b.log("### %d. Engine memory and accept at scale: %s", section, shape.title)
	b.log("")
	b.log("One engine in its default configuration (warm pool 2, a checkpoint after every command, the workspace watch, the secret scanner) lives through it all, as a user's does; image %s. The session's command made its files in %s. Held: the engine's RSS 5 s after the last request (its checkpoint written) minus its RSS before the session was created. Each operation: the engine's peak RSS (VmHWM, reset through `/proc/PID/clear_refs` before it) above its RSS just before it, background work it starts (a command's checkpoint) included.", b.image, roundTook(made))
	b.log("")
	b.log("| | above the engine's RSS before | time | target |")
	b.log("|---|---|---|---|")
	b.log("| held while the session lives, after its first checkpoint | %+.1f MB | | ≤ %d MB %s |", float64(held)/1e6, scaleHeldTarget>>20, verdict(held <= scaleHeldTarget))
	b.log("| held after the operations below (before accept) | %+.1f MB | | ≤ %d MB %s |", float64(heldAfter)/1e6, scaleHeldTarget>>20, verdict(heldAfter <= scaleHeldTarget))
	for _, op := range ops {
		cell := fmt.Sprintf("+%.0f MB", float64(op.above)/1e6)
		if op.err != "" {
			cell += " (failed: " + strings.ReplaceAll(op.err, "|", "/") + ")"
		}
		b.log("| %s peak | %s | %s | ≤ %d MB %s |", op.name, cell, roundTook(op.took), scalePeakTarget>>20, verdict(op.above <= scalePeakTarget && op.err == ""))
	}
	b.log("")
	ratio := float64(accept.took) / float64(cpSync)
	b.log("Accept of everything: **%s** against `cp -a` + `sync` of the session's layer to the same disk %s (`cp -a` alone %s): ratio **%.2f** (target ≤ %.1f %s).", roundTook(accept.took), roundTook(cpSync), roundTook(cp), ratio, scaleAcceptRate, verdict(ratio <= scaleAcceptRate))
	b.log("")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// checkpointCount is how many checkpoints session id has.
func (b *bench) checkpointCount(id string) int {
	var list []json.RawMessage
	check(json.Unmarshal([]byte(b.mustOut("turns", id, "--json")), &list))
	return len(list)
}

// waitCheckpoints waits (at most 10 min) until session id has n
// checkpoints: a command's is written in the background after it ends.
func (b *bench) waitCheckpoints(id string, n int) {
	for i := 0; i < 1200 && b.checkpointCount(id) < n; i++ {
		time.Sleep(500 * time.Millisecond)
	}
}

// mustOut is must's standard output alone.
func (b *bench) mustOut(args ...string) string {
	out, err := b.cmd(b.bin, args...).Output()
	check(errorf(err, out))
	return string(out)
}
