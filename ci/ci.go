// Package ci runs Airlock's whole flow for a CI job in one process: an
// engine of its own (no daemon), a session over the checkout, an agent's
// turn or a command, the review under the accept policy and its scanners,
// the patch, the verdict and its markdown summary, optionally the accepted
// changes written into the checkout, and the cleanup. docs/CI.md documents
// the verdict and the exit codes.
package ci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/airlock/airlock/atomicfile"
	"github.com/airlock/airlock/audit"
	"github.com/airlock/airlock/daemon"
	"github.com/airlock/airlock/engine"
	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/timeline"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/harness"
	"github.com/airlock/airlock/names"
	"github.com/airlock/airlock/review"
	"github.com/airlock/airlock/secretscan/gitleaks"
)

// Options say what a run does.
type Options struct {
	Project string
	// Agent runs an agent's turn (Agent.Agent set); otherwise Command runs.
	Agent   api.AgentRequest
	Command []string
	// PolicyFile replaces the project's .airlock/policy.yaml.
	PolicyFile string
	// Out receives changes.patch, verdict.json and (without Summary)
	// summary.md.
	Out string
	// Summary, when set, is a file the markdown summary is appended to
	// ($GITHUB_STEP_SUMMARY).
	Summary string
	// Apply writes the changes that need no human into the project.
	Apply bool
	// Keep leaves the session and its state for debugging.
	Keep bool
	// RequireClean refuses a checkout with uncommitted changes.
	RequireClean bool
	// PatchPerTurn also writes turn-N.patch for each agent turn: what
	// that turn changed, from the session's checkpoints.
	PatchPerTurn bool
	// Create is the session's settings (image, limits, egress, env); its
	// Project is set from Project.
	Create   api.CreateRequest
	Defaults engine.Defaults
	// StateDir is the engine's state ("": a new temporary directory,
	// removed at the end unless Keep).
	StateDir string
	// InputError, when set, is a problem the caller found in its flags
	// (an unreadable prompt file): the run stops there, with a verdict.
	InputError error
	// Progress receives lines for the job's log.
	Progress io.Writer
	Log      *slog.Logger
}

// Run runs the flow and returns its verdict, whose ExitCode is the
// process's. The verdict is always returned, also when the run fails.
func Run(ctx context.Context, o Options) *Verdict {
	t0 := time.Now()
	v := &Verdict{Schema: SchemaVersion, Changes: []Change{}, Held: []HeldFile{}, Findings: []Finding{}, Conflicts: []Conflict{}, Applied: []string{},
		Egress: Egress{Hosts: []string{}, Blocked: []Blockage{}}}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	say := func(format string, args ...any) { fmt.Fprintf(o.Progress, "airlock ci: "+format+"\n", args...) }
	finish := func(outcome, msg string) *Verdict {
		v.Outcome, v.ExitCode, v.Message = outcome, ExitCode(outcome), msg
		v.Timings.Total = time.Since(t0).Seconds()
		return v
	}
	fail := func(err error) *Verdict {
		var oe outputErr
		if errors.As(err, &oe) {
			return finish(OutputFailed, err.Error())
		}
		switch errdefs.ClassOf(err) {
		case errdefs.Invalid, errdefs.NotFound:
			return finish(InvalidInput, err.Error())
		}
		return finish(Infrastructure, err.Error())
	}

	// Everything that can be wrong with the input, before any work.
	if err := check(&o, v); err != nil {
		var oe outputErr
		if errors.As(err, &oe) {
			return finish(OutputFailed, err.Error()) // nowhere to write it
		}
		v = fail(err)
		writeOutputs(o, v)
		return v
	}

	stateDir, owned := o.StateDir, false
	if stateDir == "" {
		d, err := os.MkdirTemp("", "airlock-ci-")
		if err != nil {
			v = finish(Infrastructure, fmt.Sprintf("make the engine's state directory: %v", err))
			writeOutputs(o, v)
			return v
		}
		stateDir, owned = d, true
	}
	e, closeEngine, err := startEngine(ctx, o, stateDir)
	if err != nil {
		if owned {
			os.RemoveAll(stateDir)
		}
		v = fail(err)
		writeOutputs(o, v)
		return v
	}
	defer func() {
		closeEngine()
		if owned && !o.Keep {
			os.RemoveAll(stateDir)
		}
	}()

	v = work(ctx, o, e, v, say, finish, fail)
	if v.Session != "" {
		writeAudit(ctx, o, e, v, say)
	}
	if !o.Keep && v.Session != "" {
		if err := e.Remove(context.WithoutCancel(ctx), v.Session); err != nil {
			say("could not remove session %s: %v", v.Session, err)
		}
	} else if o.Keep && v.Session != "" {
		v.Kept = true
		say("kept session %s for debugging: `sudo airlock serve --state-dir %s --engine %s/engine.sock &`, then `AIRLOCK_ENGINE=%s/engine.sock airlock diff %s`", v.Session, stateDir, stateDir, stateDir, v.Session)
	}
	v.Timings.Total = time.Since(t0).Seconds()
	writeOutputs(o, v)
	return v
}

// AuditFile is the run's audit bundle in out/.
const AuditFile = "audit.tar.gz"

var _ audit.Source = (*engine.Engine)(nil)

// writeAudit writes the session's audit bundle beside the verdict. A
// bundle that cannot be written is said in the job's log; the verdict
// stays the work's.
func writeAudit(ctx context.Context, o Options, e *engine.Engine, v *Verdict, say func(string, ...any)) {
	err := atomicfile.WriteFrom(filepath.Join(o.Out, AuditFile), 0o644, func(w io.Writer) error {
		_, err := audit.Write(context.WithoutCancel(ctx), e, v.Session, w)
		return err
	})
	if err != nil {
		say("could not write the audit bundle: %v", err)
		return
	}
	v.Audit = AuditFile
}

// check validates the input and fills the project's facts.
func check(o *Options, v *Verdict) error {
	if o.Out == "" {
		return errdefs.Invalidf("no output directory: give --out DIR")
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return outputError(o.Out, err)
	}
	probe, err := os.CreateTemp(o.Out, ".airlock-probe-*")
	if err != nil {
		return outputError(o.Out, err)
	}
	_, werr := probe.Write(make([]byte, 4096))
	if err := probe.Sync(); werr == nil {
		werr = err
	}
	probe.Close()
	os.Remove(probe.Name())
	if werr != nil {
		return outputError(o.Out, werr)
	}
	if o.InputError != nil {
		return errdefs.Wrap(errdefs.Invalid, o.InputError)
	}
	abs, err := filepath.Abs(o.Project)
	if err != nil {
		return errdefs.Invalidf("project %s: %v", o.Project, err)
	}
	o.Project = abs
	v.Project.Path = abs
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return errdefs.Invalidf("project %s is not a directory: run in the checkout or give --project", abs)
	}
	if head, dirty, ok := gitState(abs); ok {
		v.Project.Head, v.Project.Dirty = head, dirty
		if dirty && o.RequireClean {
			return errdefs.Invalidf("the checkout %s has uncommitted changes and --require-clean is set: commit or stash them (without --require-clean the session starts from them, and the patch is relative to them)", abs)
		}
	}
	if o.Agent.Agent == "" && len(o.Command) == 0 {
		return errdefs.Invalidf("nothing to run: give --agent and --prompt (or --prompt-file), or a command after --")
	}
	if o.Agent.Agent != "" {
		if len(o.Command) > 0 {
			return errdefs.Invalidf("give an agent or a command, not both")
		}
		if _, err := harness.Lookup(o.Agent.Agent); err != nil {
			return errdefs.Invalidf("%v", err)
		}
		if strings.TrimSpace(o.Agent.Prompt) == "" {
			return errdefs.Invalidf("the prompt is empty: give --prompt or a --prompt-file with the task")
		}
	}
	policy := o.PolicyFile
	optional := false
	if policy == "" {
		policy, optional = filepath.Join(abs, review.PolicyFile), true
	}
	if _, err := review.LoadPolicy(policy, optional); err != nil {
		return errdefs.Invalidf("%v: fix the policy file (docs/CI.md shows one)", err)
	}
	return nil
}

// outputErr marks a failure to write out/.
type outputErr struct{ error }

func outputError(dir string, err error) error {
	hint := "choose another --out"
	if errors.Is(err, syscall.ENOSPC) {
		hint = "free space there or choose another --out"
	}
	return outputErr{fmt.Errorf("cannot write the output directory %s (%v): %s", dir, err, hint)}
}

func gitState(dir string) (head string, dirty, ok bool) {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false, false
	}
	st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=normal").Output()
	if err != nil {
		return strings.TrimSpace(string(out)), false, true
	}
	return strings.TrimSpace(string(out)), len(bytes.TrimSpace(st)) > 0, true
}

// startEngine assembles the run's own engine: its state directory (so its
// own SQLite file and secrets key), the run's policy for every session,
// no idle pauses within a job, and no warm pool (a run makes one session:
// warm containers would be made only to be removed).
func startEngine(ctx context.Context, o Options, stateDir string) (*engine.Engine, func(), error) {
	defs := o.Defaults
	defs.WarmPool = -1
	// Secrets are looked for in this process (`airlock ci` needs no
	// airlock-scan beside it), with the rules compiled while the engine
	// and the session start: every run is reviewed.
	secrets := gitleaks.New()
	secrets.Warm()
	d, err := daemon.Assemble(ctx, daemon.Options{StateDir: stateDir, Defaults: defs, Logger: o.Log, PolicyFile: o.PolicyFile, IdleCheck: time.Hour,
		NeverAsk: true, // nobody answers in ci: under --net ask, undecided is denied
		Secrets:  secrets})
	if err != nil {
		return nil, nil, err
	}
	return d.Engine, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Close(cctx)
	}, nil
}

// work runs the session as steps, each of which fills its part of v:
// create, the agent or command, the review, the patches, the apply, and
// the outcome they add up to.
func work(ctx context.Context, o Options, e *engine.Engine, v *Verdict, say func(string, ...any), finish func(string, string) *Verdict, fail func(error) *Verdict) *Verdict {
	t := time.Now()
	req := o.Create
	req.Project = o.Project
	s, err := e.Create(ctx, req)
	if err != nil {
		return fail(err)
	}
	v.Session = s.ID
	v.Timings.Create = time.Since(t).Seconds()
	say("session %s on %s (%s)", s.ID, o.Project, s.Image)

	t = time.Now()
	workFailed, err := runWork(ctx, o, e, v, say)
	if err != nil {
		return fail(err)
	}
	v.Timings.Work = time.Since(t).Seconds()

	t = time.Now()
	d, err := e.Diff(ctx, s.ID, nil)
	if err != nil {
		return fail(err)
	}
	listChanges(d, v)
	if err := writePatches(ctx, o, e, d, v); err != nil {
		return fail(err)
	}
	egress(ctx, e, s.ID, v)
	if m, err := e.Meter(ctx, s.ID); err == nil {
		v.Usage = Usage{CPUSeconds: m.CPUSeconds, CostUSD: m.CostUSD, MemoryPeak: m.MemoryPeak, WorkspaceBytes: m.WorkspaceBytes}
	}
	v.Timings.Review = time.Since(t).Seconds()
	say("%d changed, %d held, %d flagged, %d in conflict", len(v.Changes), len(v.Held), len(v.Findings), len(v.Conflicts))

	if o.Apply && workFailed == "" {
		t = time.Now()
		if err := apply(ctx, o, e, d, v, say); err != nil {
			return fail(err)
		}
		v.Timings.Apply = time.Since(t).Seconds()
	}

	switch {
	case workFailed != "":
		return finish(AgentFailed, workFailed+": see verdict.json and the log above")
	case len(v.Findings) > 0:
		return finish(Violation, fmt.Sprintf("%d finding(s) in the changes (%s): nothing flagged was applied; read changes.patch", len(v.Findings), scanners(v.Findings)))
	case len(v.Held) > 0 || len(v.Conflicts) > 0:
		return finish(Held, fmt.Sprintf("%d change(s) need a human (%d held by policy, %d in conflict): review changes.patch", len(v.Held)+len(v.Conflicts), len(v.Held), len(v.Conflicts)))
	}
	msg := fmt.Sprintf("%d change(s)", len(v.Changes))
	if o.Apply {
		msg += fmt.Sprintf(", %d applied to the checkout", len(v.Applied))
	}
	return finish(Success, msg)
}

// runWork runs the agent's turn or the command in session v.Session and
// says how it failed ("" when it did not); err is a failure to run it at
// all.
func runWork(ctx context.Context, o Options, e *engine.Engine, v *Verdict, say func(string, ...any)) (failed string, err error) {
	if o.Agent.Agent == "" {
		// The output goes to the progress stream only: a command may print
		// more than fits in memory.
		code, err := e.Exec(ctx, v.Session, api.ExecRequest{Argv: o.Command}, engine.ExecIO{Stdout: o.Progress, Stderr: o.Progress})
		if err != nil {
			return "", err
		}
		v.Command = &CommandResult{Argv: o.Command, ExitCode: code}
		if code != 0 {
			return fmt.Sprintf("the command exited %d", code), nil
		}
		return "", nil
	}
	events := 0
	turn, err := e.Agent(ctx, v.Session, o.Agent, func(ev api.Event) {
		events++
		switch ev.Type {
		case "tool_call":
			say("agent: %s %s", ev.Tool, oneLine(ev.Input))
		case "file_edit":
			say("agent: edits %s", names.Quote(ev.Path))
		case "error":
			say("agent error: %s", oneLine(ev.Text))
		}
	})
	if err != nil && turn.N == 0 {
		return "", err
	}
	v.Agent = &AgentResult{Agent: turn.Agent, Model: turn.Model, State: turn.State, ExitCode: turn.ExitCode, Final: turn.Final,
		Result: turn.Result, Error: turn.Error, Tokens: turn.Usage, Events: events}
	if err != nil || turn.State != "done" {
		return fmt.Sprintf("the agent's turn %s: %s", turn.State, firstNonEmpty(turn.Error, errString(err))), nil
	}
	return "", nil
}

// listChanges fills v's changes, holds, findings and conflicts from the
// review d.
func listChanges(d api.Diff, v *Verdict) {
	v.Ignored, v.SessionIgnored = d.Ignored, d.SessionIgnored
	stats := map[string]api.Stat{}
	for _, st := range d.Stats {
		stats[st.Path] = st
	}
	for _, f := range d.Files {
		st := stats[f.Path]
		c := Change{Path: f.Path, Kind: string(f.Kind), From: f.From, Added: st.Added, Removed: st.Removed, Binary: f.Binary,
			Held: f.Held != "", Flagged: len(f.Findings) > 0, Conflict: f.Conflict}
		v.Changes = append(v.Changes, c)
		if f.Held != "" {
			v.Held = append(v.Held, HeldFile{Path: f.Path, Reason: f.Held})
		}
		for _, x := range f.Findings {
			v.Findings = append(v.Findings, Finding{Path: f.Path, Scanner: x.Scanner, Message: x.Message, Line: x.Line})
		}
		if f.Conflict {
			v.Conflicts = append(v.Conflicts, Conflict{Path: f.Path, Reason: f.ConflictReason})
		}
	}
}

// writePatches writes changes.patch (streamed into the file, which
// appears whole or not at all) and, when asked, a patch per turn. A
// failure to write them is an outputErr; any other is the review's.
func writePatches(ctx context.Context, o Options, e *engine.Engine, d api.Diff, v *Verdict) error {
	if len(d.Files) > 0 {
		out := &recordingWriter{}
		var patchErr error
		err := atomicfile.WriteFrom(filepath.Join(o.Out, "changes.patch"), 0o644, func(w io.Writer) error {
			out.w = w
			patchErr = e.Patch(ctx, v.Session, nil, out)
			return patchErr
		})
		switch {
		case patchErr != nil && out.err == nil:
			return patchErr
		case err != nil:
			return outputError(o.Out, err)
		}
		v.Patch = "changes.patch"
	}
	if o.PatchPerTurn {
		if err := turnPatches(ctx, e, v.Session, o.Out, v); err != nil {
			return outputError(o.Out, err)
		}
	}
	return nil
}

// apply accepts what nothing holds, flags or leaves in conflict (and,
// with auto_accept globs in the policy, what they match), pinned to the
// digests of review d: what is applied is what the verdict, the patch and
// the scanners saw, or nothing.
func apply(ctx context.Context, o Options, e *engine.Engine, d api.Diff, v *Verdict, say func(string, ...any)) error {
	sel := api.Selection{Digests: map[string]string{}}
	reviewed := map[string]api.FileDiff{}
	for _, f := range d.Files {
		reviewed[f.Path] = f
	}
	for i, c := range v.Changes {
		if !c.Held && !c.Flagged && !c.Conflict && autoAccepted(d.Files, c.Path) {
			sel.Paths = append(sel.Paths, c.Path)
			sel.Digests[reviewed[c.Path].ID] = reviewed[c.Path].Digest
			v.Changes[i].Applied = true
		}
	}
	if len(sel.Paths) == 0 {
		return nil
	}
	out, err := e.Accept(ctx, v.Session, sel)
	if err != nil {
		for i := range v.Changes {
			v.Changes[i].Applied = false
		}
		return err // a change since the review: nothing was written
	}
	for _, oc := range out.Outcomes {
		if !oc.Applied {
			return errdefs.Unavailablef("writing %s into the checkout failed: %s (nothing was written)", names.Quote(oc.Path), names.Safe(oc.Error))
		}
		v.Applied = append(v.Applied, oc.Path)
	}
	say("applied %d change(s) to %s", len(v.Applied), o.Project)
	return nil
}

// autoAccepted: with auto_accept globs in the policy, only the paths they
// match are applied; without any, every change nothing holds.
func autoAccepted(files []api.FileDiff, path string) bool {
	any := false
	for _, f := range files {
		any = any || f.AutoAccept
	}
	if !any {
		return true
	}
	for _, f := range files {
		if f.Path == path {
			return f.AutoAccept
		}
	}
	return false
}

func egress(ctx context.Context, e *engine.Engine, id string, v *Verdict) {
	log, err := e.EgressLog(ctx, id, false, 0)
	if err != nil {
		return
	}
	hosts := map[string]bool{}
	for _, c := range log {
		if c.Kind == "dns" {
			continue
		}
		v.Egress.Connections++
		v.Egress.BytesOut += c.BytesOut
		v.Egress.BytesIn += c.BytesIn
		if c.Allowed {
			hosts[c.Host] = true
		} else {
			v.Egress.Blocked = append(v.Egress.Blocked, Blockage{Host: c.Host, Port: c.Port, Kind: c.Kind, Rule: c.Rule, Reason: c.Reason})
		}
	}
	for h := range hosts {
		v.Egress.Hosts = append(v.Egress.Hosts, h)
	}
	sort.Strings(v.Egress.Hosts)
}

func scanners(fs []Finding) string {
	seen := map[string]bool{}
	var out []string
	for _, f := range fs {
		if !seen[f.Scanner] {
			seen[f.Scanner] = true
			out = append(out, f.Scanner)
		}
	}
	return strings.Join(out, ", ")
}

// writeOutputs writes verdict.json and the summary. A failure to write
// them turns the verdict into OutputFailed (printed by the caller).
func writeOutputs(o Options, v *Verdict) {
	if o.Out == "" {
		return
	}
	data, _ := json.MarshalIndent(v, "", "  ")
	if err := atomicfile.Write(filepath.Join(o.Out, "verdict.json"), append(data, '\n'), 0o644); err != nil {
		v.Outcome, v.ExitCode, v.Message = OutputFailed, ExitCode(OutputFailed), outputError(o.Out, err).Error()
		return
	}
	md := Summary(v)
	if o.Summary != "" {
		f, err := os.OpenFile(o.Summary, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			_, err = f.WriteString(md)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			v.Outcome, v.ExitCode, v.Message = OutputFailed, ExitCode(OutputFailed), fmt.Sprintf("cannot write the step summary %s: %v", o.Summary, err)
		}
		return
	}
	if err := atomicfile.Write(filepath.Join(o.Out, "summary.md"), []byte(md), 0o644); err != nil {
		v.Outcome, v.ExitCode, v.Message = OutputFailed, ExitCode(OutputFailed), outputError(o.Out, err).Error()
	}
}

func oneLine(s string) string {
	s = names.Safe(strings.Join(strings.Fields(s), " "))
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// recordingWriter remembers its writer's first error.
type recordingWriter struct {
	w   io.Writer
	err error
}

func (r *recordingWriter) Write(b []byte) (int, error) {
	n, err := r.w.Write(b)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// turnPatches writes turn-N.patch for each agent turn of the session
// (what the turn changed, from its checkpoints) and lists them in v.
func turnPatches(ctx context.Context, e *engine.Engine, id, out string, v *Verdict) error {
	list, err := e.Checkpoints(ctx, id)
	if err != nil {
		return err
	}
	for _, c := range list {
		if c.Kind != api.CheckpointTurn {
			continue
		}
		d, err := e.CheckpointDiff(ctx, id, api.CheckpointDiffQuery{Turn: c.Turn})
		if err != nil {
			return err
		}
		name := fmt.Sprintf("turn-%d.patch", c.Turn)
		if err := atomicfile.WriteFrom(filepath.Join(out, name), 0o644, func(w io.Writer) error { return timeline.WritePatch(w, d.Files) }); err != nil {
			return err
		}
		v.TurnPatches = append(v.TurnPatches, name)
	}
	return nil
}
