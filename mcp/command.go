package mcp

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxOutput is how much of a command's output a result carries: the end,
// where the errors usually are. The engine records all of it.
const maxOutput = 128 << 10

type commandInput struct {
	Argv           []string `json:"argv" jsonschema:"the command and its arguments, run without a shell in /workspace; for pipes or redirections pass [\"sh\", \"-c\", \"...\"]"`
	Stdin          string   `json:"stdin,omitempty" jsonschema:"text given to the command on its standard input"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"stop the command after this many seconds (default: no limit)"`
}

// CommandResult is how a command ended.
type CommandResult struct {
	Session  string `json:"session"`
	Command  int64  `json:"command"` // the engine's record: `airlock logs SESSION`
	ExitCode int    `json:"exit_code"`
	Output   string `json:"output"` // standard output and error, interleaved
	// Dropped counts output bytes left out before Output (it keeps the end).
	Dropped int64 `json:"dropped,omitempty"`
}

func (s *server) addCommandTool(srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{Name: "run_command",
		Description: "Run a command in the session (in /workspace) and return its exit code and output. Long commands report progress as their output arrives. " +
			"What it changes stays in the session for the human to review."},
		s.runCommand)
}

func (s *server) runCommand(ctx context.Context, req *sdk.CallToolRequest, in commandInput) (*sdk.CallToolResult, CommandResult, error) {
	if len(in.Argv) == 0 || in.Argv[0] == "" {
		return nil, CommandResult{}, errdefs.Invalidf("argv is empty: give the command and its arguments, e.g. [\"make\", \"test\"]")
	}
	if in.TimeoutSeconds < 0 {
		return nil, CommandResult{}, errdefs.Invalidf("timeout_seconds must be positive (leave it out for no limit)")
	}
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, CommandResult{}, err
	}
	runCtx := ctx
	if in.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, time.Duration(in.TimeoutSeconds)*time.Second)
		defer cancel()
	}
	out := &tail{limit: maxOutput}
	if tok := req.Params.GetProgressToken(); tok != nil {
		out.progress = func(n int64, last string) {
			req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(n), Message: last})
		}
	}
	res := CommandResult{Session: id}
	xreq := api.ExecRequest{Argv: in.Argv, Stdin: in.Stdin != ""}
	code, err := eng.Exec(runCtx, id, xreq, client.ExecIO{Stdin: strings.NewReader(in.Stdin), Stdout: out, Stderr: out,
		Started: func(st api.ExecStarted) { res.Command = st.Command }}, nil)
	if err != nil {
		if ctx.Err() == nil && runCtx.Err() != nil {
			return nil, res, errdefs.Unavailablef("%s did not end within %d s and was stopped; its output so far:\n%s", in.Argv[0], in.TimeoutSeconds, out.String())
		}
		return nil, res, err
	}
	res.ExitCode, res.Output, res.Dropped = code, out.String(), out.dropped
	msg := "exit code %d"
	if res.Dropped > 0 {
		msg += " (the first %d bytes of output are left out; `airlock logs %s` has them all)"
		return text(msg+"\n%s", code, res.Dropped, id, res.Output), res, nil
	}
	return text(msg+"\n%s", code, res.Output), res, nil
}

// tail keeps the last limit bytes written to it, and reports progress: the
// bytes so far and the last line, at most every progressEvery.
type tail struct {
	limit    int
	progress func(total int64, last string)

	mu       sync.Mutex
	buf      []byte
	dropped  int64
	total    int64
	reported time.Time
}

const progressEvery = 250 * time.Millisecond

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	if t.progress != nil && time.Since(t.reported) >= progressEvery {
		t.reported = time.Now()
		t.progress(t.total, lastLine(t.buf))
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "\uFFFD")
}

// lastLine is the last non-empty line of b, at most 200 bytes of it.
func lastLine(b []byte) string {
	s := strings.TrimRight(string(b), "\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[len(s)-200:]
	}
	return strings.ToValidUTF8(s, "")
}
