package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/enginetest"
)

// TestHostile runs real sessions whose workspaces are hostile (giant
// sparse files, large random files, a huge single-line file, hundreds of
// thousands of files, deep trees, many hard links, long and invalid names,
// FIFOs and sockets, a file growing while it is read, a directory swapped
// with a symlink to the host in a loop, a hostile .git, a file swapped
// between review and accept, a chmod through a final symlink, a home full
// of absolute symlinks, an image whose /bin/sh is broken) against a real
// engine, through the CLI. After every request it asserts that the engine
// is the same process, that the request answered (a result, or a classed
// error that says what to do), that nothing outside the project changed
// (a canary directory next to it, /etc/shadow, /root), that no host byte
// reached the project or any output, and that the engine's peak RSS stayed
// under rssCeiling. Each scenario runs on a size-capped tmpfs standing for
// the host, with an engine of its own.
//
// Under -short the heavy scenarios are skipped and the others run at their
// light sizes.
func TestHostile(t *testing.T) {
	d := hostileRequire(t)
	enginetest.TinyImage(t, d)
	s := &hostileSuite{bin: buildAirlock(t), helper: buildHelper(t), shadow: shadowLine()}
	for _, sc := range hostileScenarios() {
		t.Run(sc.name, func(t *testing.T) { runHostile(t, s, sc) })
	}
}

// a splits a command line on spaces (for arguments without spaces).
func cmdline(line string) []string { return strings.Fields(line) }

// reads are the review requests: stat, JSON, patch, the plain diff.
func reviewReads(w want, timeout time.Duration) []request {
	return []request{
		{args: cmdline("diff {{id}} --stat"), want: w, timeout: timeout},
		{args: cmdline("diff {{id}} --json"), want: w, timeout: timeout},
		{args: cmdline("diff {{id}} --patch"), want: w, timeout: timeout},
		{args: cmdline("diff {{id}}"), want: w, timeout: timeout},
	}
}

// snapshot takes a snapshot (the store is then searched for host bytes)
// and removes it.
func snapshotSteps(w want, timeout time.Duration) []request {
	return []request{
		{args: cmdline("snapshot {{id}}"), want: w, timeout: timeout, save: func(h *hostile, r *reply) {
			h.vars["snap"] = strings.TrimSpace(r.stdout.String())
		}},
		{args: cmdline("snapshot rm {{snap}}"), want: wantOK, check: func(h *hostile, r *reply) { delete(h.vars, "snap") }},
	}
}

func requests(groups ...[]request) []request {
	var out []request
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// swapRounds repeats rs n times.
func swapRounds(n int, rs []request) []request {
	var out []request
	for i := 0; i < n; i++ {
		out = append(out, rs...)
	}
	return out
}

// noChange is `only` for a request that must not change the project.
var noChange = []string{}

func hostileScenarios() []scenario {
	short := testing.Short()
	many, links, grow := 200000, 10000, 400
	if short {
		many, links, grow = 20000, 2000, 150
	}
	bigRead := 5 * time.Minute

	var list []scenario

	list = append(list, scenario{
		name:   "giant sparse file",
		script: `truncate -s 40G sparse.bin && echo fine > ok.txt`,
		steps: requests(
			[]request{
				{args: cmdline("diff {{id}} --stat"), want: wantOK},
				{args: cmdline("diff {{id}} --json"), want: wantOK},
				{args: cmdline("diff {{id}} --patch"), want: wantAnswer},
				{args: cmdline("diff {{id}}"), want: wantOK},
				{args: cmdline("accept {{id}}"), want: wantAnswer, writes: true, check: func(h *hostile, r *reply) {
					h.wantContent("accept of everything", "ok.txt", "fine\n")
					h.wantAbsent("accept of everything wrote a flagged 40 GB sparse file", "sparse.bin")
				}},
				{args: cmdline("accept {{id}} sparse.bin"), want: wantAnswer, writes: true, only: []string{"sparse.bin"}, timeout: 2 * time.Minute, check: func(h *hostile, r *reply) {
					wantSparse(h, r, "sparse.bin", 40<<30)
				}},
			},
			snapshotSteps(wantAnswer, 2*time.Minute),
			[]request{{args: cmdline("discard {{id}}"), want: wantOK}},
		),
	})

	for _, rnd := range []struct {
		name, heavy, size, ws, mem, host string
		bytes                            int64
	}{
		{name: "random file of 128 MiB", size: "134217728", ws: "512m", mem: "1g", host: "1g"},
		{name: "random file of 1.5 GiB", heavy: "1.5 GiB random file: skipped with -short (the 128 MiB scenario runs)", size: "1610612736", ws: "2g", mem: "3g", host: "4g"},
	} {
		timeout := time.Minute
		if rnd.heavy != "" {
			timeout = bigRead
		}
		list = append(list, scenario{
			name: rnd.name, heavy: rnd.heavy, hostSize: rnd.host,
			runFlags: []string{"--workspace-size", rnd.ws, "--memory", rnd.mem},
			script:   `head -c ` + rnd.size + ` /dev/urandom > random.bin`,
			steps: requests(
				reviewReads(wantOK, timeout),
				snapshotSteps(wantOK, timeout),
				[]request{
					{args: cmdline("accept {{id}} random.bin"), want: wantOK, writes: true, only: []string{"random.bin"}, timeout: timeout, check: func(h *hostile, r *reply) {
						h.sameAsSession("accept of random.bin", "random.bin")
					}},
					{args: cmdline("discard {{id}}"), want: wantOK},
				},
			),
		})
	}

	list = append(list, scenario{
		name:     "huge single-line text files",
		hostSize: "1g",
		setup: func(h *hostile) {
			must(h.t, os.WriteFile(filepath.Join(h.project, "long.txt"), []byte(strings.Repeat("a", 8<<20)), 0o644))
		},
		script: `yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c 12582912 | tr -d '\n' > oneline.txt && ` +
			`yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c 67108864 | tr -d '\n' > oneline-64m.txt && ` +
			`printf Z | dd of=long.txt bs=1 seek=4194304 conv=notrunc 2>/dev/null`,
		steps: requests(
			reviewReads(wantOK, 2*time.Minute),
			snapshotSteps(wantOK, time.Minute),
			[]request{
				{args: cmdline("accept {{id}} long.txt oneline.txt"), want: wantOK, writes: true, only: []string{"long.txt", "oneline.txt"}, check: func(h *hostile, r *reply) {
					h.sameAsSession("accept of a changed 8 MiB line", "long.txt")
					h.sameAsSession("accept of a 12 MiB line", "oneline.txt")
				}},
				{args: cmdline("discard {{id}}"), want: wantOK},
			},
		),
	})

	fileTimeout := time.Minute
	if many > 50000 {
		fileTimeout = bigRead
	}
	list = append(list, scenario{
		name: fmt.Sprintf("%d empty files", many), hostSize: "2g",
		script: fmt.Sprintf(`mkdir many && cd many && for i in $(seq 1 %d); do mkdir d$i && (cd d$i && seq 1 1000 | xargs touch) || exit 1; done`, many/1000),
		steps: requests(
			reviewReads(wantOK, fileTimeout),
			snapshotSteps(wantOK, fileTimeout),
			[]request{
				{args: cmdline("accept {{id}}"), want: wantOK, writes: true, only: []string{"many"}, timeout: 2 * fileTimeout, check: func(h *hostile, r *reply) {
					if got := countFiles(filepath.Join(h.project, "many")); got != many {
						h.fail("accept of %d files wrote %d", many, got)
					}
				}},
				{args: cmdline("discard {{id}}"), want: wantOK, timeout: fileTimeout},
			},
		),
	})

	list = append(list, scenario{
		name: "deep trees",
		// The deep one is 250 levels of 20-character names: 5,250 bytes,
		// beyond PATH_MAX. It is built by wrapping, since no shell can cd
		// that deep.
		script: `mkdir -p shallow && cd shallow && for i in $(seq 1 100); do mkdir d && cd d || exit 1; done && echo bottom > bottom.txt && cd /workspace && ` +
			`D=dddddddddddddddddddd && mkdir -p deep/$D && cd deep && echo bottom > $D/bottom.txt && for i in $(seq 1 250); do mkdir t && mv $D t/$D && mv t $D || exit 1; done`,
		steps: requests(
			reviewReads(wantAnswer, time.Minute),
			[]request{
				{args: cmdline("accept {{id}} shallow"), want: wantOK, writes: true, only: []string{"shallow"}, check: func(h *hostile, r *reply) {
					h.wantContent("accept of a 100-level fileTree", "shallow/"+strings.Repeat("d/", 100)+"bottom.txt", "bottom\n")
				}},
				{args: cmdline("accept {{id}}"), want: wantAnswer, writes: true},
			},
			snapshotSteps(wantAnswer, time.Minute),
			[]request{{args: cmdline("discard {{id}}"), want: wantAnswer}},
		),
	})

	list = append(list, scenario{
		name:   fmt.Sprintf("%d hard links", links),
		script: fmt.Sprintf(`echo linked > base.txt && mkdir l0 && for i in $(seq 1 100); do ln base.txt l0/x$i; done && for j in $(seq 1 %d); do cp -al l0 l$j || exit 1; done && ln README.md readme-link`, links/100-1),
		steps: requests(
			reviewReads(wantOK, time.Minute),
			snapshotSteps(wantOK, time.Minute),
			[]request{
				{args: cmdline("accept {{id}}"), want: wantOK, writes: true, timeout: 2 * time.Minute, check: func(h *hostile, r *reply) {
					h.wantContent("accept of hard links", "l0/x1", "linked\n")
					h.wantContent("accept of a hard link to a project file", "readme-link", "# app\n")
				}},
				{args: cmdline("discard {{id}}"), want: wantOK},
			},
		),
	})

	list = append(list, scenario{
		name: "long and invalid names",
		script: `n=$(head -c 255 /dev/zero | tr '\0' n) && touch "$n" && ` +
			`touch "$(printf 'bad\377name')" "$(printf 'new\nline.txt')" "$(printf 'tab\there')" "$(printf 'cr\rname')" ` +
			`"$(printf 'esc\033[31mred')" "$(printf 'rtl\342\200\256gnp.exe')" ' leading space' 'trailing space ' ` +
			`'back\slash' 'a:b*c?d"e<f>g|h' '...' && touch -- -rf && ` +
			`mkdir "$(printf 'dir\377')" && echo inside > "$(printf 'dir\377')/f.txt" && ` +
			`s=$(head -c 250 /dev/zero | tr '\0' s) && mkdir -p "$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s" && echo far > "$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/$s/far.txt"`,
		steps: requests(
			reviewReads(wantOK, time.Minute),
			snapshotSteps(wantOK, time.Minute),
			[]request{
				// The names scanner flags the names that would mislead (an
				// accept of everything leaves them); --include-flagged takes
				// them, written as they are.
				{args: cmdline("accept {{id}} --include-flagged"), want: wantOK, writes: true, check: func(h *hostile, r *reply) {
					s := strings.Repeat("s", 250)
					for _, name := range []string{strings.Repeat("n", 255), "bad\xffname", "new\nline.txt", "tab\there", "cr\rname",
						"esc\x1b[31mred", "rtl\u202egnp.exe", " leading space", "trailing space ", `back\slash`, `a:b*c?d"e<f>g|h`, "...", "-rf",
						"dir\xff/f.txt", strings.Repeat(s+"/", 15) + "far.txt"} {
						if fi, _ := h.projectFile(name); fi == nil {
							h.fail("accept of everything did not write %q", name)
						}
					}
				}},
				{args: cmdline("discard {{id}}"), want: wantOK},
			},
		),
	})

	list = append(list, scenario{
		name:   "FIFOs and sockets",
		helper: true,
		script: `mkfifo pipe && rm README.md && mkfifo README.md && mkdir -p fifodir && mkfifo fifodir/pipe2 && (mknod zero c 1 5 2>/dev/null || true) && echo fine > ok.txt`,
		steps: requests(
			[]request{{name: "make a unix socket in the workspace", args: cmdline("exec {{id}} -- /tmp/hh sock sock"), want: wantOK}},
			reviewReads(wantOK, 30*time.Second),
			[]request{
				{args: cmdline("accept {{id}} pipe"), want: wantRefusal, writes: true, only: noChange, timeout: 30 * time.Second},
				{args: cmdline("accept {{id}} sock"), want: wantRefusal, writes: true, only: noChange, timeout: 30 * time.Second},
				{args: cmdline("accept {{id}}"), want: wantAnswer, writes: true, timeout: 30 * time.Second, check: func(h *hostile, r *reply) {
					h.wantContent("accept of everything replaced a file by a FIFO", "README.md", "# app\n")
					wantNoSpecial(h, "accept of everything")
				}},
			},
			snapshotSteps(wantOK, 30*time.Second),
			[]request{{args: cmdline("discard {{id}}"), want: wantOK, timeout: 30 * time.Second}},
		),
	})

	list = append(list, scenario{
		name:     "a file growing while it is diffed and accepted",
		hostSize: "2g",
		script:   `: > grow.txt && echo fine > ok.txt`,
		// 262,134 bytes is a whole number of lines: the file is always a
		// prefix of the same repeated line.
		// At most 25 MiB/s, so that it still grows during the last requests.
		during: []string{fmt.Sprintf(`echo started; i=0; while [ ! -e /tmp/hostile-stop ] && [ $i -lt %d ]; do yes 'grow line of text' | head -c 262134 >> grow.txt; usleep 10000; i=$((i+1)); done; echo grew $i times 256 KiB`, grow*4)},
		steps: requests(
			reviewReads(wantOK, 2*time.Minute),
			// A file that changes while it is accepted is refused ("changed
			// since you reviewed it"), or taken whole as one version of it:
			// both are answers; a torn file is not.
			[]request{{args: cmdline("accept {{id}} grow.txt"), want: wantAnswer, writes: true, only: []string{"grow.txt"}, timeout: 2 * time.Minute, check: wantGrowPrefix}},
			snapshotSteps(wantOK, 2*time.Minute),
			[]request{
				{args: cmdline("accept {{id}} grow.txt"), want: wantAnswer, writes: true, only: []string{"grow.txt"}, timeout: 2 * time.Minute, check: wantGrowPrefix},
				{args: cmdline("diff {{id}} --stat"), want: wantOK},
				// The session is appending to it: refusing is an answer.
				{args: cmdline("discard {{id}} grow.txt"), want: wantAnswer},
			},
		),
	})

	swapStep := func(args string, w want, writes bool) request {
		return request{args: cmdline(args), want: w, writes: writes, timeout: 30 * time.Second}
	}
	list = append(list, scenario{
		name:     "a directory swapped with a symlink to a host directory, in a loop",
		helper:   true,
		runFlags: []string{"--cpus", "1"},
		// sd and f.txt hold names the canary holds too: anything that
		// follows the symlink meets the host's files.
		script: `mkdir -p sd/sub sd/dir && echo session > sd/secret.txt && echo session > sd/keep.txt && echo session > sd/sub/nested.txt && ` +
			`echo session > sd/dir/secret.txt && ln -s {{canary}} sdlink && echo a > f.txt && ln -s {{canary}}/secret.txt flink && ` +
			`mkdir -p md && echo session > md/secret.txt && ln -s {{canary}} mdlink`,
		during: []string{
			`/tmp/hh swap sd sdlink`,
			`/tmp/hh swap f.txt flink`,
			`echo started; while [ ! -e /tmp/hostile-stop ]; do mv md md.t; mv mdlink md; mv md mdlink; mv md.t md; done`,
		},
		// Each request is short: many rounds, so that some land in the
		// window between a check and a use.
		steps: requests(
			swapRounds(8, reviewReads(wantAnswer, 30*time.Second)),
			swapRounds(4, []request{
				swapStep("accept {{id}} sd", wantAnswer, true),
				swapStep("accept {{id}} f.txt", wantAnswer, true),
				swapStep("accept {{id}} md", wantAnswer, true),
			}),
			snapshotSteps(wantAnswer, 30*time.Second),
			swapRounds(4, []request{
				swapStep("discard {{id}} sd", wantAnswer, false),
				swapStep("discard {{id}} md", wantAnswer, false),
				swapStep("accept {{id}}", wantAnswer, true),
			}),
			snapshotSteps(wantAnswer, 30*time.Second),
			[]request{swapStep("discard {{id}}", wantAnswer, false)},
		),
	})

	list = append(list, scenario{
		name:   "a file swapped between diff and accept",
		script: `echo reviewed > swap.txt && echo reviewed > fifo-later.txt && echo reviewed > edit-later.txt`,
		steps: []request{
			{args: cmdline("diff {{id}} --json"), want: wantOK, keep: 16 << 20, save: saveFileIDs},
			{name: "swap the reviewed files (a symlink to a host file, a FIFO, new content)", want: wantOK,
				args: []string{"exec", "{{id}}", "--", "sh", "-c", `rm swap.txt && ln -s {{canary}}/secret.txt swap.txt && rm fifo-later.txt && mkfifo fifo-later.txt && echo changed-after-review > edit-later.txt`}},
			{args: cmdline("accept {{id}} --reviewed {{reviewed}} swap.txt"), want: wantAnswer, writes: true, only: []string{"swap.txt"}, timeout: 30 * time.Second,
				check: wantReviewed("swap.txt")},
			{args: cmdline("accept {{id}} --reviewed {{reviewed}} edit-later.txt"), want: wantAnswer, writes: true, only: []string{"edit-later.txt"}, timeout: 30 * time.Second,
				check: wantReviewed("edit-later.txt")},
			{args: cmdline("accept {{id}} --reviewed {{reviewed}} fifo-later.txt"), want: wantAnswer, writes: true, only: []string{"fifo-later.txt"}, timeout: 30 * time.Second,
				check: wantReviewed("fifo-later.txt")},
			{args: cmdline("accept {{id}} fifo-later.txt"), want: wantRefusal, writes: true, only: noChange, timeout: 30 * time.Second},
			{args: cmdline("accept {{id}} swap.txt"), want: wantAnswer, writes: true, only: []string{"swap.txt"}, timeout: 30 * time.Second},
			{args: cmdline("discard {{id}}"), want: wantOK, timeout: 30 * time.Second},
		},
	})

	for _, g := range []struct{ name, script string }{
		{"session .git: HEAD is a symlink to /dev/zero", `rm -f .git/HEAD && ln -s /dev/zero .git/HEAD`},
		{"session .git: HEAD is a FIFO", `rm -f .git/HEAD && mkfifo .git/HEAD`},
		{"session .git: a .git file whose gitdir is a host repository", `rm -rf .git && printf 'gitdir: {{canary}}/hostrepo/.git\n' > .git`},
		{"session .git: a symlink to a host repository", `rm -rf .git && ln -s {{canary}}/hostrepo/.git .git`},
		{"session .git: objects and refs of a host repository", `rm -rf .git/objects && ln -s {{canary}}/hostrepo/.git/objects .git/objects && echo {{hostcommit}} > .git/refs/heads/main`},
		{"session .git: refs, packed-refs and config pointing at devices, FIFOs and host files",
			`ln -s /dev/zero .git/refs/heads/zero && mkfifo .git/packed-refs && ln -s /dev/zero .git/ORIG_HEAD && ` +
				`printf '[include]\n\tpath = {{canary}}/secret.txt\n[core]\n\tworktree = {{canary}}\n' >> .git/config`},
	} {
		list = append(list, scenario{
			name:   g.name,
			script: g.script + ` && echo x > work.txt`,
			steps: []request{
				{args: cmdline("diff {{id}} --stat"), want: wantAnswer, timeout: 30 * time.Second},
				{args: cmdline("diff {{id}}"), want: wantAnswer, timeout: 30 * time.Second},
				{args: cmdline("diff {{id}} --json"), want: wantAnswer, timeout: 30 * time.Second},
				{args: cmdline("accept {{id}} --commits"), want: wantAnswer, writes: true, only: []string{".git"}, timeout: 30 * time.Second},
				{args: cmdline("accept {{id}} work.txt"), want: wantOK, writes: true, only: []string{"work.txt"}, timeout: 30 * time.Second, check: func(h *hostile, r *reply) {
					h.wantContent("accept of a file beside a hostile .git", "work.txt", "x\n")
				}},
				{args: cmdline("snapshot {{id}}"), want: wantAnswer, timeout: 30 * time.Second},
			},
		})
	}

	list = append(list, scenario{
		name:   "chmod through a final symlink (discard and accept)",
		script: `chmod 755 run.sh tool.sh && chmod 700 cfg`,
		steps: []request{
			{args: cmdline("diff {{id}} --stat"), want: wantOK, check: func(h *hostile, r *reply) {
				if !strings.Contains(r.stdout.String(), "run.sh") {
					h.fail("diff --stat does not show run.sh's mode change:\n%s", r.stdout.String())
				}
			}},
			{name: "swap run.sh, tool.sh and cfg for symlinks to the host", want: wantOK,
				args: []string{"exec", "{{id}}", "--", "sh", "-c", `rm run.sh tool.sh && ln -s {{canary}}/run.sh run.sh && ln -s {{canary}}/tool.sh tool.sh && mv cfg cfg.old && ln -s {{canary}}/dir cfg`}},
			{args: cmdline("discard {{id}} run.sh"), want: wantAnswer},
			{args: cmdline("discard {{id}} cfg"), want: wantAnswer},
			{args: cmdline("accept {{id}} tool.sh"), want: wantAnswer, writes: true, only: []string{"tool.sh"}},
			{args: cmdline("accept {{id}} cfg"), want: wantAnswer, writes: true, only: []string{"cfg"}},
			{args: cmdline("snapshot {{id}}"), want: wantAnswer},
			{args: cmdline("accept {{id}}"), want: wantAnswer, writes: true},
			{args: cmdline("discard {{id}}"), want: wantAnswer},
		},
	})

	race := []request{}
	for i := 0; i < 40; i++ {
		race = append(race,
			request{args: cmdline("discard {{id}} race.sh"), want: wantAnswer, timeout: 30 * time.Second},
			request{name: "chmod race.sh in the session", args: []string{"exec", "{{id}}", "--", "sh", "-c", "chmod 755 race.sh 2>/dev/null; true"}, want: wantOK},
			request{args: cmdline("accept {{id}} race.sh"), want: wantAnswer, writes: true, only: []string{"race.sh"}, timeout: 30 * time.Second},
		)
	}
	list = append(list, scenario{
		name:     "chmod through a final symlink, racing",
		helper:   true,
		runFlags: []string{"--cpus", "1"},
		setup: func(h *hostile) {
			must(h.t, os.WriteFile(filepath.Join(h.project, "race.sh"), []byte("echo race\n"), 0o644))
		},
		script: `chmod 755 race.sh && ln -s {{canary}}/run.sh racelink`,
		during: []string{`/tmp/hh swap race.sh racelink`},
		steps:  race,
	})

	list = append(list, scenario{
		name: "snapshot of a home with absolute symlinks",
		script: `ln -s /etc/shadow /home/airlock/x && ln -s {{canary}}/secret.txt /home/airlock/secret && ln -s {{canary}} /home/airlock/canarydir && ` +
			`mkdir -p /home/airlock/.config && ln -s {{canary}}/dir /home/airlock/.config/dir && ` +
			`ln -s /etc/shadow /shadow-link && ln -s {{canary}}/secret.txt /secret-link && ln -s /etc/shadow ws-shadow && echo fine > ok.txt`,
		steps: []request{
			{args: cmdline("snapshot {{id}}"), want: wantOK, save: func(h *hostile, r *reply) { h.vars["snap"] = strings.TrimSpace(r.stdout.String()) }},
			{args: cmdline("restore {{snap}}"), want: wantOK, save: func(h *hostile, r *reply) { h.vars["rid"] = strings.TrimSpace(r.stdout.String()) }},
			{args: []string{"exec", "{{rid}}", "--", "sh", "-c", "for f in /home/airlock/x /home/airlock/secret /shadow-link /home/airlock/.config/dir; do readlink $f; done"}, want: wantOK, check: func(h *hostile, r *reply) {
				want := "/etc/shadow\n" + h.canary + "/secret.txt\n/etc/shadow\n" + h.canary + "/dir\n"
				if r.stdout.String() != want {
					h.fail("the restored session's symlinks read %q, want %q", r.stdout.String(), want)
				}
			}},
			{args: cmdline("exec {{rid}} -- cat /home/airlock/x /home/airlock/secret"), want: wantAny},
			{args: cmdline("rm {{rid}}"), want: wantOK},
			{args: cmdline("snapshot export {{snap}} --no-base -o {{root}}/snap.tar"), want: wantOK, check: func(h *hostile, r *reply) {
				h.scanTree("snapshot export", filepath.Join(h.root, "snap.tar"), "the exported snapshot")
				os.Remove(filepath.Join(h.root, "snap.tar"))
			}},
			{args: cmdline("snapshot rm {{snap}}"), want: wantOK},
			{args: cmdline("diff {{id}} --stat"), want: wantOK},
			{args: cmdline("diff {{id}} --patch"), want: wantOK},
			{args: cmdline("accept {{id}}"), want: wantAnswer, writes: true, check: func(h *hostile, r *reply) {
				h.wantContent("accept of everything", "ok.txt", "fine\n")
				h.wantAbsent("accept of everything wrote a flagged symlink to /etc/shadow", "ws-shadow")
			}},
			// (Exit 66 when the accept of everything already wrote it.)
			{args: cmdline("accept {{id}} ws-shadow"), want: wantAnswer, writes: true, only: []string{"ws-shadow"}, check: func(h *hostile, r *reply) {
				h.wantSymlink("accept of a named symlink", "ws-shadow", "/etc/shadow")
			}},
		},
	})

	list = append(list, scenario{
		name:   "accept of everything leaves flagged changes out",
		script: `ln -s /root root-link && ln -s {{canary}}/secret.txt host-link && truncate -s 40G sparse.bin && echo fine > ok.txt`,
		steps: []request{
			{args: cmdline("diff {{id}} --stat"), want: wantOK, check: func(h *hostile, r *reply) {
				for _, l := range strings.Split(r.stdout.String(), "\n") {
					for _, p := range []string{"root-link", "host-link", "sparse.bin"} {
						if strings.Contains(l, " "+p+" ") && !strings.Contains(l, "[") {
							h.fail("diff --stat does not flag %s: %q", p, l)
						}
					}
				}
			}},
			{args: cmdline("accept {{id}}"), want: wantAnswer, writes: true, check: func(h *hostile, r *reply) {
				h.wantContent("accept of everything", "ok.txt", "fine\n")
				h.wantAbsent("accept of everything wrote a flagged change", "root-link", "host-link", "sparse.bin")
				for _, p := range []string{"root-link", "host-link", "sparse.bin"} {
					if !strings.Contains(r.text(), p) {
						h.fail("accept of everything does not say that it left %s out", p)
					}
				}
			}},
			// These find nothing left (exit 66) when the accept of
			// everything already wrote them; what counts is the project.
			{args: cmdline("accept {{id}} root-link"), want: wantAnswer, writes: true, only: []string{"root-link"}, check: func(h *hostile, r *reply) {
				h.wantSymlink("accept of a named symlink", "root-link", "/root")
			}},
			{args: cmdline("discard {{id}} sparse.bin"), want: wantAnswer},
			{args: cmdline("accept {{id}} --include-flagged"), want: wantAnswer, writes: true, only: []string{"host-link"}, check: func(h *hostile, r *reply) {
				if r.code == 64 && strings.Contains(r.stderr.String(), "unknown flag") {
					h.fail("accept has no --include-flagged")
				}
				h.wantSymlink("accept --include-flagged", "host-link", h.canary+"/secret.txt")
			}},
		},
	})

	list = append(list, scenario{
		name: "an image whose /bin/sh is broken",
		setup: func(h *hostile) {
			brokenShImages(h.t)
		},
		steps: []request{
			{args: cmdline("run --project {{project}} --image airlock/hostile-broken-sh:format -- true"), want: wantRefusal, check: func(h *hostile, r *reply) {
				if !strings.Contains(strings.ToLower(r.stderr.String()), "exec format error") {
					h.fail("a session on an image whose /bin/sh is not a program: stderr %q does not show the container's error (exec format error)", clip(r.stderr.String()))
				}
			}},
			{args: cmdline("run --project {{project}} --image airlock/hostile-broken-sh:exits -- true"), want: wantRefusal, check: func(h *hostile, r *reply) {
				if !strings.Contains(r.stderr.String(), "this /bin/sh refuses to run") {
					h.fail("a session on an image whose /bin/sh exits: stderr %q does not show the container's own error", clip(r.stderr.String()))
				}
			}},
			{args: cmdline("ls"), want: wantOK},
		},
	})
	return list
}

// saveFileIDs records each file's id from `diff --json` as {{fileid:PATH}},
// and the diff itself in a file named by {{reviewed}} (what `accept
// --reviewed` pins an accept to).
func saveFileIDs(h *hostile, r *reply) {
	reviewed := filepath.Join(h.root, "reviewed.json")
	if err := os.WriteFile(reviewed, r.stdout.Bytes(), 0o600); err != nil {
		h.fail("save the reviewed diff: %v", err)
		return
	}
	h.vars["reviewed"] = reviewed
	var d api.Diff
	if err := json.Unmarshal(r.stdout.Bytes(), &d); err != nil {
		h.fail("diff --json: %v", err)
		return
	}
	for _, f := range d.Files {
		h.vars["fileid:"+f.Path] = f.ID
	}
}

// wantReviewed checks an accept pinned to the review: the project
// has either nothing at p or what was reviewed, never what the session put
// there after the review.
func wantReviewed(p string) func(h *hostile, r *reply) {
	return func(h *hostile, r *reply) {
		fi, data := h.projectFile(p)
		if fi != nil && (!fi.Mode().IsRegular() || string(data) != "reviewed\n") {
			h.fail("accept by the reviewed file's id wrote %s as %v holding %q: what the session put there after the review, not what was reviewed", p, fi.Mode(), clip(string(data)))
		}
	}
}

// wantSparse checks that an accepted sparse file, if written, kept its
// size and its holes.
func wantSparse(h *hostile, r *reply, p string, size int64) {
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(h.project, p), &st); err != nil {
		return
	}
	if st.Size != size || st.Blocks*512 > 64<<20 {
		h.fail("accept of %s wrote %d bytes in %d blocks: want %d bytes, sparse", p, st.Size, st.Blocks, size)
	}
}

// wantGrowPrefix checks that the accepted grow.txt is a prefix of what the
// session was appending.
func wantGrowPrefix(h *hostile, r *reply) {
	f, err := os.Open(filepath.Join(h.project, "grow.txt"))
	if err != nil {
		return
	}
	defer f.Close()
	line := []byte("grow line of text\n")
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, err := f.Read(buf)
		for i := 0; i < n; i++ {
			if buf[i] != line[(off+int64(i))%int64(len(line))] {
				h.fail("the accepted grow.txt is not what the session wrote: byte %d is %q", off+int64(i), buf[i])
				return
			}
		}
		off += int64(n)
		if err == io.EOF || n == 0 {
			break
		}
	}
	h.t.Logf("accepted %d bytes of grow.txt", off)
}

// wantNoSpecial fails when the project holds a FIFO, socket or device.
func wantNoSpecial(h *hostile, why string) {
	filepath.WalkDir(h.project, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			h.fail("%s: the project now holds %s (%v)", why, p, d.Type())
		}
		return nil
	})
}

func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// brokenShImages makes two images from the tiny one: one whose /bin/sh is
// not a program (the kernel refuses it: exec format error) and one whose
// /bin/sh prints an error and exits.
func brokenShImages(t *testing.T) {
	for _, img := range []struct{ tag, sh string }{
		{"format", `not a program\n`},
		{"exits", `#!/bin/busybox sh\necho "hostile image: this /bin/sh refuses to run" >&2\nexit 3\n`},
	} {
		name := "airlock-hostile-mk-" + img.tag
		exec.Command("docker", "rm", "-f", name).Run()
		out, err := exec.Command("docker", "run", "--name", name, enginetest.Image, "sh", "-c",
			`rm /bin/sh && printf '`+img.sh+`' > /bin/sh && chmod 755 /bin/sh`).CombinedOutput()
		if err != nil {
			t.Fatalf("make the broken image: %v\n%s", err, out)
		}
		if out, err := exec.Command("docker", "commit", name, "airlock/hostile-broken-sh:"+img.tag).CombinedOutput(); err != nil {
			t.Fatalf("commit the broken image: %v\n%s", err, out)
		}
		exec.Command("docker", "rm", "-f", name).Run()
		tag := img.tag
		t.Cleanup(func() { exec.Command("docker", "rmi", "-f", "airlock/hostile-broken-sh:"+tag).Run() })
	}
}
