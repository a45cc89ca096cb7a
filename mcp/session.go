package mcp

import (
	"context"
	"strings"

	"github.com/airlock/airlock/engine/api"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type createInput struct {
	Image   string   `json:"image,omitempty" jsonschema:"local image to run (default: the one airlock mcp was started with, else the engine's default)"`
	Network string   `json:"network,omitempty" jsonschema:"network policy: allow-all, deny-all or custom (the engine's default: model APIs and package registries)"`
	Allow   []string `json:"allow,omitempty" jsonschema:"hosts the session may reach besides the policy's: example.com, *.example.com or a CIDR, each with an optional :PORT"`
	Deny    []string `json:"deny,omitempty" jsonschema:"hosts the session may never reach (same forms; deny beats allow)"`
}

// SessionInfo describes the session the tools work in.
type SessionInfo struct {
	Session string `json:"session"`
	Project string `json:"project"`
	Image   string `json:"image"`
	State   string `json:"state"`
	Network string `json:"network,omitempty"`
	// Changed counts the paths the session changed (-1: unreadable).
	Changed int `json:"changed"`
}

func info(s api.Session) SessionInfo {
	out := SessionInfo{Session: s.ID, Project: s.Project, Image: s.Image, State: s.State, Changed: s.Changed}
	if s.Egress != nil {
		out.Network = s.Egress.Mode
	}
	return out
}

func (i SessionInfo) String() string {
	var b strings.Builder
	b.WriteString("session " + i.Session + " (project " + i.Project + ", image " + i.Image + ", " + i.State)
	if i.Network != "" {
		b.WriteString(", network " + i.Network)
	}
	b.WriteString(")")
	return b.String()
}

func (s *server) addSessionTools(srv *sdk.Server) {
	in, err := jsonschema.For[createInput](nil)
	if err != nil {
		panic(err)
	}
	in.Properties["network"].Enum = []any{"allow-all", "deny-all", "custom"}
	sdk.AddTool(srv, &sdk.Tool{Name: "create_session", InputSchema: in,
		Description: "Create a new Airlock session over the project and work in it from now on. Optional: the tools create one with the defaults on first use. " +
			"The session before it stays as it is, for the human to review."},
		s.createSession)
	sdk.AddTool(srv, &sdk.Tool{Name: "session_info",
		Description: "Show the session the tools work in: its id (what the human reviews with `airlock diff ID`), project, image, state, network policy and how many paths it changed."},
		s.sessionInfo)
}

func (s *server) createSession(ctx context.Context, _ *sdk.CallToolRequest, in createInput) (*sdk.CallToolResult, SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	eng, err := s.engineLocked(ctx)
	if err != nil {
		return nil, SessionInfo{}, err
	}
	req := s.opts.Create
	if req.Project == "" && s.session != "" { // attached with --session only: its project
		cur, err := eng.Session(ctx, s.session)
		if err != nil {
			return nil, SessionInfo{}, err
		}
		req.Project = cur.Project
	}
	if in.Image != "" {
		req.Image = in.Image
	}
	if in.Network != "" || len(in.Allow) > 0 || len(in.Deny) > 0 {
		p := api.EgressPolicy{Mode: in.Network, Allow: in.Allow, Deny: in.Deny}
		if req.Egress != nil { // rules add to those airlock mcp was given
			p.Allow = append(append([]string(nil), req.Egress.Allow...), in.Allow...)
			p.Deny = append(append([]string(nil), req.Egress.Deny...), in.Deny...)
			p.Inject, p.Private, p.Inspect = req.Egress.Inject, req.Egress.Private, req.Egress.Inspect
			if p.Mode == "" {
				p.Mode = req.Egress.Mode
			}
		}
		req.Egress = &p
	}
	sess, err := s.createLocked(ctx, eng, req)
	if err != nil {
		return nil, SessionInfo{}, err
	}
	out := info(sess)
	return text("created %s; the tools work in it now", out), out, nil
}

func (s *server) sessionInfo(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, SessionInfo, error) {
	eng, id, err := s.current(ctx)
	if err != nil {
		return nil, SessionInfo{}, err
	}
	sess, err := eng.Session(ctx, id)
	if err != nil {
		return nil, SessionInfo{}, err
	}
	out := info(sess)
	return text("%s; %d changed path(s): the human reviews them with `airlock diff %s`", out, out.Changed, out.Session), out, nil
}
