package agent

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/harness"
)

// runTurn runs the agent, once more if its answer does not match the
// schema, and records the turn's end. The agent's key variable holds a
// placeholder: the real key never enters the session (canInject).
func (r *Runner) runTurn(ctx context.Context, p plan, turn api.Turn, sink func(api.Event)) api.Turn {
	rec := &recorder{r: r, ctx: ctx, ag: p.ag, turn: turn, costBefore: p.costBefore, sink: sink}
	cpuStart := r.sessions.CPU(p.sess.ID)
	code, final, err := r.attempt(ctx, p, p.t, rec)
	if err == nil && p.schema != nil {
		result, verr := p.schema.Check(final)
		if verr != nil {
			rec.emit(harness.Event{Type: harness.EventError, Text: "the final answer does not match the schema (" + verr.Error() + "): asking the agent once more"})
			retry := p.t
			if p.ag.Continues && rec.turn.AgentSession != "" {
				retry.Prompt, retry.Resume = p.schema.Retry(verr), rec.turn.AgentSession
			} else {
				retry.Prompt = p.t.Prompt + "\n\n" + p.schema.Retry(verr)
			}
			code, final, err = r.attempt(ctx, p, retry, rec)
			if err == nil {
				result, verr = p.schema.Check(final)
			}
		}
		if err == nil && verr != nil {
			err = fmt.Errorf("the agent's final answer does not match the schema after one retry: %v (its raw answer is kept: `airlock events %s --turn %d`)", verr, p.sess.ID, turn.N)
		}
		rec.turn.Result = result
	}
	return rec.finish(max(0, r.sessions.CPU(p.sess.ID)-cpuStart), code, final, err)
}

// attempt runs the agent's command line once and passes what it prints
// through its parser to rec. It returns the CLI's exit code and final
// answer, and an error that says what to do when the CLI failed.
func (r *Runner) attempt(ctx context.Context, p plan, t harness.Turn, rec *recorder) (int, string, error) {
	ag := p.ag
	inv, err := ag.Command(t)
	if err != nil {
		return -1, "", err
	}
	env := inv.Env
	if ag.KeyEnv != "" {
		env = append(append([]string(nil), env...), ag.KeyEnv+"="+keyPlaceholder)
	}
	parser := ag.NewParser(t)
	stdout := &lineWriter{fn: func(line []byte) {
		for _, ev := range parser.Line(line) {
			rec.emit(ev)
		}
	}}
	stderr := newTailLines(5)
	code, err := r.sessions.Exec(ctx, p.sess.ID, inv.Argv, env, stdout, stderr)
	stdout.flush()
	stderr.flush()
	for _, ev := range parser.End() {
		rec.emit(ev)
	}
	if err == nil && code != 0 {
		switch code {
		case 127:
			err = fmt.Errorf("%s is not installed in this session's image (exit 127): build one with `airlock image build --agents %s`", ag.Title, ag.Name)
		case 137:
			err = fmt.Errorf("%s was killed (exit 137), most often by the session's memory cap of %d MiB: start the session with a larger --memory%s",
				ag.Title, p.sess.Memory>>20, stderr.last(3))
		default:
			err = fmt.Errorf("%s exited with code %d%s", ag.Title, code, stderr.last(5))
		}
	}
	return code, parser.Final(), err
}

// recorder numbers, stores and passes on one turn's events, and keeps
// what the turn's record needs from them.
type recorder struct {
	r          *Runner
	ctx        context.Context // of the turn, which outlives its caller
	ag         *harness.Agent
	turn       api.Turn
	usage      harness.Usage
	costBefore float64 // for CLIs that report the conversation's cost
	sink       func(api.Event)
}

func (rc *recorder) emit(ev harness.Event) {
	ev.Turn = rc.turn.N
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	switch ev.Type {
	case harness.EventUsage:
		if ev.Usage != nil {
			if rc.ag.CumulativeCost {
				u := *ev.Usage
				u.CostUSD = max(0, u.CostUSD-rc.costBefore)
				rc.costBefore += u.CostUSD
				ev.Usage = &u
			}
			rc.usage.Add(*ev.Usage)
		}
	case harness.EventSession:
		if ev.Session != "" && ev.Session != rc.turn.AgentSession && rc.ag.Continues {
			rc.turn.AgentSession = ev.Session
			if err := rc.r.store.SetAgentSession(rc.ctx, rc.turn.Session, rc.turn.N, ev.Session); err != nil {
				rc.r.log.Warn("record an agent's conversation", "session", rc.turn.Session, "err", err)
			}
		}
	}
	if err := rc.r.store.AddEvent(rc.ctx, rc.turn.Session, ev); err != nil {
		rc.r.log.Warn("store an agent event", "session", rc.turn.Session, "err", err)
	}
	rc.sink(APIEvent(ev))
}

// finish records the turn's end and sends its last event.
func (rc *recorder) finish(cpu time.Duration, code int, final string, err error) api.Turn {
	t := rc.turn
	t.CPUSeconds = cpu.Seconds()
	t.ExitCode = &code
	t.Final = final
	t.Usage = api.Usage(rc.usage)
	t.State = "done"
	if err != nil {
		t.State, t.Error = "failed", err.Error()
		rc.emit(harness.Event{Type: harness.EventError, Text: err.Error()})
	}
	now := time.Now()
	t.Ended = &now
	usage := rc.usage
	rc.emit(harness.Event{Type: harness.EventTurnDone, Text: final, ExitCode: &code, Usage: &usage, Session: t.AgentSession, Result: t.Result})
	if err := rc.r.store.FinishTurn(rc.ctx, t); err != nil {
		rc.r.log.Warn("record a turn's end", "session", t.Session, "err", err)
	}
	return t
}

// lineWriter calls fn with each line written to it (without the newline).
// A line is passed on in pieces once 4 MiB of it are held.
type lineWriter struct {
	fn  func([]byte)
	buf []byte
}

const maxLine = 4 << 20

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) >= maxLine {
				w.fn(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.fn(bytes.TrimRight(w.buf[:i], "\r"))
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.fn(w.buf)
		w.buf = nil
	}
}

// tailLines keeps the last n non-empty lines written to it (each cut to
// 1 KiB), for a failure message.
type tailLines struct {
	lineWriter
	n     int
	lines []string
}

func newTailLines(n int) *tailLines {
	t := &tailLines{n: n}
	t.fn = func(line []byte) {
		l := strings.TrimSpace(strings.ToValidUTF8(string(line[:min(len(line), 1<<10)]), "?"))
		if l == "" {
			return
		}
		t.lines = append(t.lines, l)
		if len(t.lines) > t.n {
			t.lines = t.lines[len(t.lines)-t.n:]
		}
	}
	return t
}

// last is ": " and the last n lines joined, or "".
func (t *tailLines) last(n int) string {
	keep := t.lines[max(0, len(t.lines)-n):]
	if len(keep) == 0 {
		return ""
	}
	return ": " + strings.Join(keep, " | ")
}
