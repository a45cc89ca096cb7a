// Package mcp is `airlock mcp`: a Model Context Protocol server (on the
// official Go SDK) through which an agent client — Claude Code, Codex,
// Cursor, Claude Desktop — works inside an Airlock session instead of on
// the host. Its tools run commands and read, write and list files in the
// session, show the session's diff, list its checkpoints (one per agent
// turn and per command) with what each changed, and take snapshots;
// accepting the changes into the project stays with the human unless the
// server was started with AllowAccept, and even then the project's policy and
// scanners decide what is left in the session.
//
// It is a client of the engine's API (engine/client) and nothing more: it
// imports no engine internals.
package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/engine/client"
	"github.com/airlock/airlock/errdefs"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Engine is what the server asks of the engine: the client calls it makes.
type Engine interface {
	Session(ctx context.Context, id string) (api.Session, error)
	Create(ctx context.Context, req api.CreateRequest) (api.Session, error)
	Exec(ctx context.Context, id string, req api.ExecRequest, sio client.ExecIO, control func(*client.Exec)) (int, error)
	DiffStat(ctx context.Context, id string, paths []string) (api.Diff, error)
	Patch(ctx context.Context, id string, paths []string, w io.Writer) error
	Snapshot(ctx context.Context, id string, req api.SnapshotRequest) (api.Snapshot, error)
	Snapshots(ctx context.Context) ([]api.Snapshot, error)
	Accept(ctx context.Context, id string, sel api.Selection) (api.Outcomes, error)
	Checkpoints(ctx context.Context, id string) ([]api.Checkpoint, error)
	CheckpointDiff(ctx context.Context, id string, q api.CheckpointDiffQuery) (api.Diff, error)
}

var _ Engine = (*client.Client)(nil)

// Options configure a server.
type Options struct {
	// Create is the request sessions are created with (the project, and the
	// image, network policy and limits a create_session call does not name).
	// Its Project must be absolute; it may be empty only with Session.
	Create api.CreateRequest
	// Session, when set, is the session the tools work in from the start
	// (`--session ID`); it must be over Create.Project when that is set.
	Session string
	// AllowAccept adds the accept tool. Without it accepting stays with the
	// human (`airlock accept`).
	AllowAccept bool
	// Version is reported to clients as the server's version.
	Version string
	// Logger receives the SDK's protocol log; nil logs nothing.
	Logger *slog.Logger
}

// New returns the MCP server. connect is called when a tool first needs the
// engine (and again after it failed), so a server whose engine is down
// still starts and answers each tool call with what to do.
func New(connect func(context.Context) (Engine, error), o Options) *sdk.Server {
	s := &server{connect: connect, opts: o, session: o.Session}
	srv := sdk.NewServer(&sdk.Implementation{Name: "airlock", Title: "Airlock", Version: o.Version},
		&sdk.ServerOptions{Instructions: instructions(o.AllowAccept), Logger: o.Logger})
	s.addSessionTools(srv)
	s.addCommandTool(srv)
	s.addFileTools(srv)
	s.addReviewTools(srv)
	s.addCheckpointTools(srv)
	return srv
}

func instructions(allowAccept bool) string {
	text := "These tools work inside an Airlock session: a container whose /workspace is a copy-on-write view of the project. " +
		"Commands run and files are written in the session only; the project on the host is untouched until a human reviews the session's diff and accepts it. " +
		"Paths are relative to /workspace (or absolute below it). A session is created on first use (create_session chooses the image and network policy)."
	if allowAccept {
		return text + " The accept tool writes the session's changes into the project, except what the project's policy holds or a scanner flags: those stay for a human."
	}
	return text + " Accepting is left to the human: tell them the session id and to run `airlock diff ID` and `airlock accept ID`."
}

// server holds the engine client and the session the tools work in.
type server struct {
	connect func(context.Context) (Engine, error)
	opts    Options

	mu       sync.Mutex
	eng      Engine
	session  string // the session the tools work in; "" until one is made
	attached bool   // session was checked against the project
}

func (s *server) engineLocked(ctx context.Context) (Engine, error) {
	if s.eng != nil {
		return s.eng, nil
	}
	eng, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.eng = eng
	return eng, nil
}

// current returns the engine and the session the tools work in, creating
// the session with the server's defaults when there is none yet.
func (s *server) current(ctx context.Context) (Engine, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	eng, err := s.engineLocked(ctx)
	if err != nil {
		return nil, "", err
	}
	if s.session == "" {
		sess, err := s.createLocked(ctx, eng, s.opts.Create)
		if err != nil {
			return nil, "", err
		}
		return eng, sess.ID, nil
	}
	if !s.attached {
		sess, err := eng.Session(ctx, s.session)
		if err != nil {
			return nil, "", err
		}
		if p := s.opts.Create.Project; p != "" && sess.Project != p {
			return nil, "", errdefs.Invalidf("session %s works on %s, not on %s: start `airlock mcp` with that project or without --session", sess.ID, sess.Project, p)
		}
		s.session, s.attached = sess.ID, true
	}
	return eng, s.session, nil
}

// createLocked makes a session and makes it the one the tools work in.
func (s *server) createLocked(ctx context.Context, eng Engine, req api.CreateRequest) (api.Session, error) {
	if req.Project == "" {
		return api.Session{}, errdefs.Invalidf("no project to make a session of: start `airlock mcp --project DIR`")
	}
	sess, err := eng.Create(ctx, req)
	if err != nil {
		return api.Session{}, err
	}
	s.session, s.attached = sess.ID, true
	return sess, nil
}

// text is a tool result showing a text to the model.
func text(format string, args ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, args...)}}}
}
